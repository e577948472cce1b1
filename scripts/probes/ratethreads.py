"""What runs in an application server's process at a constant request rate,
thread by thread, counted per 1,000 requests (issue 43's tail latency): for
each thread its CPU time, how long it waited runnable for the CPU, how often
it was put on the CPU, its voluntary (it slept: each ends in a wake-up) and
involuntary (preempted) context switches, grouped by what kind of thread it
is; and for zloopgo the Go runtime's collections and their stop-the-world
pauses (GODEBUG=gctrace=1), for every loop the interpreter's collections
(the apps' GET /gc), and what else ran on the server's CPU meanwhile
(/proc/stat's busy time there less the server's own).

    python -m probes.ratethreads [--rows json,db] [--servers uvicorn] \\
        [--loops asyncio,uvloop,zuvloop,zloopgo] [--shares 0.5,0.9] \\
        [--base RATE] [--duration 3] [--repeat 2]

Each (server, row) first gets its rate base: asyncio's closed-loop maximum
(one run of 1 s after 0.3 s), unless --base gives it. Then, per repetition, each loop
in turn (rotated between repetitions) starts a fresh server pinned to the
server's CPU as scripts/bench's apps part does (the load generator,
PostgreSQL and Redis on the other), is warmed up at the first rate, and is
driven by the apps' open-loop generator (apps/load, every answer checked)
at each share of the base for --duration seconds; the server's threads are
read from /proc before and after that run, and every 10 ms during it to see
where each one waits (its system call and the object its instruction
pointer is in), which names its kind:

    loop thread              the process's first thread, which runs the loop
    Go sysmon                a thread of zloopgo's extension mostly in nanosleep
    Go idle M                ... mostly in futex (a parked M: the yield's
                             hand-offs, spinning Ms, GC workers run on these)
    Go M in netpoll          ... mostly in epoll (the runtime's poller)
    OBJECT SYSCALL           any other (a Python thread waits in libc futex)

Counts, not time, are what it is for: a shared machine moves CPU time and
waits, not how many times a thread slept or was preempted. The waits
(schedstat's run delay) are printed because they are what the tail is made
of. It needs Linux's /proc with per-task schedstat, root or the same user
as the server (/proc/PID/task/TID/syscall), and what the apps part needs
(PostgreSQL, Redis, Go). It knows threads and processes, not why a loop
made a thread.
"""

import argparse
import collections
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

from benchmark import samples as runner
from benchmark.apps import bench, services
from benchmark.apps.rows import CONNS, SERVER_ROWS

from .perrequest import SHORT

# the system calls a thread of these servers waits in, by number
SYSCALL_NAMES = {
    "x86_64": {
        0: "read",
        1: "write",
        7: "poll",
        23: "select",
        35: "nanosleep",
        202: "futex",
        230: "clock_nanosleep",
        232: "epoll_wait",
        270: "pselect6",
        271: "ppoll",
        281: "epoll_pwait",
        441: "epoll_pwait2",
        426: "io_uring_enter",
    },
    "aarch64": {
        22: "epoll_pwait",
        63: "read",
        64: "write",
        72: "pselect6",
        73: "ppoll",
        98: "futex",
        101: "nanosleep",
        115: "clock_nanosleep",
        426: "io_uring_enter",
        441: "epoll_pwait2",
    },
}
COUNTERS = ("cpu_us", "wait_us", "slices", "voluntary", "involuntary", "user_us", "system_us")
SHOWN = COUNTERS[:5]  # user and system time are in clock ticks: in the JSON only
LOOP_THREAD = "loop thread"
SAMPLE_EVERY = 0.01  # seconds between looks at where the threads are
CLOCK_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_thread(task_dir):
    """One thread's counters from its /proc/PID/task/TID folder: comm,
    CPU time and run delay in µs (schedstat: time on a CPU, time runnable
    but waiting for one, times put on a CPU), voluntary and involuntary
    context switches (status), user and system time in µs (stat, whole
    clock ticks); None if the thread is gone."""
    try:
        with open(os.path.join(task_dir, "schedstat")) as f:
            run_ns, wait_ns, slices = (int(x) for x in f.read().split()[:3])
        with open(os.path.join(task_dir, "status")) as f:
            status = f.read()
        with open(os.path.join(task_dir, "comm")) as f:
            comm = f.read().strip()
        with open(os.path.join(task_dir, "stat")) as f:
            ticks = f.read().rsplit(")", 1)[1].split()[11:13]
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return None
    got = {"comm": comm, "cpu_us": run_ns / 1e3, "wait_us": wait_ns / 1e3, "slices": slices}
    got["user_us"], got["system_us"] = (int(t) * 1e6 / CLOCK_TICK for t in ticks)
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name == "voluntary_ctxt_switches":
            got["voluntary"] = int(value)
        elif name == "nonvoluntary_ctxt_switches":
            got["involuntary"] = int(value)
    return got


