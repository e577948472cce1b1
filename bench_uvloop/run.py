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
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SERVER = os.path.join(HERE, "echoserver.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from benchmark import samples as runner  # noqa: E402 - the scripts/ folder is not on sys.path
from benchmark import tables  # noqa: E402
from benchmark.worker import MARK  # noqa: E402

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
RATE_RE = re.compile(r"^([0-9.eE+-]+) requests/sec\s*$", re.MULTILINE)
DONE_RE = re.compile(r"^(\d+) in ([0-9.eE+-]+)\s*$", re.MULTILINE)
log = runner.log
last_line = runner.last_line


def build_loadgen(dest):
    """go build of bench_uvloop/loadgen into dest; the path, or None and why."""
    out = os.path.join(dest, "loadgen")
    try:
        proc = subprocess.run(
            ["go", "build", "-o", out, "./bench_uvloop/loadgen"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return None, "go is not on PATH"
    if proc.returncode != 0:
        return None, "go build failed: " + last_line(proc.stderr)
    return out, ""


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
            log("# fetching the client: " + " ".join(cmd))
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


def accepts(port):
    """True if a TCP connect to the port succeeds (the server accepts)."""
    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True


def run_sample(opts, kind, client, contender, mode, msize, num, tmpdir):
    """Run one fresh server and one client (kind "uvloop": uvloop's client,
    unchanged; kind "go": the Go load generator, server and client pinned
    to different CPUs); return a result dict with status ok / timeout /
    crash / error / mismatch."""
    port = runner.free_port()
    addr = f"127.0.0.1:{port}"
    res = {"client": kind, "contender": contender, "mode": mode, "msize": msize, "num": num}
    res["port"] = port
    out_path = os.path.join(tmpdir, f"server-{contender}-{mode}-{msize}.out")
    pin_server = opts.pin_server if kind == "go" else []
    flags = ["--loop", contender] if contender != "asyncio" else []
    cmd = [*pin_server, opts.python, SERVER, *flags, *MODES[mode], "--addr", addr]
    if kind == "go":
        conns = opts.go_conns
        ccmd = [*opts.pin_client, client, "-addr", addr, "-conns", str(conns)]
        ccmd += ["-msize", str(msize), "-num", str(num), f"-spin={str(opts.go_spin).lower()}"]
    else:
        conns = opts.workers
        ccmd = [opts.python, client, "--msize", str(msize), "--num", str(num)]
        ccmd += ["--workers", str(opts.workers), "--addr", addr]
    with runner.Server(cmd, out_path, env=opts.env, cwd=tmpdir) as server:
        if not server.wait_ready(lambda: accepts(port), opts.start_timeout):
            res["status"], res["detail"] = server.not_ready(f"accepted on {addr}")
            return res
        cout, rc = runner.run_client(ccmd, opts.timeout, cwd=tmpdir)
        res["server_alive_after_client"] = server.proc.poll() is None
        if cout is None:
            res["status"] = "timeout"
            res["detail"] = f"client did not finish in {opts.timeout} s"
            return res
        res["client_rc"] = rc
        if kind == "go":
            found = LOADGEN_RE.search(cout)
            if rc != 0 or not found:
                res["status"] = "error"
                res["detail"] = f"loadgen rc {rc}: {last_line(cout)}"
                return res
            lg = res["loadgen"] = json.loads(found.group(1))
            res["rate"], res["requests"], res["seconds"] = lg["rate"], lg["requests"], lg["seconds"]
        else:
            rate, done = RATE_RE.search(cout), DONE_RE.search(cout)
            if rc != 0 or not rate or not done:
                res["status"] = "error"
                res["detail"] = f"client rc {rc}: {last_line(cout)}"
                return res
            res["rate"] = float(rate.group(1))
            res["requests"] = int(done.group(1))
            res["seconds"] = float(done.group(2))
        if not server.finish(res, 10):
            return res
    res["server_rc"] = rc = server.proc.returncode
    st = server.stats("ECHO-STATS ")
    if rc != 0 or st is None:
        res["status"] = "crash" if rc < 0 else "error"
        res["detail"] = f"server rc {rc}: {last_line(server.text)}"
        return res
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


# ---- rounds ------------------------------------------------------------------


def run_round(opts, clients, label, r, tmpdir, samples, rounds_info):
    load_before = os.getloadavg()
    t0 = time.monotonic()
    order = runner.rotate(opts.contenders, r)
    for kind, client in clients.items():
        num = opts.num if kind == "uvloop" else opts.go_num
        if label == "warm-up":
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


def fmt_rate(x):
    return f"{x:,.0f}" if x is not None else "—"


def size_label(n):
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


# ---- provenance --------------------------------------------------------------


def provenance(python, env=None):
    """What the harness's worker reports of `python` (its version, GC,
    packages, zloopgo.build_info(), the engine's file), with the engine's
    sha256 and the checkout's commit."""
    proc = subprocess.run(
        [python, "-m", "benchmark.worker", "--provenance"],
        cwd=os.path.join(ROOT, "scripts"),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    info = json.loads(found[-1][len(MARK) :]) if found else {"packages": {}}
    engine = info.get("zloopgo_engine")
    if engine and os.path.exists(engine):
        info["zloopgo_engine_sha256"] = sha256(engine)
    info["commit"] = runner.git(ROOT, "rev-parse", "HEAD")
    dirty = runner.git(ROOT, "status", "--porcelain", "--untracked-files=no")
    info["tree"] = (
        "clean"
        if not dirty
        else "uncommitted changes: " + ", ".join(line[3:] for line in dirty.splitlines())
    )
    return info


# ---- report ------------------------------------------------------------------


def report(opts, samples, rounds_info, prov, client_info, prov_end, started, finished):
    lines = []
    add = lines.append
    measured = [s for s in samples if s["round"] != "warm-up"]
    cells = {}
    for s in measured:
        cells.setdefault((s["client"], s["mode"], s["msize"], s["contender"]), []).append(s)

    def values(kind, mode, msize, contender, key="rate"):
        got = cells.get((kind, mode, msize, contender), [])
        return [s[key] for s in got if s["status"] == "ok" and key in s], got

    def median(*cell, key="rate"):
        st = tables.summarize(values(*cell, key=key)[0])
        return st["median"] if st else None

    names = opts.contenders
    peers = tables.peers_of(names)
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
                f"server pinned to CPU {opts.pin_server[-1]}, client to CPU {opts.pin_client[-1]}"
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
        rows = []
        met_count = total = 0
        for mode in opts.modes:
            for msize in opts.sizes:
                med = {c: median(kind, mode, msize, c) for c in names}
                row = [mode, size_label(msize)]
                row += [
                    fmt_rate(med[c]) + tables.failed_note(values(kind, mode, msize, c)[1])
                    for c in names
                ]
                row += [
                    tables.fmt_ratio(tables.versus(med["zloopgo"], med[p], True)) for p in peers
                ]
                if "uvloop" in peers:
                    r = tables.versus(med["zloopgo"], med["uvloop"], True)
                    row.append("no (no result)" if r is None else "yes" if r >= TARGET else "no")
                    met_count += r is not None and r >= TARGET
                    total += 1
                rows.append(row)
        lines.extend(tables.table(head, rows, labels=2))
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
        rows = []
        for mode in opts.modes:
            for msize in opts.sizes:
                med = {c: median(kind, mode, msize, c, key="server_cpu_us") for c in names}
                row = [mode, size_label(msize)]
                row += [f"{med[c]:.2f}" if med[c] is not None else "—" for c in names]
                row += [
                    tables.fmt_ratio(tables.versus(med["zloopgo"], med[p], False)) for p in peers
                ]
                rows.append(row)
        lines.extend(tables.table(head, rows, labels=2))
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
            rows = []
            for mode in opts.modes:
                for msize in opts.sizes:
                    row = [mode, size_label(msize)]
                    for c in names:
                        cpu = median(kind, mode, msize, c, key="client_cpu_us")
                        p99 = median(kind, mode, msize, c, key="p99_us")
                        row.append(f"{cpu:.2f} / {p99:,.0f}" if cpu and p99 else "—")
                    rows.append(row)
            lines.extend(tables.table(head, rows, labels=len(head)))

    add(f"{h}# Every cell: median, min, max, coefficient of variation (requests/s)")
    add("")
    every = []
    for kind in opts.clients:
        for mode in opts.modes:
            for msize in opts.sizes:
                for c in names:
                    accepted, got = values(kind, mode, msize, c)
                    every.append(((kind, mode, size_label(msize), c), got, accepted))
    lines.extend(
        tables.every_cell(["client", "mode", "size", "loop"], every, lambda _, v: fmt_rate(v))
    )

    add(f"{h}# Failures (timeouts, crashes, errors, mismatches; warm-up included)")
    add("")
    bad = [
        (
            (s["client"], s["round"], s["mode"], size_label(s["msize"]), s["contender"]),
            s["status"],
            s.get("detail", ""),
        )
        for s in samples
        if s["status"] != "ok"
    ]
    none = f"None: all {len(samples)} samples (warm-up included) passed the checks."
    lines.extend(tables.failures(["client", "round", "mode", "size", "loop"], bad, none))

    add(f"{h}# Rounds and machine load")
    add("")
    add(
        f"This machine has {prov.get('cpu_count')} logical CPUs and is shared with other sessions, "
        "so the load average (1, 5, 15 min) is recorded around every round."
    )
    add("")
    rows = [
        [
            ri["round"],
            ", ".join(ri["order"]),
            " / ".join(map(str, ri["load_before"])),
            " / ".join(map(str, ri["load_after"])),
            ri["seconds"],
        ]
        for ri in rounds_info
    ]
    head = ["round", "contender order", "load before", "load after", "seconds"]
    lines.extend(tables.table(head, rows, labels=2))

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
    items = [
        ("started / finished (UTC)", f"{started} / {finished}"),
        *tables.machine(prov),
        (
            "zloopgo engine",
            f"{prov.get('zloopgo_engine')} sha256 {prov.get('zloopgo_engine_sha256')}",
        ),
        ("git commit", f"{prov.get('commit')} ({prov.get('tree')})"),
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
        "--modes", default="proto,buffered,streams,sock", help="of proto,buffered,streams,sock"
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
        prov = provenance(opts.python, opts.env)
        if not prov["packages"].get("uvloop"):
            raise SystemExit(f"uvloop is needed in {opts.python}")
        opts.contenders, opts.absent = runner.available(opts.python, opts.contenders, opts.env)
        for c, why in opts.absent.items():
            log(f"echo: {c} is not measured: {why}")
        clients = {}
        client_info = {}
        if "uvloop" in opts.clients:
            client, client_info = fetch_client(
                opts.python, prov["packages"]["uvloop"], tmpdir, opts.sdist
            )
            clients["uvloop"] = client
        opts.pin_server, opts.pin_client = runner.cpu_pair()
        opts.go_skipped = ""
        if "go" in opts.clients:
            loadgen, why = (opts.loadgen, "") if opts.loadgen else build_loadgen(tmpdir)
            if loadgen:
                clients["go"] = loadgen
            else:
                opts.go_skipped = why
                log(f"echo: the Go client is skipped: {why}")
        for label, k in runner.rounds(opts.warmup, opts.rounds):
            run_round(opts, clients, label, k, tmpdir, samples, rounds_info)
        prov_end = provenance(opts.python, opts.env)
    finished = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    text = report(opts, samples, rounds_info, prov, client_info, prov_end, started, finished)
    print(text)
    doc = {
        "options": {k: v for k, v in vars(opts).items() if k != "env"},
        "provenance": prov,
        "client": client_info,
        "rounds": rounds_info,
        "samples": samples,
    }
    base = runner.write_report(opts.out, "echo", opts.tag, text, doc)
    log(f"# report: {base}.md (raw samples in {base}.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
