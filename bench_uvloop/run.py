"""Run echo clients against bench_uvloop/echoserver.py on asyncio, uvloop,
zloopgo and every peer loop that imports, and print a Markdown report.

Two clients: uvloop's own examples/bench/echoclient.py (the headline
matrix), and bench_uvloop/loadgen, a Go load generator that needs less CPU
per request than any server, pinned to another core than the server.

The client is uvloop's examples/bench/echoclient.py, unchanged, taken at
run time from uvloop's source distribution on PyPI for the installed
uvloop version (``pip download --no-deps --no-binary :all:``); it is never
stored in this repository. See bench_uvloop/README.md.

    python bench_uvloop/run.py                  # 1 warm-up + 3 rounds, both clients
    python bench_uvloop/run.py --rounds 5 --num 20000 --modes proto --clients go
"""

import argparse
import contextlib
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
LOOPS = ("asyncio", "uvloop", "zloopgo", "zloop", "rloop", "rsloop", "zuvloop")
CLIENTS = {"uvloop": "uvloop's echoclient.py (Python)", "go": "bench_uvloop/loadgen (Go)"}
TARGET = 1.15  # zloopgo / uvloop requests/s

LOADGEN_RE = re.compile(r"^LOADGEN (\{.*\})\s*$", re.MULTILINE)
T0 = time.monotonic()
RATE_RE = re.compile(r"^([0-9.eE+-]+) requests/sec\s*$", re.MULTILINE)
DONE_RE = re.compile(r"^(\d+) in ([0-9.eE+-]+)\s*$", re.MULTILINE)


def log(*args):
    print(f"[{time.monotonic() - T0:6.0f} s]", *args, file=sys.stderr, flush=True)


def taskset(cpu):
    return ["taskset", "-c", cpu] if cpu else []


