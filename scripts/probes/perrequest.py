"""What one request of an application row costs its server, by counts that
drift far less than time with the load of a shared machine: user-space
instructions (callgrind), system calls by name (strace -f, every thread,
the Go runtime's included), or the same at full speed with context switches
(perf stat's tracepoints, --measure kernel); or CPU time, user and system
apart (--measure cpu, perf stat's rusage: time, so compare loops side by
side); or the Python and C functions called from Python, by name
(--measure calls, probes/callcount.py: where two loops run different
Python). They say what bounds a row: the application's own Python (issue
43's "bound", as docs/where-time-goes.md gives it for uvicorn plaintext),
the loop, or the kernel.

    python -m probes.perrequest [--measure instructions|syscalls|kernel|cpu|calls] \\
        [--rows json,db] [--servers uvicorn] [--loops asyncio,uvloop,zloopgo] \\
        [--requests 400] [--split] [--threads] [--repeat 3] [--keep DIR]

For each (server, row, loop) the server runs under the counter twice,
serving N and then 2N requests from the load generator (apps/load, closed
loop, every answer checked, on the usual connections), then ends itself
(GET /exit: a signal landing on one of the Go runtime's threads trips
callgrind); the difference of the two counts divided by N is one request's
cost without start-up and shut-down. Instructions: with --split divided as
probes/instructions.py divides them (the interpreter, _asyncio,
zloopgo's C adapter and Go engine, another loop's own module, libc,
other extensions such as asyncpg's); the
kernel is not counted; zloopgo must be built with GOFLAGS=-tags=valgrind.
System calls: the calls per request by name, largest first. PostgreSQL,
Redis and the load generator run outside the counter.

No count repeats exactly: what runs per unit of time rather than per
request (the Go runtime's sysmon taking the loop's P back during a long
cgo call and the Ms it starts to look for work; the application's
timers) costs more per request the slower the run, and callgrind runs
the server some 50 times slower than it runs, more on a loaded machine.
So each (server, row, loop) is measured --repeat times (3 by default),
the loops taking turns, and the median is printed with each part's
min/median/max: a difference between two builds smaller than that
spread is not shown by the totals. --threads (instructions) counts the
threads other than the loop's apart, where most of the Go runtime's
time-driven work runs (docs/benchmarks.md, "Per-request counts that
repeat"). --keep keeps the counters' files for
probes/perrequest_functions.py, which says which functions moved.
"""

import argparse
import contextlib
import glob
import http.client
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request

from benchmark import samples as runner
from benchmark.apps import bench, services
from benchmark.apps.rows import CONNS, SERVER_ROWS

from . import callcount
from .instructions import PARTS, split

SHORT = {
    "json": "JSON serialization",
    "db": "single query",
    "queries": "20 queries",
    "fortunes": "fortunes",
    "updates": "20 updates",
    "cached": "cached query (Redis, 20 Worlds)",
    "ws": "WebSocket echo, 1 KiB",
}


# --threads: the instructions of the first thread (the one that runs the
# loop) and of every other thread apart; with --split the parts are then
# the first thread's alone
LOOP_THREAD = "loop's thread"
OTHER_THREADS = "other threads"


def summary(path):
    """The instructions a callgrind file counts, or None if it has none."""
    with open(path) as f:
        found = re.search(r"^summary: (\d+)", f.read(), re.MULTILINE)
    return None if found is None else int(found.group(1))


def thread_files(out):
    """{thread number: file} that callgrind --separate-threads=yes wrote
    for out (out-01, out-02, ...; the loop's thread, the first, is 1)."""
    found = {}
    for path in glob.glob(glob.escape(out) + "-*"):
        suffix = path[len(out) + 1 :]
        if suffix.isdigit():
            found[int(suffix)] = path
    return found


