"""Run uvloop's own echo benchmark client against bench_uvloop/echoserver.py
on asyncio, uvloop and zloopgo, and print a Markdown report.

The client is uvloop's examples/bench/echoclient.py, unchanged, taken at
run time from uvloop's source distribution on PyPI for the installed
uvloop version (``pip download --no-deps --no-binary :all:``); it is never
stored in this repository. See bench_uvloop/README.md.

    python bench_uvloop/run.py                  # 1 warm-up + 5 rounds
    python bench_uvloop/run.py --rounds 3 --num 20000 --modes proto
"""

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SERVER = os.path.join(HERE, "echoserver.py")

MODES = {  # name -> echoserver.py flags
    "proto": ["--proto"],
    "buffered": ["--proto", "--buffered"],
    "streams": ["--streams"],
    "sock": [],
}
LOOP_FLAGS = {"asyncio": [], "uvloop": ["--uvloop"], "zloopgo": ["--zloopgo"]}
TARGET = 1.15  # zloopgo / uvloop requests/s

RATE_RE = re.compile(r"^([0-9.eE+-]+) requests/sec\s*$", re.MULTILINE)
DONE_RE = re.compile(r"^(\d+) in ([0-9.eE+-]+)\s*$", re.MULTILINE)


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# ---- the client, from uvloop's sdist ---------------------------------------


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_client(python, version, workdir, sdist=None):
    """Extract examples/bench/echoclient.py, unchanged, from uvloop's sdist."""
    if sdist is None:
        cmd = [python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
        cmd += [f"uvloop=={version}", "-d", workdir]
        log("# fetching the client:", " ".join(cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        found = [n for n in os.listdir(workdir) if n.startswith("uvloop-") and ".tar" in n]
        if len(found) != 1:
            raise SystemExit(f"expected one uvloop sdist in {workdir}, found {found}")
        sdist = os.path.join(workdir, found[0])
    with tarfile.open(sdist) as tar:
        member = next(
            (m for m in tar.getmembers() if m.name.endswith("/examples/bench/echoclient.py")), None
        )
        if member is None:
            raise SystemExit(f"{sdist} has no examples/bench/echoclient.py")
        data = tar.extractfile(member).read()
    client = os.path.join(workdir, "echoclient.py")
    with open(client, "wb") as f:
        f.write(data)
    return client, {
        "sdist": os.path.basename(sdist),
        "sdist_sha256": sha256(sdist),
        "member": member.name,
        "client_sha256": hashlib.sha256(data).hexdigest(),
    }


# ---- one sample ------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_accepting(port, proc, deadline):
    """True once a TCP connect to the port succeeds (the server accepts)."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def run_sample(opts, client, contender, mode, msize, num, tmpdir):
    """Run one fresh server and the unchanged client; return a result dict
    with status ok / timeout / crash / error / mismatch."""
    port = free_port()
    addr = f"127.0.0.1:{port}"
    res = {"contender": contender, "mode": mode, "msize": msize, "num": num, "port": port}
    out_path = os.path.join(tmpdir, f"server-{contender}-{mode}-{msize}.out")
    cmd = [opts.python, SERVER, *LOOP_FLAGS[contender], *MODES[mode], "--addr", addr]
    with open(out_path, "w+b") as out:
        server = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=opts.env,
            cwd=tmpdir,
        )
        try:
            if not wait_accepting(port, server, time.monotonic() + opts.start_timeout):
                res["status"] = "error" if server.poll() is not None else "timeout"
                out.seek(0)
                tail = last_line(out.read().decode(errors="replace"))
                res["detail"] = f"server never accepted on {addr} (rc {server.poll()}): {tail}"
                return res
            ccmd = [opts.python, client, "--msize", str(msize), "--num", str(num)]
            ccmd += ["--workers", str(opts.workers), "--addr", addr]
            try:
                cproc = subprocess.Popen(
                    ccmd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    text=True,
                    cwd=tmpdir,
                )
                try:
                    cout, _ = cproc.communicate(timeout=opts.timeout)
                except subprocess.TimeoutExpired:
                    kill_group(cproc)
                    res["status"] = "timeout"
                    res["detail"] = f"client did not finish in {opts.timeout} s"
                    return res
            finally:
                res["server_alive_after_client"] = server.poll() is None
            res["client_rc"] = cproc.returncode
            rate, done = RATE_RE.search(cout), DONE_RE.search(cout)
            if cproc.returncode != 0 or not rate or not done:
                res["status"] = "error"
                res["detail"] = f"client rc {cproc.returncode}: {last_line(cout)}"
                return res
            res["rate"] = float(rate.group(1))
            res["requests"] = int(done.group(1))
            res["seconds"] = float(done.group(2))
            if server.poll() is not None:
                res["status"] = "crash" if server.returncode < 0 else "error"
                res["detail"] = f"server exited with {server.returncode} during the run"
                return res
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                res["status"] = "timeout"
                res["detail"] = "server did not stop within 10 s of SIGTERM"
                return res
        finally:
            if server.poll() is None:
                kill_group(server)
        out.seek(0)
        sout = out.read().decode(errors="replace")
    res["server_rc"] = server.returncode
    stats = [line for line in sout.splitlines() if line.startswith("ECHO-STATS ")]
    if server.returncode != 0 or not stats:
        res["status"] = "crash" if server.returncode < 0 else "error"
        res["detail"] = f"server rc {server.returncode}: {last_line(sout)}"
        return res
    st = json.loads(stats[-1][len("ECHO-STATS ") :])
    res["server"] = st
    expected = num * opts.workers * msize
    problems = []
    if res["requests"] != num * opts.workers:
        problems.append(f"client reports {res['requests']} requests, expected {num * opts.workers}")
    if st["bytes_in"] != expected or st["bytes_out"] != expected:
        problems.append(f"server echoed {st['bytes_in']}/{st['bytes_out']} B, expected {expected}")
    # the workers' connections plus the readiness probe
    if st["connections"] != opts.workers + 1:
        problems.append(f"server saw {st['connections']} connections, expected {opts.workers + 1}")
    if st["loop"] != contender:
        problems.append(f"server ran {st['loop']}, not {contender}")
    if problems:
        res["status"] = "mismatch"
        res["detail"] = "; ".join(problems)
        return res
    res["server_cpu_us"] = 1e6 * st["cpu_seconds"] / res["requests"]
    res["status"] = "ok"
    return res


# ---- rounds and statistics -------------------------------------------------


def rotated(items, r):
    r %= len(items)
    return items[r:] + items[:r]


def run_round(opts, client, label, r, num, tmpdir, samples, rounds_info):
    load_before = os.getloadavg()
    t0 = time.monotonic()
    order = rotated(opts.contenders, r)
    for mode in opts.modes:
        for msize in opts.sizes:
            for contender in order:
                res = run_sample(opts, client, contender, mode, msize, num, tmpdir)
                res["round"] = label
                samples.append(res)
                shown = f"{res['rate']:.0f} req/s" if res["status"] == "ok" else ""
                log(f"# {label} {mode} {msize} {contender}: {res['status']} {shown}")
                if res["status"] != "ok":
                    log(f"#   {res.get('detail', '')}")
    rounds_info.append(
        {
            "round": label,
            "order": order,
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "seconds": round(time.monotonic() - t0, 1),
        }
    )


def summarize(values):
    if not values:
        return None
    mean = statistics.fmean(values)
    cov = statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "cov": cov,
    }


def fmt_rate(x):
    return f"{x:,.0f}" if x is not None else "—"


def size_label(n):
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


# ---- provenance --------------------------------------------------------------

PROBE = r"""
import json, sys, platform, gc
out = {"python": sys.version.replace("\n", " "), "executable": sys.executable,
       "implementation": platform.python_implementation(), "gc_enabled": gc.isenabled(),
       "gc_threshold": gc.get_threshold()}
try:
    import uvloop; out["uvloop"] = uvloop.__version__
except Exception as e:
    out["uvloop"] = "not importable: %r" % (e,)
try:
    import zloopgo, os
    from zloopgo import _engine
    out["zloopgo"] = zloopgo.__version__
    out["zloopgo_engine"] = _engine.__file__
    out["zloopgo_build_info"] = zloopgo.build_info()
except Exception as e:
    out["zloopgo"] = "not importable: %r" % (e,)
print(json.dumps(out))
"""


def git(*args):
    try:
        return subprocess.run(
            ["git", "-C", ROOT, *args], capture_output=True, text=True, check=True
        ).stdout.rstrip("\n")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def snapshot_zloopgo(python, dest):
    """Copy the zloopgo package (Python files and built engines) that
    `python` imports into dest/zloopgo, so that a rebuild of the checkout
    during the run (other sessions work on it) cannot change or break the
    engine under test. Returns the PYTHONPATH entry and the source folder."""
    src = subprocess.run(
        [python, "-c", "import os, zloopgo; print(os.path.dirname(zloopgo.__file__))"],
        check=True,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
    ).stdout.strip()
    target = os.path.join(dest, "zloopgo")
    for _attempt in range(5):
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        names = [n for n in os.listdir(src) if n.endswith((".py", ".so"))]
        before = {n: sha256(os.path.join(src, n)) for n in names}
        for n in names:
            shutil.copy2(os.path.join(src, n), os.path.join(target, n))
        after = {n: sha256(os.path.join(src, n)) for n in names}
        copied = {n: sha256(os.path.join(target, n)) for n in names}
        if before == after == copied:
            return dest, src
        time.sleep(2)  # a rebuild was writing it: try again
    raise SystemExit(f"zloopgo in {src} kept changing while being copied")


def provenance(python, env=None):
    info = json.loads(
        subprocess.run(
            [python, "-c", PROBE],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),  # not the checkout: `-c` puts the cwd first on sys.path
        ).stdout
    )
    engine = info.get("zloopgo_engine")
    if engine and os.path.exists(engine):
        info["zloopgo_engine_sha256"] = sha256(engine)
        mtime = datetime.fromtimestamp(os.stat(engine).st_mtime, timezone.utc)
        info["zloopgo_engine_built"] = mtime.strftime("%Y-%m-%d %H:%M:%S UTC")
    info["commit"] = git("rev-parse", "HEAD").strip()
    dirty = git("status", "--porcelain", "--untracked-files=no")
    info["tree"] = (
        "clean"
        if not dirty
        else "uncommitted changes: " + ", ".join(line[3:] for line in dirty.splitlines())
    )
    u = platform.uname()
    info["kernel"] = f"{u.system} {u.release} {u.machine}"
    info["cpus"] = os.cpu_count()
    return info


# ---- report ------------------------------------------------------------------


def report(opts, samples, rounds_info, prov, client_info, prov_end, started, finished):
    lines = []
    add = lines.append
    measured = [s for s in samples if s["round"] != "warm-up"]
    cells = {}
    for s in measured:
        cells.setdefault((s["mode"], s["msize"], s["contender"]), []).append(s)

    def stats(mode, msize, contender, key="rate"):
        got = cells.get((mode, msize, contender), [])
        return summarize([s[key] for s in got if s["status"] == "ok"]), got

    add("# uvloop's echo benchmark: asyncio, uvloop, zloopgo")
    add("")
    add(
        f"Client: uvloop's `examples/bench/echoclient.py`, unchanged, from "
        f"`{client_info['sdist']}` on PyPI; `--workers {opts.workers} --num {opts.num}` "
        f"(requests per worker), `--msize` as below. Server: `bench_uvloop/echoserver.py`. "
        f"Requests/s as the client prints it (median of {opts.rounds} rounds, each sample a "
        f"fresh server process on a fresh port); higher is better."
    )
    add("")
    names = opts.contenders
    head = ["mode", "size", *names]
    if "uvloop" in names and "zloopgo" in names:
        head += ["zloopgo vs uvloop", f"target >= {TARGET:.2f}x", "met?"]
    add("| " + " | ".join(head) + " |")
    add("|" + " --- |" * len(head))
    met_count = total = 0
    for mode in opts.modes:
        for msize in opts.sizes:
            row = [mode, size_label(msize)]
            med = {}
            for c in names:
                st, got = stats(mode, msize, c)
                failed = sum(1 for s in got if s["status"] != "ok")
                cell = fmt_rate(st["median"] if st else None)
                if failed:
                    cell += f" ({failed}/{len(got)} failed)"
                row.append(cell)
                med[c] = st["median"] if st else None
            if "uvloop" in names and "zloopgo" in names:
                if med["uvloop"] and med["zloopgo"]:
                    ratio = med["zloopgo"] / med["uvloop"]
                    met = ratio >= TARGET
                    row += [f"{ratio:.2f}x", f"{TARGET:.2f}x", "yes" if met else "no"]
                    met_count += met
                else:
                    row += ["—", f"{TARGET:.2f}x", "no (no result)"]
                total += 1
            add("| " + " | ".join(row) + " |")
    add("")
    if total:
        add(
            f"zloopgo vs uvloop is the ratio of median requests/s (>1: zloopgo faster); "
            f"the target is met in {met_count} of {total} cells."
        )
        add("")

    add("## Server CPU per request")
    add("")
    add(
        "CPU time (user + system, every thread) of the server process from the moment it "
        "serves until it stops, divided by the requests answered, in microseconds (median; "
        "lower is better). With the client's workers and the server sharing few CPUs, "
        "requests/s mostly measures the client; this measures the server."
    )
    add("")
    head = ["mode", "size", *names]
    if "uvloop" in names and "zloopgo" in names:
        head.append("uvloop / zloopgo")
    add("| " + " | ".join(head) + " |")
    add("|" + " --- |" * len(head))
    for mode in opts.modes:
        for msize in opts.sizes:
            row = [mode, size_label(msize)]
            med = {}
            for c in names:
                st, _ = stats(mode, msize, c, "server_cpu_us")
                med[c] = st["median"] if st else None
                row.append(f"{med[c]:.2f}" if st else "—")
            if "uvloop" in names and "zloopgo" in names:
                both = med["uvloop"] and med["zloopgo"]
                row.append(f"{med['uvloop'] / med['zloopgo']:.2f}x" if both else "—")
            add("| " + " | ".join(row) + " |")
    add("")
    add("uvloop / zloopgo > 1: zloopgo's server spends less CPU per request.")
    add("")

    add("## Every cell: median, min, max, coefficient of variation (requests/s)")
    add("")
    add("| mode | size | loop | ok | median | min | max | CoV |")
    add("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in opts.modes:
        for msize in opts.sizes:
            for c in names:
                st, got = stats(mode, msize, c)
                ok = f"{st['n'] if st else 0}/{len(got)}"
                if st:
                    vals = [fmt_rate(st[k]) for k in ("median", "min", "max")]
                    vals.append(f"{100 * st['cov']:.1f}%")
                else:
                    vals = ["—"] * 4
                add(f"| {mode} | {size_label(msize)} | {c} | {ok} | " + " | ".join(vals) + " |")
    add("")

    add("## Failures (timeouts, crashes, errors, mismatches; warm-up included)")
    add("")
    bad = [s for s in samples if s["status"] != "ok"]
    if not bad:
        add(f"None: all {len(samples)} samples (warm-up included) passed the checks.")
    else:
        add("| round | mode | size | loop | status | detail |")
        add("| --- | --- | --- | --- | --- | --- |")
        for s in bad:
            detail = s.get("detail", "").replace("|", "/")
            add(
                f"| {s['round']} | {s['mode']} | {size_label(s['msize'])} | {s['contender']} "
                f"| {s['status']} | {detail} |"
            )
    add("")

    add("## Rounds and machine load")
    add("")
    add(
        f"This machine has {prov['cpus']} logical CPUs and is shared with other sessions, "
        f"so the load average (1, 5, 15 min) is recorded around every round; the client's "
        f"{opts.workers} worker processes and the server share those CPUs."
    )
    add("")
    add("| round | contender order | load before | load after | seconds |")
    add("| --- | --- | --- | --- | --- |")
    for ri in rounds_info:
        add(
            f"| {ri['round']} | {', '.join(ri['order'])} | "
            f"{' / '.join(map(str, ri['load_before']))} | "
            f"{' / '.join(map(str, ri['load_after']))} | {ri['seconds']} |"
        )
    add("")

    add("## Proof of work")
    add("")
    add(
        "A sample counts only if the client exits 0 and prints `N in T` with "
        "N = num x workers, and the server, stopped by SIGTERM afterwards, reports "
        "bytes received = bytes written back = num x workers x msize and "
        "workers + 1 connections (the +1 is the runner's readiness probe) on the "
        "loop it was asked for."
    )
    add("")

    add("## Provenance")
    add("")
    bi = prov.get("zloopgo_build_info", {})
    items = [
        ("started / finished (UTC)", f"{started} / {finished}"),
        ("Python", f"{prov.get('python')} ({prov.get('executable')})"),
        ("GC", f"enabled={prov.get('gc_enabled')}, thresholds {prov.get('gc_threshold')}"),
        ("uvloop", prov.get("uvloop")),
        ("zloopgo", prov.get("zloopgo")),
        (
            "zloopgo engine",
            (
                f"{prov.get('zloopgo_engine')} sha256 {prov.get('zloopgo_engine_sha256')}, "
                f"file time {prov.get('zloopgo_engine_built')} (copy2 keeps the checkout's)"
            ),
        ),
        ("zloopgo.build_info()", "`" + json.dumps(bi, sort_keys=True) + "`"),
        ("git commit", f"{prov.get('commit')} ({prov.get('tree')})"),
        ("kernel", prov.get("kernel")),
        ("CPU", f"{bi.get('cpu_brand', '?')}, {prov.get('cpus')} logical CPUs"),
        (
            "client",
            (
                f"{client_info['member']} sha256 {client_info['client_sha256']} "
                f"(sdist sha256 {client_info['sdist_sha256']})"
            ),
        ),
        (
            "sizes",
            (
                f"--msize {', '.join(map(str, opts.sizes))}; --num {opts.num} per worker; "
                f"--workers {opts.workers}; warm-up rounds {opts.warmup} "
                f"(--num {opts.warmup_num}); measured rounds {opts.rounds}; "
                f"client timeout {opts.timeout} s"
            ),
        ),
        ("socket options", "TCP_NODELAY on every accepted socket, for every loop"),
    ]
    for key in ("snapshot", "checkout_changed"):
        if key in prov:
            items.append((key.replace("_", " "), prov[key]))
    if prov_end.get("zloopgo_engine_sha256") != prov.get("zloopgo_engine_sha256"):
        items.append(
            (
                "WARNING",
                (
                    "the zloopgo engine changed on disk during the run "
                    f"(now sha256 {prov_end.get('zloopgo_engine_sha256')})"
                ),
            )
        )
    for k, v in items:
        add(f"- {k}: {v}")
    add("")
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="measured rounds (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up rounds, not measured (1)")
    p.add_argument("--num", type=int, default=40000, help="client --num, per worker (40000)")
    p.add_argument("--warmup-num", type=int, default=None, help="--num in warm-up (num / 4)")
    p.add_argument("--workers", type=int, default=3, help="client --workers (3)")
    p.add_argument("--sizes", default="1024,10240", help="client --msize list (1024,10240)")
    p.add_argument(
        "--modes", default="proto,buffered,streams", help="of proto,buffered,streams,sock"
    )
    p.add_argument("--contenders", default="asyncio,uvloop,zloopgo")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per client run (120)")
    p.add_argument("--start-timeout", type=float, default=15.0, help="server start, seconds")
    p.add_argument("--python", default=sys.executable, help="interpreter for server and client")
    p.add_argument("--sdist", default=None, help="a downloaded uvloop sdist instead of PyPI")
    p.add_argument(
        "--no-snapshot",
        dest="snapshot",
        action="store_false",
        help="import zloopgo from the checkout live instead of a copy taken at the start",
    )
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"), help="report folder")
    opts = p.parse_args(argv)
    opts.sizes = [int(x) for x in opts.sizes.split(",") if x]
    opts.modes = [x for x in opts.modes.split(",") if x]
    opts.contenders = [x for x in opts.contenders.split(",") if x]
    for m in opts.modes:
        if m not in MODES:
            p.error(f"unknown mode {m!r}")
    for c in opts.contenders:
        if c not in LOOP_FLAGS:
            p.error(f"unknown contender {c!r}")
    if opts.warmup_num is None:
        opts.warmup_num = max(1, opts.num // 4)
    return opts


def main(argv=None):
    opts = parse_args(argv)
    opts.env = dict(os.environ)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    samples, rounds_info = [], []
    with tempfile.TemporaryDirectory(prefix="zl-echo-") as tmpdir:
        live = provenance(opts.python)
        if opts.snapshot:
            path, src = snapshot_zloopgo(opts.python, os.path.join(tmpdir, "snapshot"))
            opts.env["PYTHONPATH"] = os.pathsep.join(
                x for x in (path, os.environ.get("PYTHONPATH")) if x
            )
        prov = provenance(opts.python, opts.env)
        if opts.snapshot:
            prov["snapshot"] = (
                f"zloopgo copied from {src} at the start (engine sha256 "
                f"{live.get('zloopgo_engine_sha256')}); every server imports the copy"
            )
        if not str(prov.get("uvloop", "")).replace(".", "").isdigit():
            raise SystemExit(f"uvloop is needed in {opts.python}: {prov['uvloop']}")
        client, client_info = fetch_client(opts.python, prov["uvloop"], tmpdir, opts.sdist)
        for w in range(opts.warmup):
            run_round(opts, client, "warm-up", w, opts.warmup_num, tmpdir, samples, rounds_info)
        for r in range(opts.rounds):
            run_round(opts, client, str(r + 1), r, opts.num, tmpdir, samples, rounds_info)
        prov_end = provenance(opts.python, opts.env)
        live_end = provenance(opts.python)
    finished = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    if live_end.get("zloopgo_engine_sha256") != live.get("zloopgo_engine_sha256"):
        prov["checkout_changed"] = (
            "the checkout's zloopgo engine was rebuilt during the run (now sha256 "
            f"{live_end.get('zloopgo_engine_sha256')})"
            + ("; this run used the copy taken at the start" if opts.snapshot else "")
        )
    text = report(opts, samples, rounds_info, prov, client_info, prov_end, started, finished)
    print(text)
    os.makedirs(opts.out, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    base = os.path.join(opts.out, f"echo-{stamp}")
    with open(base + ".md", "w") as f:
        f.write(text + "\n")
    with open(base + ".json", "w") as f:
        json.dump(
            {
                "options": {k: v for k, v in vars(opts).items() if k != "env"},
                "provenance": prov,
                "client": client_info,
                "rounds": rounds_info,
                "samples": samples,
            },
            f,
            indent=1,
        )
    log(f"# report: {base}.md (raw samples in {base}.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
