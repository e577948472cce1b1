"""Where the time of an operation goes, by sampling: the interpreter, the
_asyncio module, zloopgo's C adapter, its Go engine and runtime, a rival's
compiled code, libc and the kernel, in nanoseconds per operation.

    python -m probes.timesplit [--loops zloopgo,rsloop] [--workloads seed_tasks]
        [--size N] [--rounds 3] [--pins 1,0-1] [--top 8]

probes.instructions counts user-space instructions; this measures time,
the kernel's included. `perf record -e cpu-clock` samples every thread of
one worker process (benchmark.worker, a fresh interpreter per sample, GC
off as seed 000 runs it) and only while the workload's measured part runs:
the worker enables and disables perf's events through `--control`
fifos (ZL_BENCH_PERF_CTL, read by workloads._perf_control). Each sample is
put in one column by the object perf names for it and, in zloopgo's
extension, which holds both the C adapter and the Go code, by the
symbol's form (Go's are package-qualified). The figure per column is
samples x the sampling period / operations: CPU time, so on two cores the
columns can add up to more than the wall time per operation, which is
printed beside them. Samples are rotated across loops; the median of the
rounds is shown, per column. This VM's perf has no hardware counters
(cycles are "not supported"), hence cpu-clock. --top lists each loop's
busiest kernel symbols. Needs perf (root, or kernel.perf_event_paranoid <=
-1). It knows the loops only by the worker's names and their modules'
file names.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from benchmark.harness import pin_prefix
from benchmark.samples import rotate

COLUMNS = ("interpreter", "_asyncio", "adapter (C)", "Go", "loop's own", "libc", "kernel", "other")
FREQ = 10000  # samples per second of CPU time
# A rival's compiled module, by its file name's start (their import names).
RIVAL_MODULES = ("_zuvloop", "loop.", "_loop.", "rloop", "_rloop", "blazio", "_blazio", "zloop")
# How Go names functions: package path, a dot, the name; cgo's glue has C names.
GO_SYMBOL = re.compile(r"^(?:[a-z0-9_]+(?:\.[a-z0-9_-]+)*/)*[a-z][a-z0-9_]*\.[A-Za-z_(*]")
C_SUFFIX = re.compile(r"\.(?:part|isra|constprop|cold|lto_priv)(?:\.\d+)?")
CGO_GLUE = ("crosscall2", "_cgo_", "x_cgo_", "_cgoexp_")


def column(dso, symbol):
    """The column of one sample: dso is the object perf names (a path or
    [kernel.kallsyms]), symbol its function (an address when unknown)."""
    name = os.path.basename(dso)
    if dso.startswith("[kernel"):
        return "kernel"
    if name.startswith("python3") or name.startswith("libpython3"):
        return "interpreter"
    if name.startswith("_asyncio."):
        return "_asyncio"
    if name.startswith("_engine.cpython"):
        sym = C_SUFFIX.sub("", symbol)
        if sym.startswith(CGO_GLUE) or GO_SYMBOL.match(sym):
            return "Go"
        return "adapter (C)"
    if name.startswith(RIVAL_MODULES):
        return "loop's own"
    if name.startswith(("libc.so", "libc-", "ld-linux", "libm.so", "[vdso]")):
        return "libc"
    return "other"


def _samples(report):
    """(samples, dso, symbol) rows of `perf report -n -F sample,dso,sym`."""
    for line in report.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        count, dso, rest = int(parts[0]), parts[1], parts[2]
        symbol = rest.split("]", 1)[-1].strip() if rest.startswith("[") else rest.strip()
        yield count, dso, symbol


def sample(loop, workload, size, pin, timeout=300):
    """One worker run under perf: ({column: samples}, {kernel symbol:
    samples}, the worker's seconds), or None with why."""
    with tempfile.TemporaryDirectory() as tmp:
        ctl, ack, data = (os.path.join(tmp, n) for n in ("ctl", "ack", "perf.data"))
        os.mkfifo(ctl)
        os.mkfifo(ack)
        cmd = [*pin_prefix(pin), "perf", "record", "-q", "-e", "cpu-clock", "-F", str(FREQ)]
        cmd += ["-D", "-1", "--control", f"fifo:{ctl},{ack}", "-o", data, "--"]
        cmd += [sys.executable, "-m", "benchmark.worker", loop, workload, str(size)]
        env = dict(os.environ, ZL_BENCH_GC="off", ZL_BENCH_PERF_CTL=f"{ctl},{ack}")
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return None, "timed out"
        seconds = None
        for line in run.stdout.splitlines():
            if line.startswith("BENCH-RESULT "):
                result = json.loads(line[len("BENCH-RESULT ") :])
                seconds = result.get("seconds") if result.get("ok", True) else None
        if run.returncode != 0 or seconds is None:
            return None, (run.stderr.strip().splitlines() or ["no result"])[-1]
        report = subprocess.run(
            ["perf", "report", "-i", data, "-n", "--no-children", "--stdio"]
            + ["--sort", "dso,sym", "-F", "sample,dso,sym"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    by_column = dict.fromkeys(COLUMNS, 0)
    kernel = {}
    for count, dso, symbol in _samples(report):
        col = column(dso, symbol)
        by_column[col] += count
        if col == "kernel":
            kernel[symbol] = kernel.get(symbol, 0) + count
    return (by_column, kernel, seconds), None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loops", default="zloopgo,rsloop,zuvloop,uvloop")
    p.add_argument("--workloads", default="seed_callbacks,seed_tasks,seed_tcp")
    p.add_argument("--size", type=int, help="operations (default: the workload's seed size)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--pins", default="1,0-1", help="taskset CPU lists, comma-separated")
    p.add_argument("--top", type=int, default=0, help="busiest kernel symbols per loop")
    args = p.parse_args(argv)
    sizes = {"seed_callbacks": 1_000_000, "seed_tasks": 200_000, "seed_tcp": 20_000}
    loops = args.loops.split(",")
    ns = 1e9 / FREQ
    for workload in args.workloads.split(","):
        size = args.size or sizes.get(workload, 10_000)
        for pin in args.pins.split(","):
            taken = {loop: [] for loop in loops}
            for r in range(args.rounds):
                for loop in rotate(loops, r):
                    got, why = sample(loop, workload, size, pin)
                    if got is None:
                        print(f"{workload} {loop} pin {pin}: failed: {why}", file=sys.stderr)
                    else:
                        taken[loop].append(got)
            print(f"\n{workload}, {size:,} operations, CPUs {pin}: ns per operation")
            print("| loop | wall | CPU | " + " | ".join(COLUMNS) + " |")
            print("| --- |" + " ---: |" * (len(COLUMNS) + 2))
            for loop in loops:
                got = taken[loop]
                if not got:
                    print(f"| {loop} | failed |" + " |" * (len(COLUMNS) + 1))
                    continue
                wall = statistics.median(s for _, _, s in got) * 1e9 / size
                cpu = statistics.median(sum(c.values()) for c, _, _ in got) * ns / size
                cells = [statistics.median(c[k] for c, _, _ in got) * ns / size for k in COLUMNS]
                print(
                    f"| {loop} | {wall:,.0f} | {cpu:,.0f} | "
                    + " | ".join(f"{v:,.0f}" if v >= 1 or v == 0 else f"{v:.1f}" for v in cells)
                    + f" |  ({len(got)} runs)"
                )
            for loop in loops if args.top else ():
                total = {}
                for _, kernel, _ in taken[loop]:
                    for sym, n in kernel.items():
                        total[sym] = total.get(sym, 0) + n
                busiest = sorted(total.items(), key=lambda kv: -kv[1])[: args.top]
                rounds = max(len(taken[loop]), 1)
                print(
                    f"  {loop} kernel: "
                    + ", ".join(f"{s} {n * ns / size / rounds:.1f}" for s, n in busiest)
                )


if __name__ == "__main__":
    main()
