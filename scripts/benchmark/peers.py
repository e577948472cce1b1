"""The peer loops: installs each into a benchmark venv only from a wheel
(``pip install --only-binary :all:``; a peer is never compiled) and records
why one could not install; picks the second Python to benchmark on.

    python -m benchmark.peers install OUT.json     # into this interpreter
    python -m benchmark.peers choose PYTHON...     # prints the one to use

``install`` writes {peer: "ok" or the reason} (pip's message, shortened,
and what the newest release's wheels need, from pip's -vv log).
``choose`` prints, of the given interpreters, the newest of those on which
the most peers have a wheel (asked with ``pip install --dry-run
--python-version X.Y``; answers cached for a day in build/bench-cache).
"""

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

PEERS = ("uvloop", "rloop", "zloop", "rsloop", "zuvloop", "blazio")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, "build", "bench-cache", "peer-wheels.json")


def pip(python, *args):
    return subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True, check=False)


_TAGS = re.compile(r"none of the wheel's tags \(([^)]*)\) are compatible.*?/([^/\s]+\.whl)")
_REQ = re.compile(
    r"Skipping link: .*?/([^/\s]+?)(?:\.tar\.gz|\.zip|\.whl).*requires-python:([^)]+)"
)


def _version_of(filename, peer):
    m = re.match(rf"{peer}-([0-9][^-]*)", filename.replace("_", "-"), re.IGNORECASE)
    return m.group(1) if m else None


def _vkey(v):
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.+-]", v))


def reason(python, peer, output):
    """pip's error, shortened, and what the newest release's wheels need."""
    errors = [line[7:].strip() for line in output.splitlines() if line.startswith("ERROR: ")]
    short = errors[-1] if errors else (output.strip().splitlines() or ["pip failed"])[-1]
    short = short[:160]
    with tempfile.TemporaryDirectory() as tmp:
        log = pip(python, "download", "--no-deps", "--only-binary", ":all:", "-d", tmp, "-vv", peer)
    text = log.stdout + log.stderr
    wheels = {}  # version -> [tags]
    for tags, fname in _TAGS.findall(text):
        v = _version_of(fname, peer)
        if v:
            wheels.setdefault(v, []).append(tags)
    requires = {}
    for fname, spec in _REQ.findall(text):
        v = _version_of(fname, peer)
        if v:
            requires[v] = spec.strip()
    versions = sorted(set(wheels) | set(requires), key=_vkey)
    if not versions:
        return f"pip: {short}"
    newest = versions[-1]
    if newest in requires and not _satisfies(python, requires[newest]):
        return f"pip: {short}; {peer} {newest} requires Python {requires[newest]}"
    cp = "cp{}{}".format(*sys.version_info[:2]) if python == sys.executable else None
    # a free-threaded interpreter takes only its own ABI's wheels (cp314t)
    abi = cp + "t" if cp and "t" in sys.abiflags else None
    arch = platform.machine()
    mine = [
        t
        for t in wheels.get(newest, [])
        if arch in t
        and "linux" in t
        and (cp is None or t.startswith(cp))
        and (abi is None or t.split("-")[1:2] == [abi])
    ]
    libc = " ".join(platform.libc_ver()) or "?"
    if mine:
        need = sorted({m.group(0) for t in mine for m in [re.search(r"manylinux_\d+_\d+", t)] if m})
        return (
            f"pip: {short}; {peer} {newest}'s Linux {arch} wheels are "
            f"{', '.join(need) or ', '.join(mine)} (this machine: {libc})"
        )
    tags = sorted({"-".join(t.split("-")[: 2 if abi else 1]) for t in wheels.get(newest, [])})
    return f"pip: {short}; {peer} {newest} has wheels for {', '.join(tags)} only"


def _satisfies(python, spec):
    """False only for a `>=X.Y` that `python` is older than (else True)."""
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)(?:\.\d+)?", spec.split(",")[0].strip())
    if not m:
        return True
    return tuple(map(int, _minor(python).split("."))) >= (int(m.group(1)), int(m.group(2)))


def install(out_path):
    result = {}
    for peer in PEERS:
        proc = pip(sys.executable, "install", "-q", "--only-binary", ":all:", peer)
        if proc.returncode == 0:
            result[peer] = "ok"
        else:
            result[peer] = reason(sys.executable, peer, proc.stdout + proc.stderr)
        print(f"# {peer}: {result[peer]}", file=sys.stderr, flush=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


def _minor(python):
    out = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def wheel_count(minor, cache):
    """How many peers have a wheel for CPython `minor` on this platform."""
    entry = cache.get(minor)
    if entry and time.time() - entry["when"] < 86400:
        return entry["count"]
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for peer in PEERS:
            proc = pip(
                sys.executable,
                "install",
                "--dry-run",
                "-q",
                "--ignore-installed",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--python-version",
                minor,
                "--target",
                tmp,
                peer,
            )
            count += proc.returncode == 0
    cache[minor] = {"count": count, "when": time.time()}
    return count


def choose(pythons):
    cache = {}
    if os.path.exists(CACHE):
        with open(CACHE) as f:
            cache = json.load(f)
    best = None
    for py in pythons:
        minor = _minor(py)
        n = wheel_count(minor, cache)
        print(f"# CPython {minor}: {n} of {len(PEERS)} peers have a wheel", file=sys.stderr)
        if best is None or (n, _vkey(minor)) > (best[0], _vkey(best[1])):
            best = (n, minor, py)
    os.makedirs(os.path.dirname(CACHE), exist_ok=True)
    with open(CACHE, "w") as f:
        json.dump(cache, f)
    if best:
        print(best[2])


def main(argv):
    if argv[:1] == ["install"] and len(argv) == 2:
        install(argv[1])
    elif argv[:1] == ["choose"]:
        choose(argv[1:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
