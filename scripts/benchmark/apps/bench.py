"""The application rows of scripts/bench (ZL_BENCH_PARTS=apps): TechEmpower's
test types served by uvicorn + Starlette and by aiohttp.web in front of a
real PostgreSQL and Redis, and a WebSocket echo served by uvicorn +
websockets, on every loop that runs them; driven by the Go load generator
in apps/load/, which checks every answer.

    python -m benchmark.apps [--rounds 3] [--duration 0.6] [--contenders ...]

(run from scripts/, as scripts/bench does). Two passes:

1. throughput: the closed-loop maximum of each row. Each round starts a
   fresh server per (server, loop) for every loop at once, all pinned to
   one CPU (the load generator, PostgreSQL and Redis to the other), then
   takes each row (rows rotated between rounds) on every loop in turn
   (loops rotated between rows), --duration seconds after a warm-up: one
   row's samples of all loops lie within seconds of each other, so the
   shared machine's slow spells fall on every loop alike;
2. latency at a constant rate: each row at 50% and at 90% of asyncio's
   median maximum on that row, open loop (requests go out on schedule
   whether or not earlier ones were answered, latency counted from when a
   request was due), p50/p99/p99.9 from an HDR histogram; one fresh server
   per (server, loop), all started at once and interleaved the same way.

A wrong answer, a server that does not start or dies, and a client error
are results (the sample's status), never a figure. It knows processes,
rows and their samples; the report and charts are apps/report.py's.
"""

import argparse
import contextlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
import urllib.request

from .. import samples as runner
from ..httpbench import cpu_ticks, uvicorn_loop
from ..peers import PEERS
from . import report, services
from .rows import CONNS, SERVER_ROWS

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(os.path.dirname(HERE))
ROOT = os.path.dirname(SCRIPTS)
LOOPS = ("asyncio", "zloopgo", *PEERS)
log = runner.log

READY_WITHIN = 15  # seconds for a server to answer /ready
NEEDS = ("uvicorn", "httptools", "starlette", "jinja2", "asyncpg", "redis", "aiohttp", "websockets")


