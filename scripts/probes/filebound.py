"""The file workers' default bound (docs/files.md, "How many workers"):
filebench's `many` row (10,000 files of 4 KiB opened, read whole and
closed at once under asyncio.gather, zloopgo.open() on a zloopgo loop) run
with ZLOOPGO_FILE_WORKERS set to each bound, every sample in a fresh
interpreter, bounds rotated from round to round.

    cd scripts && python -m probes.filebound [--rounds 5] [--bounds 8,64,256,10000] [--cold]

With --cold, every file's pages are dropped from the page cache before
each sample (posix_fadvise DONTNEED on these files only), so the reads go
to the device and wait there on the workers: the case the bound is for.

Prints per bound the median [min-max] of files/s, of the child's peak RSS
(wait4's ru_maxrss) and of the workers it started (_engine.file_stats()).
It knows filebench's worker and data layout, nothing of the engine.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchmark.filebench import MARK, make_data
from benchmark.harness import SCRIPTS
from benchmark.samples import rotate

MANY = 10_000

CHILD = """
import sys
import benchmark.filebench as b
from zloopgo import _engine
b.worker("zloopgo", "many", sys.argv[1], int(sys.argv[2]))
print("STATS", _engine.file_stats()[0], flush=True)
"""


def drop_cached(data):
    small = os.path.join(data, "small")
    for name in os.listdir(small):
        fd = os.open(os.path.join(small, name), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def sample(data, bound, cold):
    if cold:
        drop_cached(data)
    env = {**os.environ, "ZLOOPGO_FILE_WORKERS": str(bound)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, data, str(MANY)],
        cwd=SCRIPTS,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"bound {bound}: exit {proc.returncode}")
    doc = json.loads(out.split(MARK, 1)[1].splitlines()[0])
    if not all(doc["checks"].values()):
        raise RuntimeError(f"bound {bound}: a check failed: {doc['checks']}")
    started = int(out.split("STATS ", 1)[1].split()[0])
    return doc["counter"] / doc["seconds"], usage.ru_maxrss / 1024, started


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--bounds", default="8,64,256,10000")
    p.add_argument(
        "--cold", action="store_true", help="the files' pages dropped before each sample"
    )
    a = p.parse_args(argv)
    bounds = [int(b) for b in a.bounds.split(",")]
    data = make_data(None, 1 << 20, MANY)
    got = {b: [] for b in bounds}
    try:
        sample(data, bounds[0], a.cold)  # warm-up: dentries and pages cached
        for r in range(a.rounds):
            for b in rotate(bounds, r):
                got[b].append(sample(data, b, a.cold))
    finally:
        shutil.rmtree(data)
    print(
        f"{a.rounds} rounds, {'cold' if a.cold else 'cached'} files, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print("| bound | files/s | peak RSS (MiB) | workers started |")
    print("| ---: | ---: | ---: | ---: |")
    for b in bounds:
        cells = []
        for i, fmt in ((0, "{:,.0f}"), (1, "{:.1f}"), (2, "{:.0f}")):
            xs = [s[i] for s in got[b]]
            cells.append(
                f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}–{fmt.format(max(xs))}]"
            )
        print(f"| {b} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    tempfile.tempdir = os.environ.get("ZL_BENCH_FILES_DIR") or None
    sys.exit(main(sys.argv[1:]))