def snapshot(pid, proc="/proc"):
    """{tid: read_thread} for every thread of pid now."""
    task = os.path.join(proc, str(pid), "task")
    got = {}
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(task):
            one = read_thread(os.path.join(task, name))
            if one is not None:
                got[int(name)] = one
    return got


def difference(before, after):
    """{tid: {counter: after - before}} for the threads alive at the end
    (one born meanwhile counts from 0; one that ended is not seen: its
    counts are lost, and the process's total in /proc/PID/stat keeps
    them only as ticks)."""
    out = {}
    for tid, now in after.items():
        was = before.get(tid, {})
        out[tid] = {k: now[k] - was.get(k, 0) for k in COUNTERS}
        out[tid]["comm"] = now["comm"]
    return out


def parse_maps(text):
    """[(start, end, path)] of the mappings of /proc/PID/maps that name a
    file."""
    found = []
    for line in text.splitlines():
        cols = line.split(None, 5)
        if len(cols) == 6 and cols[5].startswith("/"):
            lo, _, hi = cols[0].partition("-")
            found.append((int(lo, 16), int(hi, 16), cols[5].strip()))
    return found


def object_at(maps, pc):
    """The file of the mapping holding pc, or "?"."""
    for lo, hi, path in maps:
        if lo <= pc < hi:
            return path
    return "?"


def where(syscall_line, maps, names):
    """What a thread is doing, from its /proc/PID/task/TID/syscall line:
    "running", or (object, system call) of the call it waits in (the
    object its instruction pointer is in)."""
    cols = syscall_line.split()
    if not cols or cols[0] == "running":
        return "running"
    pc = int(cols[-1], 16)
    number = int(cols[0])
    call = "no call" if number < 0 else names.get(number, f"call {number}")
    return (object_at(maps, pc), call)


def kind_of(tid, pid, seen, comm, first_comm):
    """A thread's kind from where it was seen waiting (Counter of where()
    results): the loop's thread, a Go runtime thread of zloopgo's
    extension by its usual wait, a thread with a name of its own, or the
    object and call it waited in most."""
    if tid == pid:
        return LOOP_THREAD
    waits = collections.Counter({k: n for k, n in seen.items() if k != "running"})
    if not waits:
        return "always running"
    (obj, call), _ = waits.most_common(1)[0]
    if "/zloopgo/_engine" in obj:
        # zloopgo's extension, zloopgo/_engine.*.so, holds the Go runtime,
        # which makes its own system calls (raw, not through libc)
        if call in ("nanosleep", "clock_nanosleep"):
            return "Go sysmon"
        if call == "futex":
            return "Go idle M"
        if call.startswith("epoll"):
            return "Go M in netpoll"
    named = f" '{comm}'" if comm != first_comm else ""
    return f"thread{named} in {os.path.basename(obj)} {call}"


def by_kind(delta, kinds):
    """{kind: {counter: sum, "threads": n}} of a difference()."""
    out = {}
    for tid, counts in delta.items():
        row = out.setdefault(kinds.get(tid, "unseen"), dict.fromkeys(COUNTERS, 0) | {"threads": 0})
        for k in COUNTERS:
            row[k] += counts[k]
        row["threads"] += 1
    return out