def server_command(server, loop, port):
    if server == "aiohttp":
        return [sys.executable, "-m", "benchmark.apps.aiohttp_app", "--port", str(port)] + [
            "--loop",
            loop,
        ]
    app = (
        "benchmark.apps.ws_app:app"
        if server == "uvicorn-ws"
        else "benchmark.apps.starlette_app:app"
    )
    cmd = [sys.executable, "-m", "uvicorn", app, "--app-dir", SCRIPTS, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--http", "httptools", "--loop", uvicorn_loop(loop)]
    cmd += ["--ws", "websockets" if server == "uvicorn-ws" else "none"]
    return cmd + ["--no-access-log", "--log-level", "warning", "--lifespan", "on"]


def ready(port):
    """True once the server answers; False before (a connection to a port
    nobody listens on yet can connect to itself, and reads its own request
    back as an answer: http.client's BadStatusLine)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=0.5) as r:
            return r.status == 200
    except http.client.HTTPException:
        return False


def _cpu_seconds(pid):
    try:
        return cpu_ticks(pid)
    except OSError:  # the server is gone: its fate is the sample's status
        return None


def load(opts, server, port, pid, row, rate, duration, warmup):
    """One appload run against the server (process pid): its result dict
    with status, and the server's CPU time per answer while it ran
    (server_cpu_us: every thread, user and system, over every answer the
    generator checked, the warm-up's included) and the share of one CPU it
    used meanwhile (server_busy). Time taken from the server
    by anything else on its CPU does not count in it, so it separates loops
    where a noisy machine makes requests/s swing."""
    _, path, check = row
    scheme = "ws" if check.startswith("echo") else "http"
    cmd = [*opts.pin_client, opts.appload, "-url", f"{scheme}://127.0.0.1:{port}{path}"]
    cmd += ["-check", check, "-duration", f"{duration}s", "-warmup", f"{warmup}s"]
    cmd += ["-conns", str(CONNS[server]), "-rate", f"{rate:.1f}"]
    cpu_before, wall_before = _cpu_seconds(pid), time.monotonic()
    out, rc = runner.run_client(cmd, duration + warmup + 15)
    cpu_after, wall = _cpu_seconds(pid), time.monotonic() - wall_before
    if out is None:
        return {"status": "timeout", "detail": "appload did not finish"}
    found = [line for line in out.splitlines() if line.startswith("APPLOAD ")]
    if rc != 0 or not found:
        return {"status": "mismatch" if "APPLOAD-ERROR" in out else "error", "detail": out[-300:]}
    got = {"status": "ok", **json.loads(found[-1][len("APPLOAD ") :])}
    if None not in (cpu_before, cpu_after) and got.get("answered"):
        got["server_cpu_us"] = (cpu_after - cpu_before) * 1e6 / got["answered"]
        # the share of one CPU the server used while the generator ran (its
        # start and connections included): well under 1 in a closed loop,
        # the server waited, for PostgreSQL, Redis or the generator, and
        # requests/s on that row are not the loop's to win
        got["server_busy"] = (cpu_after - cpu_before) / wall
    return got


def _not_run(server, status, detail):
    return [{"row": r[0], "status": status, "detail": detail} for r in SERVER_ROWS[server]]


@contextlib.contextmanager
def serving(opts, server, loops, tmpdir):
    """Starts a fresh server for (server, loop) for each loop, one after
    another, all pinned to the server's CPU, and yields the fleet: live
    {loop: (port, pid)} of those that answered /ready, failed {loop: one
    failed sample per row} of the others. The servers wait idle while
    another is measured, so that each row's samples of every loop can be
    taken within seconds of each other (see interleave). On leaving, each
    live server is stopped; fates {loop: {status, detail}} holds those
    that had died or would not stop."""
    fleet = types.SimpleNamespace(live={}, failed={}, fates={})
    env = dict(os.environ, ZL_APPS_PG=opts.svc.pg_dsn, ZL_APPS_REDIS=opts.svc.redis_url)
    with contextlib.ExitStack() as stack:
        started = {}
        for loop in loops:
            if (server, loop) in opts.unable:
                detail = f"not started again: {opts.unable[(server, loop)]}"
                fleet.failed[loop] = _not_run(server, "skipped", detail)
                continue
            port = runner.free_port()
            out_path = os.path.join(tmpdir, f"{server}-{loop}.out")
            cmd = [*opts.pin_server, *server_command(server, loop, port)]
            one = contextlib.ExitStack()
            srv = one.enter_context(runner.Server(cmd, out_path, env=env, cwd=SCRIPTS))
            if not srv.wait_ready(lambda port=port: ready(port), READY_WITHIN):
                status, detail = srv.not_ready("answered /ready")
                one.close()  # now: a server stuck starting must not take CPU from the others
                # a loop that cannot run this server is a result once; trying
                # again in every round would only spend the part's time
                opts.unable[(server, loop)] = f"{status} in its first start: {detail}"
                fleet.failed[loop] = _not_run(server, status, detail)
                continue
            stack.push(one)
            started[loop] = srv
            fleet.live[loop] = (port, srv.proc.pid)
        yield fleet
        for loop, srv in started.items():
            fate = {}
            if not srv.finish(fate, 10):
                fleet.fates[loop] = fate


def interleave(loops, row_index):
    """The order the loops take one row in: every loop's sample of a row
    is taken before the next row starts, so that a slow spell of this
    shared machine (one cell's samples have spread 1.8x between rounds)
    falls on every loop of that row alike rather than on one loop's whole
    series; rotated from row to row, so that none always comes first."""
    return runner.rotate(list(loops), row_index)


def load_once_hung(opts, server, loop, port, pid, row, rate, duration, warmup):
    """load(), unless this (server, loop, row) once hung the load generator:
    a loop that cannot serve a row is a result once, and waiting out the
    generator's time-out again in every round and rate would only spend
    the part's time."""
    key = (server, loop, row[0])
    if key in opts.hung:
        return {"status": "skipped", "detail": f"not run again: {opts.hung[key]}"}
    got = load(opts, server, port, pid, row, rate, duration, warmup)
    if got["status"] == "timeout":
        opts.hung[key] = f"{got['status']} in its first run: {got['detail']}"
    return got


def measure_throughput(opts, server, rows, live):
    """One closed-loop sample of each row on each live server {loop: (port,
    pid)}, the loops interleaved row by row: {loop: [samples]}."""
    got = {loop: [] for loop in live}
    for j, row in enumerate(rows):
        for loop in interleave(live, j):
            port, pid = live[loop]
            s = load_once_hung(opts, server, loop, port, pid, row, 0, opts.duration, opts.warmup)
            got[loop].append({"row": row[0], **s})
            shown = f"{s['rate']:,.0f} req/s" if s["status"] == "ok" else s["status"]
            log(f"apps: {server} {row[0]} {loop} {shown}")
            if s["status"] != "ok":
                log(f"  {s.get('detail', '')[-200:]}")
    return got


def measure_latency(opts, server, rows, base, ceilings, live):
    """opts.latency_samples samples of each row at each rate on each live
    server {loop: (port, pid)}: {loop: [samples]}. The rows are rotated
    between passes, so that a burst of noise spoils one sample of a row,
    not its figure (the report takes the median p99), and the loops
    interleaved within each (row, rate). A rate above a loop's own maximum
    on the row (ceilings {loop: {row: maximum}}) is not run: its queue
    would only grow, and the figure would be the sample's length."""
    got = {loop: [] for loop in live}
    for k in range(opts.latency_samples):
        # the servers are warm after the first pass: a short warm-up opens
        # the connections
        warmup = opts.warmup if k == 0 else min(opts.warmup, 0.05)
        for j, row in enumerate(runner.rotate(rows, k)):
            for share in opts.loads:
                rate = share * base[row[0]]
                for loop in interleave(live, k + j):
                    top = ceilings[loop].get(row[0])
                    if top is None or top < rate:
                        if k == 0:
                            why = (
                                "no maximum measured"
                                if top is None
                                else f"its maximum {top:,.0f}/s"
                            )
                            got[loop].append(
                                {"row": row[0], "load": share, "target": rate}
                                | {"status": "saturated"}
                                | {"detail": f"not run above the loop's own maximum ({why})"}
                            )
                        continue
                    port, pid = live[loop]
                    s = load_once_hung(
                        opts, server, loop, port, pid, row, rate, opts.latency_duration, warmup
                    )
                    got[loop].append(
                        {"row": row[0], "load": share, "target": rate, "sample": k + 1, **s}
                    )
                    shown = (
                        f"p99 {s['p99_us']:,.0f} µs at {s['rate']:,.0f} req/s"
                        if s["status"] == "ok"
                        else s["status"]
                    )
                    log(f"apps latency: {server} {row[0]} {loop} {share}: {shown}")
    return got


def gather(fleet, measured, **tags):
    """Every sample of a fleet's pass, tagged: the measured ones (a server
    that died or would not stop turns its ok samples into its fate) and
    the failed starts."""
    out = []
    for loop, samples in measured.items():
        fate = fleet.fates.get(loop)
        for s in samples:
            if fate and s["status"] == "ok":
                s.update(fate)
            out.append({**s, "loop": loop, **tags})
    for loop, samples in fleet.failed.items():
        out += [{**s, "loop": loop, **tags} for s in samples]
    return out


def throughput_pass(opts, tmpdir):
    found = []
    for label, k in runner.rounds(0, opts.rounds):
        for server in opts.servers:
            rows = runner.rotate(list(SERVER_ROWS[server]), k)
            log(f"apps round {label}: {server}")
            with serving(opts, server, runner.rotate(opts.contenders, k), tmpdir) as fleet:
                measured = measure_throughput(opts, server, rows, fleet.live)
            found += gather(fleet, measured, server=server, round=label, part="throughput")
    return found


def median_max(samples, server, row, loop="asyncio"):
    rates = [
        s["rate"]
        for s in samples
        if (s["server"], s["row"], s["loop"], s["status"]) == (server, row, loop, "ok")
    ]
    return statistics.median(rates) if rates else None


def latency_pass(opts, tmpdir, throughput):
    found = []
    for server in opts.servers:
        base = {r[0]: median_max(throughput, server, r[0]) for r in SERVER_ROWS[server]}
        rows = [r for r in SERVER_ROWS[server] if base[r[0]]]
        loops = runner.rotate(opts.contenders, 1)
        ceilings = {
            loop: {r[0]: median_max(throughput, server, r[0], loop) for r in rows} for loop in loops
        }
        with serving(opts, server, loops, tmpdir) as fleet:
            measured = measure_latency(opts, server, rows, base, ceilings, fleet.live)
        found += gather(fleet, measured, server=server, round="1", part="latency")
    return found


def build_appload(tmpdir):
    exe = os.path.join(tmpdir, "appload")
    subprocess.run(
        ["go", "build", "-o", exe, "."], cwd=os.path.join(HERE, "load"), check=True, timeout=600
    )
    return exe


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    # the defaults fit the part in about 10 minutes here with every rival
    p.add_argument("--duration", type=float, default=0.5, help="seconds per throughput sample")
    p.add_argument("--latency-duration", type=float, default=0.4, help="seconds per sample")
    p.add_argument("--latency-samples", type=int, default=3, help="samples per row and rate")
    p.add_argument("--warmup", type=float, default=0.15, help="seconds before each measurement")
    p.add_argument("--loads", default="0.5,0.9", help="shares of asyncio's maximum")
    p.add_argument("--contenders", default=",".join(LOOPS))
    p.add_argument("--servers", default="uvicorn,aiohttp,uvicorn-ws")
    p.add_argument("--heading", default="##")
    p.add_argument("--tag", default="")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    opts = p.parse_args(argv)
    opts.loads = [float(x) for x in opts.loads.split(",") if x]
    opts.servers = [s for s in opts.servers.split(",") if s in SERVER_ROWS]
    opts.versions = runner.versions(NEEDS)
    lacking = [d for d, v in opts.versions.items() if v is None]
    opts.skipped = services.missing() or (
        f"not installed in this venv: {', '.join(lacking)}" if lacking else ""
    )
    wanted = [c for c in opts.contenders.split(",") if c in LOOPS]
    opts.contenders, absent = runner.available(sys.executable, wanted)
    opts.pin_server, opts.pin_client = runner.cpu_pair()
    opts.unable = {}  # (server, loop) -> why it never started
    opts.hung = {}  # (server, loop, row) -> why the load generator never finished
    t0 = time.monotonic()
    found = []
    if opts.skipped:
        log(f"apps: skipped: {opts.skipped}")
    else:
        with tempfile.TemporaryDirectory(prefix="zl-apps-") as tmpdir:
            opts.appload = build_appload(tmpdir)
            with services.running(tmpdir, opts.pin_client) as svc:
                opts.svc = svc
                opts.services = svc.versions()
                through = throughput_pass(opts, tmpdir)
                found = through + latency_pass(opts, tmpdir, through)
    elapsed = time.monotonic() - t0
    os.makedirs(opts.out, exist_ok=True)
    suffix = f"-{opts.tag}" if opts.tag else ""
    pngs = report.charts(
        opts, found, lambda kind: os.path.join(opts.out, f"chart-apps-{kind}{suffix}.png")
    )
    text = report.markdown(opts, found, absent, elapsed, pngs)
    print(text)
    base = runner.write_report(
        opts.out,
        "apps",
        opts.tag,
        text,
        {"options": report.options_doc(opts), "absent": absent, "samples": found},
    )
    log(f"# wrote {base}.md and .json" + (f", {', '.join(pngs)}" if pngs else ""))
    return 0
