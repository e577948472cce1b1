"""System calls per operation, counted by the kernel's tracepoints (perf
stat), which, unlike strace, do not slow the process and so do not inflate
the calls the Go runtime makes on its own clock (sysmon's sleeps, its
futex hand-offs).

    python -m probes.syscalls [--loops zloopgo,uvloop] [--workload seed_tcp] [--size 20000]
    python -m probes.syscalls --go-runtime --workload seed_tasks --size 200000

Each loop runs the workload in a fresh interpreter (benchmark.worker), once
with SIZE operations and once with none, pinned to one core (taskset -c 1)
and to two (taskset -c 0,1); the difference divided by SIZE is the count
per operation, without start-up. Printed per 1,000 operations: every
system call, those of the loop's own I/O (waits, sends, receives), and
those no readiness-based loop makes per operation (futex, the sleeps,
signals, yields): the Go runtime's, for zloopgo; and the process's context
switches. With --go-runtime, zloopgo's rows also count calls of the Go
scheduler's functions in zloopgo's extension (uprobes, removed at the
end): runtime.preemptone (sysmon finding the loop's goroutine not
rescheduled for 10 ms), runtime.handoffp (a P handed to another thread:
taken by sysmon, or the loop's yield), runtime.stoplockedm (the locked
goroutine giving its thread's P up: the engine's yields) and runtime.startm
(a thread woken or started). Needs perf with the syscalls tracepoints
(root, or kernel.perf_event_paranoid <= -1), and root for the uprobes. It
knows the loops only by the worker's names. With --free-threaded (on a
free-threaded build) each loop runs with the PYTHON_GIL of seed 000's
free-threaded table (benchmark.harness.FT_GIL: 0, but zloopgo as its
engine leaves it, the GIL on, and asyncio-gil, asyncio with the GIL on).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from benchmark.harness import gil_env, pin_prefix

WAITS = ("epoll_wait", "epoll_pwait", "epoll_pwait2", "io_uring_enter")
IO = WAITS + (
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "recvmmsg",
    "read",
    "readv",
    "write",
    "writev",
)
RUNTIME = ("futex", "nanosleep", "clock_nanosleep", "tgkill", "sched_yield", "rt_sigreturn")
SWITCHES = "context-switches"
EVENTS = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{n}" for n in IO + RUNTIME] + [SWITCHES]
PINS = {"one core": "1", "two cores": "0,1"}

# --go-runtime: the Go scheduler's functions counted in zloopgo's extension
GO_GROUP = "zlgo_runtime"
GO_FUNCS = ("preemptone", "handoffp", "stoplockedm", "startm")
GO_EVENTS = [f"{GO_GROUP}:{f}" for f in GO_FUNCS]


def parse_stat(text, events):
    """{event: count} from `perf stat -x,` output, for the events asked;
    None for an event perf could not count ("<not counted>",
    "<not supported>")."""
    got = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2] in events:
            got[parts[2]] = int(parts[0]) if parts[0].isdigit() else None
    return got


def counts(loop, workload, size, pin, timeout, events, free_threaded=False):
    """{event: count} for one worker run, or None with why (the worker's
    last line of stderr when it gave no result: perf writes to a file of
    its own, so that line is the worker's)."""
    with tempfile.NamedTemporaryFile("r", suffix=".perf") as stat:
        cmd = [*pin_prefix(pin), "perf", "stat", "-x,", "-o", stat.name, "-e", ",".join(events)]
        cmd += [sys.executable, "-m", "benchmark.worker", loop, workload, str(size)]
        env = dict(os.environ, ZL_BENCH_GC="off", **gil_env(loop, free_threaded))
        env = {k: v for k, v in env.items() if v is not None}  # None: removed
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return None, "timed out"
        if "BENCH-RESULT" not in proc.stdout:
            return None, (proc.stderr.strip().splitlines() or ["no result"])[-1]
        got = parse_stat(stat.read(), events)
    if set(got) != set(events) or any(v is None for v in got.values()):
        return None, "perf counted nothing (are the syscalls tracepoints readable?)"
    return got, ""


def per_1000(loop, workload, size, pin, timeout, events, free_threaded=False):
    full, why = counts(loop, workload, size, pin, timeout, events, free_threaded)
    if full is None:
        return None, why
    empty, why = counts(loop, workload, 0, pin, timeout, events, free_threaded)
    if empty is None:
        return None, why
    return {e: (full[e] - empty[e]) * 1000 / size for e in events}, ""


def row_events(loop, go_runtime):
    """The events a loop's rows count: the Go scheduler's only where its
    uprobes are, in zloopgo's extension."""
    return EVENTS + (GO_EVENTS if go_runtime and loop == "zloopgo" else [])


def remove_go_probes():
    subprocess.run(["perf", "probe", "-q", "-d", f"{GO_GROUP}:*"], capture_output=True)


def add_go_probes():
    """Puts uprobes on GO_FUNCS in the zloopgo extension this interpreter
    imports; exits with why when it cannot."""
    found = subprocess.run(
        [sys.executable, "-c", "import zloopgo._engine as e; print(e.__file__)"],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        raise SystemExit("--go-runtime: zloopgo is not importable here")
    so = found.stdout.strip()
    remove_go_probes()
    for f in GO_FUNCS:
        added = subprocess.run(
            ["perf", "probe", "-q", "-x", so, "--add", f"{GO_GROUP}:{f}=runtime.{f}"],
            capture_output=True,
            text=True,
        )
        if added.returncode != 0:
            remove_go_probes()
            raise SystemExit(f"--go-runtime: perf probe runtime.{f}: {added.stderr.strip()}")


def name(event):
    return event.rsplit("_enter_", 1)[-1] if "_enter_" in event else "all"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m probes.syscalls", description=__doc__)
    p.add_argument("--loops", default="zloopgo,uvloop,zuvloop,rsloop,rloop,zloop,blazio,asyncio")
    p.add_argument("--workload", default="seed_tcp")
    p.add_argument("--size", type=int, default=20000)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument(
        "--go-runtime",
        action="store_true",
        help="also count the Go scheduler's functions in zloopgo's rows (uprobes; root)",
    )
    p.add_argument(
        "--free-threaded",
        action="store_true",
        help="each loop with its PYTHON_GIL of the free-threaded table (benchmark.harness)",
    )
    args = p.parse_args(argv)
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed")
    if args.go_runtime:
        add_go_probes()
    try:
        table(args)
    finally:
        if args.go_runtime:
            remove_go_probes()


def table(args):
    print(
        f"System calls per 1,000 operations of {args.workload} "
        f"(N={args.size:,}, minus a run of 0; GC off)"
    )
    print()
    go = " | Go scheduler (zloopgo)" if args.go_runtime else ""
    print(
        "| loop | pinned | all | loop's I/O | of which waits "
        f"| runtime-style (futex, sleeps, signals, yields) | non-zero of those "
        f"| context switches{go} |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |" + (" --- |" if go else ""))
    for loop in [x for x in args.loops.split(",") if x]:
        events = row_events(loop, args.go_runtime)
        for where, pin in PINS.items():
            got, why = per_1000(
                loop, args.workload, args.size, pin, args.timeout, events, args.free_threaded
            )
            if got is None:
                missing = " — |" if go else ""
                print(f"| {loop} | {where} | — | — | — | — | {why} | — |{missing}")
                continue
            io = sum(got[f"syscalls:sys_enter_{n}"] for n in IO)
            waits = sum(got[f"syscalls:sys_enter_{n}"] for n in WAITS)
            rt = {n: got[f"syscalls:sys_enter_{n}"] for n in RUNTIME}
            shown = ", ".join(f"{n} {v:.1f}" for n, v in rt.items() if abs(v) >= 0.05) or "none"
            total = got["raw_syscalls:sys_enter"]
            extra = ""
            if go:
                sched = [f"{e.split(':')[1]} {got[e]:.2f}" for e in GO_EVENTS if e in got]
                extra = f" {', '.join(sched) or '—'} |"
            print(
                f"| {loop} | {where} | {total:,.1f} | {io:,.1f} | {waits:,.1f} "
                f"| {sum(rt.values()):,.1f} | {shown} | {got[SWITCHES]:,.1f} |{extra}",
                flush=True,
            )


if __name__ == "__main__":
    main()