class Watcher:
    """Looks every SAMPLE_EVERY seconds, in a thread of its own, at where
    each thread of pid is (where()), until stopped: seen {tid: Counter}."""

    def __init__(self, pid, proc="/proc"):
        self.pid, self.proc = pid, proc
        self.seen = collections.defaultdict(collections.Counter)
        self.names = SYSCALL_NAMES.get(platform.machine(), {})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def look(self):
        base = os.path.join(self.proc, str(self.pid))
        try:
            with open(os.path.join(base, "maps")) as f:
                maps = parse_maps(f.read())
            tids = os.listdir(os.path.join(base, "task"))
        except (FileNotFoundError, ProcessLookupError):
            return
        for name in tids:
            try:
                with open(os.path.join(base, "task", name, "syscall")) as f:
                    line = f.read()
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
            self.seen[int(name)][where(line, maps, self.names)] += 1

    def _run(self):
        while not self._stop.wait(SAMPLE_EVERY):
            self.look()


def gc_trace(text):
    """(collections, stop-the-world pause in ms) of the Go runtime's
    GODEBUG=gctrace=1 lines in text: "gc N @T s P%: A+B+C ms clock, ...",
    whose A (sweep termination) and C (mark termination) stop the world."""
    cycles, paused = 0, 0.0
    for line in text.splitlines():
        if not line.startswith("gc ") or " ms clock" not in line:
            continue
        clock = line.split(":", 1)[1].split(" ms clock")[0].split()[-1]
        phases = [float(x) for x in clock.split("+")]
        cycles += 1
        paused += phases[0] + phases[-1]
    return cycles, paused


def cpu_busy_us(cpu, path="/proc/stat"):
    """The time CPU `cpu` was busy (every state but idle and iowait), in
    µs, from /proc/stat's clock ticks: what ran on the server's CPU, the
    other processes of this shared machine included."""
    with open(path) as f:
        for line in f:
            cols = line.split()
            if cols[0] == f"cpu{cpu}":
                ticks = [int(x) for x in cols[1:]]
                return (sum(ticks) - ticks[3] - ticks[4]) * 1e6 / CLOCK_TICK
    return None