def instructions(out):
    """The counter's command prefix, and how to read what it wrote to out:
    {part: instructions} (the total under "total"; with --threads, the
    loop's thread under LOOP_THREAD, the others under OTHER_THREADS)."""

    def read(opts):
        if not opts.threads:
            total = summary(out)
            if total is None:
                return None
            return {"total": total, **(split(out) if opts.split else {})}
        files = thread_files(out)
        if 1 not in files:
            return None
        counts = {n: summary(path) or 0 for n, path in files.items()}
        total = sum(counts.values())
        got = {"total": total, LOOP_THREAD: counts[1], OTHER_THREADS: total - counts[1]}
        if opts.split:
            got.update(split(files[1]))
        return got

    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"], read


def syscalls(out):
    """The same for strace -f -c: {system call: calls} (and "total")."""

    def read(opts):
        got = {}
        with open(out) as f:
            for line in f:
                cols = line.split()
                if len(cols) >= 5 and cols[3].isdigit() and cols[-1] != "total":
                    got[cols[-1]] = int(cols[3])
        if not got:
            return None
        got["total"] = sum(got.values())
        return got

    return ["strace", "-f", "-c", "-o", out], read


# the calls a loop makes per request on Linux, each counted by its
# tracepoint (--measure kernel); others are not counted there
KERNEL_CALLS = (
    "read",
    "write",
    "writev",
    "sendto",
    "recvfrom",
    "epoll_wait",
    "epoll_pwait",
    "epoll_ctl",
    "futex",
    "nanosleep",
    "io_uring_enter",
)


def kernel(out):
    """The same for perf stat at full speed: {system call: calls} for
    KERNEL_CALLS (and "total"), and context switches. strace stops every
    call, so a request takes several times longer under it, and calls that
    come per unit of time rather than per request (the Go runtime's sysmon,
    the engine's yield every 8 ms) are counted several times over per
    request; tracepoints do not slow the server that way."""
    events = [f"syscalls:sys_enter_{name}" for name in KERNEL_CALLS] + ["context-switches"]

    def read(opts):
        got = {}
        with open(out) as f:
            for line in f:
                cols = line.strip().split(",")
                if len(cols) > 2 and cols[0].isdigit():
                    got[cols[2].removeprefix("syscalls:sys_enter_")] = int(cols[0])
        if not got:
            return None
        got["total"] = sum(v for k, v in got.items() if k != "context-switches")
        return got

    return ["perf", "stat", "-x,", "-o", out, "-e", ",".join(events), "--"], read


def cpu(out):
    """The server's CPU time at full speed, user and system apart (perf
    stat's rusage of the server, every thread), in µs, and its context
    switches. Time, unlike the counts above, moves with what else runs:
    run the loops side by side and read it beside the counts. The split
    says whether a difference is the loop's user-space work or the
    kernel's (a second send per reply, a wake-up)."""
    figure = re.compile(r"^\s*([\d.,]+)\s+(?:msec\s+)?(task-clock|context-switches)\b")
    seconds = re.compile(r"^\s*([\d.]+)\s+seconds (user|sys)\s*$")

    def read(opts):
        got = {}
        with open(out) as f:
            for line in f:
                if m := figure.match(line):
                    got[m.group(2)] = float(m.group(1).replace(",", ""))
                elif m := seconds.match(line):
                    got[m.group(2)] = float(m.group(1)) * 1e6
        if "user" not in got or "sys" not in got:
            return None
        got["total"] = got["user"] + got["sys"]
        return got

    return ["perf", "stat", "-o", out, "-e", "task-clock,context-switches", "--"], read


def calls(out):
    """The same for probes/callcount.py: {function: calls} (and "total"),
    every Python function and every C function called from Python, by
    name. The Python that runs per request on two loops, side by side."""
    return [sys.executable, "-m", "probes.callcount", out], lambda opts: callcount.read(out)


MEASURES = {
    "instructions": instructions,
    "syscalls": syscalls,
    "kernel": kernel,
    "cpu": cpu,
    "calls": calls,
}


