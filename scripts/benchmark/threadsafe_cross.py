"""Wall time of call_soon_threadsafe across threads: a producer thread
queues N callbacks onto a loop running in the main thread, which runs them;
the time is from the producer's start to the last callback run.

    python -m benchmark.threadsafe_cross [--loops zloopgo,rloop,uvloop] [--runs 7] [--n 100000]

Each run is a fresh interpreter; the loops' order rotates from run to run.
It prints, per loop, the median, min and max nanoseconds per callback and
the coefficient of variation, and each loop's median as a ratio of the
first loop's. Wall time on a shared machine is noisy: read it beside the
callgrind counts of benchmark.instructions. It knows the loops by the name
of their factory; nothing of their code.
"""

import argparse
import statistics
import subprocess
import sys

from .instructions import FACTORIES

CHILD = """
import asyncio, threading, time
loop = {factory}()
n = {n}
left = [n]
done = threading.Event()

def cb():
    left[0] -= 1
    if not left[0]:
        loop.stop()

def producer():
    for _ in range(n):
        loop.call_soon_threadsafe(cb)

def start():
    global t0
    t0 = time.perf_counter_ns()
    threading.Thread(target=producer).start()

loop.call_soon(start)
loop.run_forever()
print((time.perf_counter_ns() - t0) / n)
loop.close()
"""


def run_once(loop, n):
    code = CHILD.format(factory=FACTORIES[loop], n=n)
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return float(out.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loops", default="zloopgo,rloop,uvloop")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--n", type=int, default=100000)
    args = ap.parse_args()
    loops = args.loops.split(",")
    samples = {loop: [] for loop in loops}
    for r in range(args.runs):
        for i in range(len(loops)):
            loop = loops[(r + i) % len(loops)]
            samples[loop].append(run_once(loop, args.n))
    first = statistics.median(samples[loops[0]])
    print(f"{'loop':10} {'median ns':>10} {'min':>8} {'max':>8} {'CoV':>6} {'ratio':>6}")
    for loop in loops:
        s = samples[loop]
        med = statistics.median(s)
        cov = statistics.pstdev(s) / statistics.mean(s)
        print(f"{loop:10} {med:10.0f} {min(s):8.0f} {max(s):8.0f} {cov:6.1%} {med / first:6.2f}")


if __name__ == "__main__":
    main()