def python_gc(port):
    """The server's interpreter's collections so far per generation (GET
    /gc of the apps), or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/gc", timeout=5) as r:
            return json.loads(r.read())["collections"]
    except (OSError, ValueError, KeyError):
        return None


def server_cpu(pin):
    """The CPU number a taskset prefix pins the server to, or None."""
    return int(pin[-1]) if pin and pin[-1].isdigit() else None


def appload(opts, server, port, row, rate, duration, warmup):
    """One run of the load generator: its result dict, or raises
    RuntimeError with its output."""
    _, path, check = row
    scheme = "ws" if check.startswith("echo") else "http"
    cmd = [*opts.pin_client, opts.appload, "-url", f"{scheme}://127.0.0.1:{port}{path}"]
    cmd += ["-check", check, "-duration", f"{duration}s", "-warmup", f"{warmup}s"]
    cmd += ["-conns", str(CONNS[server]), "-rate", f"{rate:.1f}"]
    out, rc = runner.run_client(cmd, duration + warmup + 30)
    found = [line for line in (out or "").splitlines() if line.startswith("APPLOAD ")]
    if rc != 0 or not found:
        raise RuntimeError(f"appload: {(out or 'timed out')[-300:]}")
    return json.loads(found[-1][len("APPLOAD ") :])


def server_env(opts, loop):
    env = dict(os.environ, ZL_APPS_PG=opts.svc.pg_dsn, ZL_APPS_REDIS=opts.svc.redis_url)
    if loop == "zloopgo":
        env["GODEBUG"] = ",".join(x for x in (env.get("GODEBUG", ""), "gctrace=1") if x)
    for setting in opts.server_env:
        name, _, value = setting.partition("=")
        env[name] = value
    return env


def measure_loop(opts, server, row, loop, rates, tmpdir):
    """A fresh server of loop driven at each rate: [{rate, load, kinds,
    go_gc, python_gc, others_cpu_us, pid, threads, window}] per rate
    (threads: {tid: [kind, its counts]}), or raises RuntimeError."""
    port = runner.free_port()
    log_path = os.path.join(tmpdir, f"{server}-{loop}.out")
    cmd = [*opts.pin_server, *bench.server_command(server, loop, port)]
    out = []
    with runner.Server(cmd, log_path, env=server_env(opts, loop), cwd=bench.SCRIPTS) as srv:
        if not srv.wait_ready(lambda: bench.ready(port), bench.READY_WITHIN):
            raise RuntimeError(srv.not_ready("answered /ready")[1])
        pid = srv.proc.pid
        appload(opts, server, port, row, rates[0], opts.warmup, 0)
        first_comm = snapshot(pid).get(pid, {}).get("comm", "")
        for rate in rates:
            gc_before = python_gc(port)
            srv.out.flush()
            trace_from = os.path.getsize(log_path)
            busy_before = cpu_busy_us(opts.cpu) if opts.cpu is not None else None
            before = snapshot(pid)
            start = time.monotonic()
            with Watcher(pid) as watcher:
                load = appload(opts, server, port, row, rate, opts.duration, 0)
            end = time.monotonic()
            after = snapshot(pid)
            busy_after = cpu_busy_us(opts.cpu) if opts.cpu is not None else None
            gc_after = python_gc(port)
            with open(log_path, errors="replace") as f:
                f.seek(trace_from)
                go_gc = gc_trace(f.read())
            delta = difference(before, after)
            kinds = {
                tid: kind_of(tid, pid, watcher.seen.get(tid, {}), d["comm"], first_comm)
                for tid, d in delta.items()
            }
            grouped = by_kind(delta, kinds)
            own = sum(g["cpu_us"] for g in grouped.values())
            others = None
            if busy_before is not None and busy_after is not None:
                others = max(busy_after - busy_before - own, 0.0)
            out.append(
                {
                    "rate": rate,
                    "load": load,
                    "kinds": grouped,
                    "go_gc": go_gc if loop == "zloopgo" else None,
                    "python_gc": (
                        [a - b for a, b in zip(gc_after, gc_before, strict=True)]
                        if gc_before and gc_after
                        else None
                    ),
                    "others_cpu_us": others,
                    "pid": pid,
                    "threads": {tid: [kinds[tid], delta[tid]] for tid in delta},
                    # CLOCK_MONOTONIC, as `perf record -k CLOCK_MONOTONIC`
                    # stamps its events: to cut a trace of the CPU to the run
                    "window": [start, end],
                }
            )
        if not srv.finish({}, 10):
            raise RuntimeError("the server died or would not stop")
    return out


def per_1000(value, answered):
    return value * 1000 / answered if answered else float("nan")


def describe(loop, got, share):
    """The lines of one loop's run at one rate: the load generator's
    figures, then per thread kind every counter per 1,000 answers."""
    load = got["load"]
    n = load["answered"]
    lines = [
        f"  {loop:8} at {share:.0%} ({got['rate']:,.0f}/s): {n:,} answers, "
        f"p50 {load['p50_us']:,.0f} µs, p99 {load['p99_us']:,.0f} µs, "
        f"p99.9 {load['p999_us']:,.0f} µs, late {load['late']}"
    ]
    head = "cpu µs, runnable-wait µs, on-CPU, voluntary, involuntary"
    lines.append(f"    per 1,000 requests ({head}):")
    order = sorted(got["kinds"].items(), key=lambda kv: (kv[0] != LOOP_THREAD, -kv[1]["cpu_us"]))
    for kind, row in order:
        figures = "  ".join(f"{per_1000(row[k], n):10,.1f}" for k in SHOWN)
        lines.append(f"    {kind:34} x{row['threads']:<3} {figures}")
    extra = []
    if got["go_gc"] is not None:
        cycles, paused = got["go_gc"]
        extra.append(
            f"Go GC {per_1000(cycles, n):.2f} cycles, {per_1000(paused * 1e3, n):.1f} µs "
            f"stopped ({cycles} in the run)"
        )
    if got["python_gc"] is not None:
        gens = ", ".join(f"{per_1000(c, n):.2f}" for c in got["python_gc"])
        extra.append(f"Python GC by generation {gens}")
    if got["others_cpu_us"] is not None:
        others = per_1000(got["others_cpu_us"], n)
        extra.append(f"other processes on the server's CPU {others:,.0f} µs")
    if extra:
        lines.append("    " + "; ".join(extra) + " (per 1,000)")
    return "\n".join(lines)


def base_rate(opts, server, row, tmpdir):
    """asyncio's closed-loop maximum on the row (1 s after 0.3 s)."""
    port = runner.free_port()
    cmd = [*opts.pin_server, *bench.server_command(server, "asyncio", port)]
    log_path = os.path.join(tmpdir, f"{server}-asyncio-base.out")
    with runner.Server(cmd, log_path, env=server_env(opts, "asyncio"), cwd=bench.SCRIPTS) as srv:
        if not srv.wait_ready(lambda: bench.ready(port), bench.READY_WITHIN):
            raise RuntimeError(srv.not_ready("answered /ready")[1])
        return appload(opts, server, port, row, 0, 1.0, 0.3)["rate"]