# How long one GET /ready may wait for its answer. The server under
# callgrind can take seconds to answer its first request; a request given
# up on is still served later, inside the count, and how many were given
# up on varies with the machine's load: a client that asked every 0.5 s
# (benchmark/apps/bench.py's ready) moved the interpreter's part by
# thousands per request (an extra connection and request cost a fresh
# server's interpreter ~130,000 instructions).
READY_ANSWER = 300


def answered_ready(port):
    """True once the server answered GET /ready, asking once and waiting
    up to READY_ANSWER seconds for the answer; raises OSError while
    nothing listens on the port (refused: nothing reached the server), so
    that Server.wait_ready asks again. False on a connection to itself
    (see bench.ready), which the server never sees either."""
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/ready", timeout=READY_ANSWER
        ) as answer:
            return answer.status == 200
    except http.client.HTTPException:
        return False


def fetch_exit(port):
    """GET /exit: the server ends its process (every application server
    answers it; see benchmark/apps/handlers.py)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/exit", timeout=60) as r:
        r.read()


def count(opts, server, row, loop, requests, tmpdir, run=1):
    """What the counter read of a server run that answered `requests`
    requests, or raises RuntimeError saying why not. With --keep, the
    counter's file is copied there as out_name() names it."""
    out = os.path.join(tmpdir, f"{opts.measure}-{server}-{loop}-{requests}.out")
    port = runner.free_port()
    for stale in [out, *thread_files(out).values()]:  # an earlier run's, same name
        with contextlib.suppress(FileNotFoundError):
            os.remove(stale)
    prefix, read = MEASURES[opts.measure](out)
    prefix[1:1] = opts.counter_option
    if opts.measure == "instructions" and opts.threads:
        prefix.insert(1, "--separate-threads=yes")
    cmd = [*opts.pin_server, *prefix, *bench.server_command(server, loop, port)]
    env = dict(
        os.environ,
        ZL_APPS_PG=opts.svc.pg_dsn,
        ZL_APPS_REDIS=opts.svc.redis_url,
        PYTHONHASHSEED="0",
        GODEBUG="asyncpreemptoff=1",  # callgrind aborts on the preemption signals
    )
    env.update(server_env(opts.server_env))
    log_path = os.path.join(tmpdir, f"server-{server}-{loop}.out")
    with runner.Server(cmd, log_path, env=env, cwd=bench.SCRIPTS) as srv:
        if not srv.wait_ready(lambda: answered_ready(port), 600):
            raise RuntimeError(srv.not_ready("answered /ready under the counter")[1])
        _, path, check = row
        scheme = "ws" if check.startswith("echo") else "http"
        client = [*opts.pin_client, opts.appload, "-url", f"{scheme}://127.0.0.1:{port}{path}"]
        client += ["-check", check, "-conns", str(CONNS[server]), "-requests", str(requests)]
        text, rc = runner.run_client(client, 1800)
        if rc != 0:
            raise RuntimeError(f"appload: {(text or 'timed out')[-300:]}")
        with contextlib.suppress(OSError):  # it may be gone before the answer is read
            fetch_exit(port)
        try:
            srv.proc.wait(600)
        except subprocess.TimeoutExpired:
            raise RuntimeError("the server did not exit after GET /exit") from None
    got = read(opts)
    if got is None:
        raise RuntimeError(f"the counter wrote nothing; the server said: {srv.text[:2000]}")
    if opts.keep:
        kept = os.path.join(opts.keep, out_name(opts, server, row, loop, requests, run))
        threads = thread_files(out)
        for n, path in threads.items():
            shutil.copyfile(path, f"{kept}-{n:02}")
        if not threads:  # with threads apart, callgrind leaves out itself empty
            shutil.copyfile(out, kept)
    return got