def cpu_pair():
    """(server CPU, client CPU) for the Go client: two different CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return None, None
    return str(cpus[0]), str(cpus[1])


def build_loadgen(dest):
    """go build of bench_uvloop/loadgen into dest; the path, or None and why."""
    go = shutil.which("go")
    if go is None:
        return None, "go is not on PATH"
    out = os.path.join(dest, "loadgen")
    proc = subprocess.run(
        [go, "build", "-o", out, "./bench_uvloop/loadgen"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None, "go build failed: " + last_line(proc.stderr)
    return out, ""


def probe_loop(opts, name):
    """'' if `name` makes a loop in opts.python, else why not."""
    code = "import asyncio\n" + (
        "asyncio.new_event_loop().close()"
        if name == "asyncio"
        else f"import {name}\n{name}.new_event_loop().close()"
    )
    proc = subprocess.run(
        [opts.python, "-c", code],
        capture_output=True,
        text=True,
        env=opts.env,
        cwd=tempfile.gettempdir(),
        check=False,
    )
    return "" if proc.returncode == 0 else last_line(proc.stderr) or f"exit {proc.returncode}"


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
        # --no-binary for uvloop alone: pip prepares the sdist's metadata, and
        # with --no-binary :all: it would compile Cython and setuptools from
        # source first (minutes). Kept in build/bench-cache for later runs.
        cache = os.path.join(ROOT, "build", "bench-cache")
        found = (
            [n for n in os.listdir(cache) if n.startswith(f"uvloop-{version}.tar")]
            if os.path.isdir(cache)
            else []
        )
        if not found:
            os.makedirs(cache, exist_ok=True)
            cmd = [python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", "uvloop"]
            cmd += [f"uvloop=={version}", "-d", cache]
            log("# fetching the client:", " ".join(cmd))
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            found = [n for n in os.listdir(cache) if n.startswith(f"uvloop-{version}.tar")]
        if len(found) != 1:
            raise SystemExit(f"expected one uvloop {version} sdist in {cache}, found {found}")
        sdist = os.path.join(cache, found[0])
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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def run_sample(opts, kind, client, contender, mode, msize, num, tmpdir):
    """Run one fresh server and one client (kind "uvloop": uvloop's client,
    unchanged; kind "go": the Go load generator, server and client pinned
    to different CPUs); return a result dict with status ok / timeout /
    crash / error / mismatch."""
    port = free_port()
    addr = f"127.0.0.1:{port}"
    res = {"client": kind, "contender": contender, "mode": mode, "msize": msize, "num": num}
    res["port"] = port
    out_path = os.path.join(tmpdir, f"server-{contender}-{mode}-{msize}.out")
    pin_server = opts.pin_server if kind == "go" else None
    flags = ["--loop", contender] if contender != "asyncio" else []
    cmd = [*taskset(pin_server), opts.python, SERVER, *flags, *MODES[mode], "--addr", addr]
    if kind == "go":
        conns = opts.go_conns
        ccmd = [*taskset(opts.pin_client), client, "-addr", addr, "-conns", str(conns)]
        ccmd += ["-msize", str(msize), "-num", str(num), f"-spin={str(opts.go_spin).lower()}"]
    else:
        conns = opts.workers
        ccmd = [opts.python, client, "--msize", str(msize), "--num", str(num)]
        ccmd += ["--workers", str(opts.workers), "--addr", addr]
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
            if kind == "go":
                found = LOADGEN_RE.search(cout)
                if cproc.returncode != 0 or not found:
                    res["status"] = "error"
                    res["detail"] = f"loadgen rc {cproc.returncode}: {last_line(cout)}"
                    return res
                lg = json.loads(found.group(1))
                res["loadgen"] = lg
                res["rate"], res["requests"], res["seconds"] = (
                    lg["rate"],
                    lg["requests"],
                    lg["seconds"],
                )
            else:
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
    expected = num * conns * msize
    problems = []
    if res["requests"] != num * conns:
        problems.append(f"client reports {res['requests']} requests, expected {num * conns}")
    if st["bytes_in"] != expected or st["bytes_out"] != expected:
        problems.append(f"server echoed {st['bytes_in']}/{st['bytes_out']} B, expected {expected}")
    # the client's connections plus the readiness probe
    if st["connections"] != conns + 1:
        problems.append(f"server saw {st['connections']} connections, expected {conns + 1}")
    if st["loop"] != contender:
        problems.append(f"server ran {st['loop']}, not {contender}")
    if problems:
        res["status"] = "mismatch"
        res["detail"] = "; ".join(problems)
        return res
    res["server_cpu_us"] = 1e6 * st["cpu_seconds"] / res["requests"]
    if kind == "go":
        res["client_cpu_us"] = res["loadgen"]["cpu_us_per_request"]
        res["p99_us"] = res["loadgen"]["p99_us"]
    res["status"] = "ok"
    return res


# ---- rounds and statistics -------------------------------------------------


def rotated(items, r):
    r %= len(items)
    return items[r:] + items[:r]


def run_round(opts, clients, label, r, tmpdir, samples, rounds_info, warmup=False):
    load_before = os.getloadavg()
    t0 = time.monotonic()
    order = rotated(opts.contenders, r)
    for kind, client in clients.items():
        num = opts.num if kind == "uvloop" else opts.go_num
        if warmup:
            num = max(1, num // 4)
        for mode in opts.modes:
            for msize in opts.sizes:
                for contender in order:
                    res = run_sample(opts, kind, client, contender, mode, msize, num, tmpdir)
                    res["round"] = label
                    samples.append(res)
                    shown = f"{res['rate']:,.0f} req/s" if res["status"] == "ok" else ""
                    log(
                        f"echo {kind} client, round {label}: {mode} {msize} {contender} "
                        f"{res['status']} {shown}"
                    )
                    if res["status"] != "ok":
                        log(f"  {res.get('detail', '')}")
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
        cells.setdefault((s["client"], s["mode"], s["msize"], s["contender"]), []).append(s)

    def stats(kind, mode, msize, contender, key="rate"):
        got = cells.get((kind, mode, msize, contender), [])
        return summarize([s[key] for s in got if s["status"] == "ok" and key in s]), got

    names = opts.contenders
    peers = [c for c in names if c != "zloopgo"] if "zloopgo" in names else []
    h = opts.heading
    add(f"{h} Echo benchmark: " + ", ".join(names))
    add("")
    add(
        "Every sample is a fresh server process (`bench_uvloop/echoserver.py`) on a fresh "
        "port and a fresh client; contenders rotate from round to round; a sample counts "
        "only if the server echoed exactly what the client was asked to send (see Proof of "
        f"work). Medians of {opts.rounds} rounds after {opts.warmup} warm-up round(s) at a "
        "quarter of the size; **zloopgo vs X > 1 means zloopgo is better** (more requests/s, "
        "or less server CPU per request)."
    )
    if opts.absent:
        add("")
        add(
            "Not measured (the loop does not import in this Python): "
            + "; ".join(f"**{k}**: {v}" for k, v in opts.absent.items())
            + "."
        )
    add("")
    for kind in opts.clients:
        if kind == "go":
            add(f"{h}# Go load generator (`bench_uvloop/loadgen`)")
            add("")
            pin = (
                f"server pinned to CPU {opts.pin_server}, client to CPU {opts.pin_client}"
                if opts.pin_server
                else "not pinned (fewer than two CPUs or no taskset)"
            )
            spin = (
                "; the client busy-polls its own CPU (epoll_wait with timeout 0), so it "
                "never sleeps, and its CPU time is that CPU's wall time, not its cost"
                if opts.go_spin
                else ""
            )
            skipped = f" **Skipped: {opts.go_skipped}.**" if opts.go_skipped else ""
            add(
                f"`-conns {opts.go_conns}` connections, one request in flight on each, "
                f"`-num {opts.go_num}` requests per connection, every echo compared byte for "
                f"byte; {pin}{spin}.{skipped}"
            )
        else:
            add(f"{h}# uvloop's echo client (headline)")
            add("")
            add(
                f"Client: uvloop's `examples/bench/echoclient.py`, unchanged, from "
                f"`{client_info['sdist']}` on PyPI; `--workers {opts.workers} --num {opts.num}` "
                f"(requests per worker), `--msize` as below; its {opts.workers} worker processes "
                "share the CPUs with the server (not pinned)."
            )
        add("")
        if kind == "go" and opts.go_skipped:
            continue
        add("Requests/s (median; higher is better):")
        add("")
        head = ["mode", "size", *names] + [f"zloopgo vs {p}" for p in peers]
        if "uvloop" in peers:
            head += [f"target >= {TARGET:.2f}x vs uvloop"]
        add("| " + " | ".join(head) + " |")
        add("|" + "|".join([" --- "] * 2 + [" ---: "] * (len(head) - 2)) + "|")
        met_count = total = 0
        for mode in opts.modes:
            for msize in opts.sizes:
                row = [mode, size_label(msize)]
                med = {}
                for c in names:
                    st, got = stats(kind, mode, msize, c)
                    failed = sum(1 for s in got if s["status"] != "ok")
                    cell = fmt_rate(st["median"] if st else None)
                    if failed:
                        cell += f" ({failed}/{len(got)} failed)"
                    row.append(cell)
                    med[c] = st["median"] if st else None
                for p in peers:
                    ok = med.get("zloopgo") and med.get(p)
                    row.append(f"{med['zloopgo'] / med[p]:.2f}x" if ok else "—")
                if "uvloop" in peers:
                    if med.get("uvloop") and med.get("zloopgo"):
                        met = med["zloopgo"] / med["uvloop"] >= TARGET
                        row.append("yes" if met else "no")
                        met_count += met
                    else:
                        row.append("no (no result)")
                    total += 1
                add("| " + " | ".join(row) + " |")
        add("")
        if total:
            add(
                f"The {TARGET:.2f}x target (zloopgo / uvloop, medians) is met in {met_count} "
                f"of {total} cells."
            )
            add("")
        add(
            "Server CPU per request: user + system time of the server process (every thread) "
            "from serving to stopping, divided by the requests, µs (median; lower is better; "
            "zloopgo vs X = X / zloopgo):"
        )
        add("")
        head = ["mode", "size", *names] + [f"zloopgo vs {p}" for p in peers]
        add("| " + " | ".join(head) + " |")
        add("|" + "|".join([" --- "] * 2 + [" ---: "] * (len(head) - 2)) + "|")
        for mode in opts.modes:
            for msize in opts.sizes:
                row = [mode, size_label(msize)]
                med = {}
                for c in names:
                    st, _ = stats(kind, mode, msize, c, "server_cpu_us")
                    med[c] = st["median"] if st else None
                    row.append(f"{med[c]:.2f}" if st else "—")
                for p in peers:
                    ok = med.get("zloopgo") and med.get(p)
                    row.append(f"{med[p] / med['zloopgo']:.2f}x" if ok else "—")
                add("| " + " | ".join(row) + " |")
        add("")
        if kind == "go":
            add(
                "The client's side (median per cell): its CPU µs per request (user + system "
                "of the load generator"
                + (
                    ", which busy-polls: this is its core's wall time / requests)"
                    if opts.go_spin
                    else ")"
                )
                + " and the 99th percentile of the round-trip latency it saw, µs:"
            )
            add("")
            head = ["mode", "size"] + [f"{c} client CPU / p99" for c in names]
            add("| " + " | ".join(head) + " |")
            add("|" + "|".join([" --- "] * len(head)) + "|")
            for mode in opts.modes:
                for msize in opts.sizes:
                    row = [mode, size_label(msize)]
                    for c in names:
                        cpu, _ = stats(kind, mode, msize, c, "client_cpu_us")
                        p99, _ = stats(kind, mode, msize, c, "p99_us")
                        row.append(
                            f"{cpu['median']:.2f} / {p99['median']:,.0f}" if cpu and p99 else "—"
                        )
                    add("| " + " | ".join(row) + " |")
            add("")

    add(f"{h}# Every cell: median, min, max, coefficient of variation (requests/s)")
    add("")
    add("| client | mode | size | loop | ok | median | min | max | CoV |")
    add("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in opts.clients:
        for mode in opts.modes:
            for msize in opts.sizes:
                for c in names:
                    st, got = stats(kind, mode, msize, c)
                    ok = f"{st['n'] if st else 0}/{len(got)}"
                    if st:
                        vals = [fmt_rate(st[k]) for k in ("median", "min", "max")]
                        vals.append(f"{100 * st['cov']:.1f}%")
                    else:
                        vals = ["—"] * 4
                    add(
                        f"| {kind} | {mode} | {size_label(msize)} | {c} | {ok} | "
                        + " | ".join(vals)
                        + " |"
                    )
    add("")

    add(f"{h}# Failures (timeouts, crashes, errors, mismatches; warm-up included)")
    add("")
    bad = [s for s in samples if s["status"] != "ok"]
    if not bad:
        add(f"None: all {len(samples)} samples (warm-up included) passed the checks.")
    else:
        add("| client | round | mode | size | loop | status | detail |")
        add("| --- | --- | --- | --- | --- | --- | --- |")
        for s in bad:
            detail = s.get("detail", "").replace("|", "/")
            add(
                f"| {s['client']} | {s['round']} | {s['mode']} | {size_label(s['msize'])} "
                f"| {s['contender']} | {s['status']} | {detail} |"
            )
    add("")

    add(f"{h}# Rounds and machine load")
    add("")
    add(
        f"This machine has {prov['cpus']} logical CPUs and is shared with other sessions, "
        "so the load average (1, 5, 15 min) is recorded around every round."
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

    add(f"{h}# Proof of work")
    add("")
    add(
        "A sample counts only if the client exits 0 and reports N = num x connections "
        "requests (uvloop's client prints `N in T`; the Go client also compares every "
        "echo byte for byte and fails on the first difference), and the server, stopped "
        "by SIGTERM afterwards, reports bytes received = bytes written back = N x msize "
        "and connections + 1 connections (the +1 is the runner's readiness probe) on "
        "the loop it was asked for."
    )
    add("")

    add(f"{h}# Provenance")
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
                f"{client_info.get('member')} sha256 {client_info.get('client_sha256')} "
                f"(sdist sha256 {client_info.get('sdist_sha256')})"
            ),
        ),
        (
            "sizes",
            (
                f"--msize {', '.join(map(str, opts.sizes))}; uvloop client --num {opts.num} "
                f"per worker; Go client -num {opts.go_num} per connection, "
                f"-conns {opts.go_conns}, -spin={opts.go_spin}; "
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
    p.add_argument("--rounds", type=int, default=3, help="measured rounds (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up rounds at num / 4 (1)")
    p.add_argument("--num", type=int, default=8000, help="uvloop client --num per worker")
    p.add_argument("--workers", type=int, default=3, help="uvloop client --workers (3)")
    p.add_argument("--go-num", type=int, default=6250, help="Go client -num per connection")
    p.add_argument("--go-conns", type=int, default=8, help="Go client connections (8)")
    p.add_argument(
        "--go-sleep",
        dest="go_spin",
        action="store_false",
        help="the Go client sleeps in epoll_wait instead of busy-polling its CPU",
    )
    p.add_argument("--loadgen", default=None, help="a built bench_uvloop/loadgen binary")
    p.add_argument("--clients", default="uvloop,go", help="of uvloop,go (default both)")
    p.add_argument("--sizes", default="1024,10240", help="message sizes (1024,10240)")
    p.add_argument(
        "--modes", default="proto,buffered,streams", help="of proto,buffered,streams,sock"
    )
    p.add_argument(
        "--contenders",
        default=",".join(LOOPS),
        help="loops to serve on; those that do not import are listed as absent",
    )
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
    p.add_argument("--heading", default="##", help="Markdown heading level of the report")
    p.add_argument("--tag", default="", help="inserted in the report's file names")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"), help="report folder")
    opts = p.parse_args(argv)
    opts.sizes = [int(x) for x in opts.sizes.split(",") if x]
    opts.modes = [x for x in opts.modes.split(",") if x]
    opts.contenders = [x for x in opts.contenders.split(",") if x]
    opts.clients = [x for x in opts.clients.split(",") if x]
    for m in opts.modes:
        if m not in MODES:
            p.error(f"unknown mode {m!r}")
    for c in opts.contenders:
        if c not in LOOPS:
            p.error(f"unknown contender {c!r}")
    for c in opts.clients:
        if c not in CLIENTS:
            p.error(f"unknown client {c!r}")
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
        opts.absent = {}
        installs = {}
        if os.path.exists(os.environ.get("ZL_BENCH_INSTALLS", "")):
            with open(os.environ["ZL_BENCH_INSTALLS"]) as f:
                installs = json.load(f)  # scripts/bench's wheel-only installs
        for c in list(opts.contenders):
            why = probe_loop(opts, c)
            if why and installs.get(c, "ok") != "ok":
                why = f"not installed ({installs[c]})"
            if why:
                opts.absent[c] = why
                opts.contenders.remove(c)
                log(f"echo: {c} is not measured: {why}")
        clients = {}
        client_info = {}
        if "uvloop" in opts.clients:
            client, client_info = fetch_client(opts.python, prov["uvloop"], tmpdir, opts.sdist)
            clients["uvloop"] = client
        opts.pin_server, opts.pin_client = cpu_pair()
        opts.go_skipped = ""
        if "go" in opts.clients:
            loadgen, why = (opts.loadgen, "") if opts.loadgen else build_loadgen(tmpdir)
            if loadgen:
                clients["go"] = loadgen
            else:
                opts.go_skipped = why
                log(f"echo: the Go client is skipped: {why}")
        for w in range(opts.warmup):
            run_round(opts, clients, "warm-up", w, tmpdir, samples, rounds_info, warmup=True)
        for r in range(opts.rounds):
            run_round(opts, clients, str(r + 1), r + opts.warmup, tmpdir, samples, rounds_info)
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
    base = os.path.join(opts.out, f"echo-{opts.tag + '-' if opts.tag else ''}{stamp}")
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