def loop_part(run, counter, loop_thread):
    """A run's counter per 1,000 answers, summed over the loop's thread
    (loop_thread True) or over every other thread."""
    picked = [
        v[counter] for kind, v in run["kinds"].items() if (kind == LOOP_THREAD) == loop_thread
    ]
    return per_1000(sum(picked), run["load"]["answered"])


def summary(results, loops, shares):
    """The medians over the repetitions, one line per loop and share:
    p99, the loop thread's runnable wait and switches, and the other
    threads' CPU time and times on the CPU, per 1,000 answers."""
    lines = []
    for i, share in enumerate(shares):
        for loop in loops:
            runs = [r[i] for r in results[loop] if r is not None]
            if not runs:
                continue

            def med(counter, loop_thread, runs=runs):
                return statistics.median(loop_part(r, counter, loop_thread) for r in runs)

            p99 = statistics.median(r["load"]["p99_us"] for r in runs)
            lines.append(
                f"  {share:.0%} {loop:8} p99 {p99:9,.0f} µs | loop thread: "
                f"wait {med('wait_us', True):8,.0f} µs, invol {med('involuntary', True):7,.1f}, "
                f"vol {med('voluntary', True):7,.1f} | other threads: "
                f"cpu {med('cpu_us', False):7,.0f} µs, on-CPU {med('slices', False):7,.1f}"
            )
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="json,db", help=f"of {','.join(SHORT)}")
    p.add_argument("--servers", default="uvicorn", help="of uvicorn,aiohttp (ws: uvicorn-ws)")
    p.add_argument("--loops", default="asyncio,uvloop,zuvloop,zloopgo")
    p.add_argument("--shares", default="0.5,0.9", help="shares of the base rate")
    p.add_argument("--base", type=float, help="the rate the shares are of (default: asyncio's max)")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per measured run")
    p.add_argument("--warmup", type=float, default=0.5, help="seconds at the first rate before")
    p.add_argument("--repeat", type=int, default=2, help="runs per loop, loops rotated")
    p.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in every server's environment (e.g. GOMAXPROCS=1); repeatable",
    )
    p.add_argument("--json", metavar="FILE", help="write every figure there")
    opts = p.parse_args(argv)
    shares = [float(x) for x in opts.shares.split(",") if x]
    loops = [x for x in opts.loops.split(",") if x]
    why = services.missing()
    if why:
        print(f"not run: {why}", file=sys.stderr)
        return 1
    opts.pin_server, opts.pin_client = runner.cpu_pair()
    opts.cpu = server_cpu(opts.pin_server)
    everything = []
    with tempfile.TemporaryDirectory(prefix="zl-ratethreads-") as tmpdir:
        opts.appload = bench.build_appload(tmpdir)
        with services.running(tmpdir, opts.pin_client) as svc:
            opts.svc = svc
            for short in opts.rows.split(","):
                servers = ["uvicorn-ws"] if short == "ws" else opts.servers.split(",")
                for server in servers:
                    row = next(r for r in SERVER_ROWS[server] if r[0] == SHORT[short])
                    base = opts.base or base_rate(opts, server, row, tmpdir)
                    rates = [share * base for share in shares]
                    print(f"{server} {short}: base {base:,.0f} requests/s", flush=True)
                    results = {loop: [] for loop in loops}
                    for k in range(opts.repeat):
                        for loop in runner.rotate(loops, k):
                            try:
                                got = measure_loop(opts, server, row, loop, rates, tmpdir)
                            except RuntimeError as exc:
                                print(f"  {loop} failed: {exc}", flush=True)
                                results[loop].append(None)
                                continue
                            results[loop].append(got)
                            for share, one in zip(shares, got, strict=True):
                                print(describe(loop, one, share), flush=True)
                    print(f"{server} {short}: medians of {opts.repeat} runs", flush=True)
                    print(summary(results, loops, shares), flush=True)
                    everything.append(
                        {"server": server, "row": short, "base": base, "results": results}
                    )
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(everything, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