def server_env(settings):
    """{name: value} of --server-env's NAME=VALUE settings, in order (a
    later one wins); a setting without "=" is a ValueError."""
    env = {}
    for setting in settings:
        name, eq, value = setting.partition("=")
        if not eq or not name:
            raise ValueError(f"--server-env takes NAME=VALUE, not {setting!r}")
        env[name] = value
    return env


def out_name(opts, server, row, loop, requests, run):
    """The name a kept counter file has in --keep: what was counted, the
    requests served and which run of --repeat (1, 2, ...);
    probes/perrequest_functions.py reads these names."""
    short = next(k for k, v in SHORT.items() if v == row[0])
    return f"{opts.measure}-{server}-{short}-{loop}-{requests}-run{run}.out"


def per_request(once, twice, n):
    """One request's cost: the difference of the runs of n and 2n
    requests, divided by n, for every key the longer run has."""
    return {k: (twice.get(k, 0) - once.get(k, 0)) / n for k in twice}


def spread(runs):
    """{key: (min, median, max)} over the per-request dicts of the runs,
    for every key that one of them has (a key a run lacks counts 0 there:
    a part where nothing ran)."""
    keys = sorted({k for per in runs for k in per})
    return {
        k: (
            min(per.get(k, 0) for per in runs),
            statistics.median(per.get(k, 0) for per in runs),
            max(per.get(k, 0) for per in runs),
        )
        for k in keys
    }


def spread_keys(opts, spreads):
    """The keys whose spread is printed: the total, and the parts the
    figure names (the instructions' parts with --split, user and system
    CPU time, context switches); not every system call or function."""
    wanted = ["total"]
    if opts.measure == "instructions":
        wanted += PARTS if opts.split else []
        wanted += [LOOP_THREAD, OTHER_THREADS] if getattr(opts, "threads", False) else []
    if opts.measure == "cpu":
        wanted += ["user", "sys"]
    wanted.append("context-switches")
    return [k for k in wanted if k in spreads and any(spreads[k])]


def describe_spread(opts, runs):
    """Lines saying, per key of spread_keys, the minimum, median and
    maximum over the runs and their distance (max - min), so that a
    difference between two builds can be read against it."""
    spreads = spread(runs)
    digits = 0 if opts.measure == "instructions" else 3 if opts.measure != "cpu" else 1
    lines = [f"    over {len(runs)} runs: {'min':>12} {'median':>12} {'max':>12} {'max - min':>12}"]
    for k in spread_keys(opts, spreads):
        lo, mid, hi = spreads[k]
        figures = " ".join(f"{v:12,.{digits}f}" for v in (lo, mid, hi, hi - lo))
        lines.append(f"    {k:16}{figures}")
    return "\n".join(lines)


