"""System calls per operation, counted by the kernel's tracepoints (perf
stat), which, unlike strace, do not slow the process and so do not inflate
the calls the Go runtime makes on its own clock (sysmon's sleeps, its
futex hand-offs).

    python -m benchmark.syscalls [--loops zloopgo,uvloop] [--workload seed_tcp] [--size 20000]

Each loop runs the workload in a fresh interpreter (benchmark.worker), once
with SIZE operations and once with none, pinned to one core (taskset -c 1)
and to two (taskset -c 0,1); the difference divided by SIZE is the count
per operation, without start-up. Printed per 1,000 operations: every
system call, those of the loop's own I/O (waits, sends, receives), and
those no readiness-based loop makes per operation (futex, the sleeps,
signals, yields): the Go runtime's, for zloopgo. Needs perf with the
syscalls tracepoints (root, or kernel.perf_event_paranoid <= -1). It knows
the loops only by the worker's names.
"""

import argparse
import os
import shutil
import subprocess
import sys

from .harness import pin_prefix

WAITS = ("epoll_wait", "epoll_pwait", "epoll_pwait2", "io_uring_enter")
IO = WAITS + ("sendto", "recvfrom", "sendmsg", "recvmsg", "recvmmsg", "read", "readv", "write")
RUNTIME = ("futex", "nanosleep", "clock_nanosleep", "tgkill", "sched_yield", "rt_sigreturn")
EVENTS = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{n}" for n in IO + RUNTIME]
PINS = {"one core": "1", "two cores": "0,1"}


def counts(loop, workload, size, pin, timeout):
    """{event: count} for one worker run, or None with why."""
    cmd = [*pin_prefix(pin), "perf", "stat", "-x,", "-o", "/dev/stderr", "-e", ",".join(EVENTS)]
    cmd += [sys.executable, "-m", "benchmark.worker", loop, workload, str(size)]
    env = dict(os.environ, ZL_BENCH_GC="off")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if "BENCH-RESULT" not in proc.stdout:
        return None, (proc.stderr.strip().splitlines() or ["no result"])[-1]
    got = {}
    for line in proc.stderr.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2] in EVENTS:
            got[parts[2]] = int(parts[0]) if parts[0].isdigit() else None
    if not got or any(v is None for v in got.values()):
        return None, "perf counted nothing (are the syscalls tracepoints readable?)"
    return got, ""


def per_1000(loop, workload, size, pin, timeout):
    full, why = counts(loop, workload, size, pin, timeout)
    if full is None:
        return None, why
    empty, why = counts(loop, workload, 0, pin, timeout)
    if empty is None:
        return None, why
    return {e: (full[e] - empty[e]) * 1000 / size for e in EVENTS}, ""


def name(event):
    return event.rsplit("_enter_", 1)[-1] if "_enter_" in event else "all"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmark.syscalls", description=__doc__)
    p.add_argument("--loops", default="zloopgo,uvloop,zuvloop,rsloop,rloop,zloop,blazio,asyncio")
    p.add_argument("--workload", default="seed_tcp")
    p.add_argument("--size", type=int, default=20000)
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args(argv)
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed")
    print(
        f"System calls per 1,000 operations of {args.workload} "
        f"(N={args.size:,}, minus a run of 0; GC off)"
    )
    print()
    print(
        "| loop | pinned | all | loop's I/O | of which waits "
        "| runtime-style (futex, sleeps, signals, yields) | non-zero of those |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for loop in [x for x in args.loops.split(",") if x]:
        for where, pin in PINS.items():
            got, why = per_1000(loop, args.workload, args.size, pin, args.timeout)
            if got is None:
                print(f"| {loop} | {where} | — | — | — | — | {why} |")
                continue
            io = sum(got[f"syscalls:sys_enter_{n}"] for n in IO)
            waits = sum(got[f"syscalls:sys_enter_{n}"] for n in WAITS)
            rt = {n: got[f"syscalls:sys_enter_{n}"] for n in RUNTIME}
            shown = ", ".join(f"{n} {v:.1f}" for n, v in rt.items() if abs(v) >= 0.05) or "none"
            total = got["raw_syscalls:sys_enter"]
            print(
                f"| {loop} | {where} | {total:,.1f} | {io:,.1f} | {waits:,.1f} "
                f"| {sum(rt.values()):,.1f} | {shown} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
