"""Peak RSS with 10,000 reads of 4 KiB in flight at once (issue 25).

One process per measurement: `python -m probes.filerss KIND`, KIND one of
  worker    zloopgo.open() on a zloopgo loop, every read sent to a file worker
  inline    the same, reads of cached pages completing at once (RWF_NOWAIT)
  executor  loop.run_in_executor(None, os.pread, ...) on asyncio's loop,
            what aiofiles does for each call
Prints the peak RSS before and after the 10,000 reads and the growth per
read in flight (ru_maxrss). It does not know about timings: the file rows
are filebench.py's.
"""

import asyncio
import os
import resource
import sys
import tempfile

import zloopgo
from zloopgo import _engine

READS = 10_000
SIZE = 4096
KINDS = ("worker", "inline", "executor")


def _peak_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def _measure(kind, path):
    if kind == "executor":
        fd = os.open(path, os.O_RDONLY)
        loop = asyncio.get_running_loop()

        async def one(i):
            return await loop.run_in_executor(None, os.pread, fd, SIZE, SIZE * (i % 10))

    else:
        f = await zloopgo.open(path, "rb")
        if kind == "worker":
            f._inline = False  # no RWF_NOWAIT attempt: every read waits on a worker

        async def one(i):
            return await f.pread(SIZE, SIZE * (i % 10))

    await one(0)  # the first read starts a worker / the executor's thread
    before = _peak_kib()
    got = await asyncio.gather(*[one(i) for i in range(READS)])
    after = _peak_kib()
    if not all(len(g) == SIZE for g in got):
        raise SystemExit("a read came back short")
    return before, after


def main(argv):
    kind = argv[0] if argv else "worker"
    if kind not in KINDS:
        raise SystemExit(f"usage: python -m probes.filerss {{{','.join(KINDS)}}}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f")
        with open(path, "wb") as out:
            out.write(os.urandom(SIZE * 10))
        run = asyncio.run if kind == "executor" else zloopgo.run
        before, after = run(_measure(kind, path))
    per_read = (after - before) * 1024 / READS / 1024
    print(
        f"{kind}: peak RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB, "
        f"+{per_read:.2f} KiB per read in flight; file workers started {_engine.file_stats()[0]}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