def describe(opts, per):
    if opts.measure == "cpu":
        return (
            f"{per['total']:8.1f} µs of CPU per request: user {per['user']:.1f}, "
            f"system {per['sys']:.1f}; context switches {per.get('context-switches', 0):.3f}"
        )
    if opts.measure == "calls":
        listed = sorted(((v, k) for k, v in per.items() if k != "total" and v >= 0.5), reverse=True)
        return f"{per['total']:8.1f} calls per request:" + "".join(
            f"\n    {v:8.2f}  {name}" for v, name in listed
        )
    if opts.measure in ("syscalls", "kernel"):
        skip = ("total", "context-switches")
        calls = sorted(
            ((v, k) for k, v in per.items() if k not in skip and v >= 0.001), reverse=True
        )
        line = f"{per['total']:8.3f} system calls per request: " + ", ".join(
            f"{name} {v:.3f}" for v, name in calls[:8]
        )
        if "context-switches" in per:
            line += f"; context switches {per['context-switches']:.3f}"
        return line
    line = f"{per['total']:10,.0f} instructions per request"
    if opts.split:
        line += "".join(f"; {part} {per[part]:,.0f}" for part in PARTS if per.get(part))
    if OTHER_THREADS in per:
        line += "".join(f"; {k} {per.get(k, 0):,.0f}" for k in (LOOP_THREAD, OTHER_THREADS))
    return line


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--measure", choices=sorted(MEASURES), default="instructions")
    p.add_argument("--rows", default="json,db", help=f"of {','.join(SHORT)}")
    p.add_argument("--servers", default="uvicorn", help="of uvicorn,aiohttp (ws: uvicorn-ws)")
    p.add_argument("--loops", default="asyncio,uvloop,zloopgo")
    p.add_argument("--requests", type=int, default=400, help="N (the runs serve N and 2N)")
    p.add_argument("--split", action="store_true", help="instructions by where they ran")
    p.add_argument(
        "--threads",
        action="store_true",
        help="instructions: the threads other than the loop's apart (the Go runtime's "
        "sysmon and idle Ms, work per unit of time); --split then splits the loop's thread",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="pairs of runs per (server, row, loop), the loops taking turns; over 1, "
        "the median and each part's min/median/max are printed",
    )
    p.add_argument("--keep", metavar="DIR", help="copy the counters' files into DIR")
    p.add_argument(
        "--counter-option",
        action="append",
        default=[],
        metavar="OPT",
        help="an option for the counter (valgrind, strace, perf), e.g. "
        "--counter-option=--fair-sched=yes; repeatable",
    )
    p.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in the server's environment, after the probe's own (PYTHONHASHSEED, "
        "GODEBUG): a setting to test as a cause of spread; repeatable",
    )
    opts = p.parse_args(argv)
    if opts.repeat < 1:
        p.error("--repeat must be at least 1")
    try:
        server_env(opts.server_env)
    except ValueError as exc:
        p.error(str(exc))
    if opts.keep:
        os.makedirs(opts.keep, exist_ok=True)
    why = services.missing()
    if why:
        print(f"not run: {why}", file=sys.stderr)
        return 1
    opts.pin_server, opts.pin_client = runner.cpu_pair()
    with tempfile.TemporaryDirectory(prefix="zl-apps-count-") as tmpdir:
        opts.appload = bench.build_appload(tmpdir)
        with services.running(tmpdir, opts.pin_client) as svc:
            opts.svc = svc
            for short in opts.rows.split(","):
                title = SHORT[short]
                servers = ["uvicorn-ws"] if short == "ws" else opts.servers.split(",")
                for server in servers:
                    row = next(r for r in SERVER_ROWS[server] if r[0] == title)
                    measure_cell(opts, server, short, row, tmpdir)
    return 0


def measure_cell(opts, server, short, row, tmpdir):
    """Every loop on one (server, row): --repeat pairs of runs each, the
    loops taking turns within each repetition (so that a slow spell of
    the shared machine falls on all of them), each run's figure printed
    as it comes and, over several runs, the medians and the spread."""
    loops = opts.loops.split(",")
    runs = {loop: [] for loop in loops}
    n = opts.requests
    for run in range(1, opts.repeat + 1):
        tag = f" run {run}/{opts.repeat}" if opts.repeat > 1 else ""
        for loop in loops:
            head = f"{server:10} {short:9} {loop:8}"
            try:
                once = count(opts, server, row, loop, n, tmpdir, run)
                twice = count(opts, server, row, loop, 2 * n, tmpdir, run)
            except RuntimeError as exc:
                print(f"{head}{tag} failed: {exc}", flush=True)
                continue
            runs[loop].append(per_request(once, twice, n))
            print(f"{head}{tag} {describe(opts, runs[loop][-1])}", flush=True)
    if opts.repeat == 1:
        return
    for loop in loops:
        if not runs[loop]:
            continue
        medians = {k: mid for k, (_, mid, _) in spread(runs[loop]).items()}
        head = f"{server:10} {short:9} {loop:8} median of {len(runs[loop])}:"
        print(f"{head} {describe(opts, medians).strip()}", flush=True)
        print(describe_spread(opts, runs[loop]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
