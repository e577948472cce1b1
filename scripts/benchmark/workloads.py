"""The workloads. Each runs in a fresh worker process, on one loop, and
returns (seconds, counter, checks, extra): the time of the measured part
only, a counter that must equal the workload's expected value, boolean
checks that must all hold, and extra figures (e.g. RSS).

Every contender runs the same Python code; only the loop differs.
"""

import asyncio
import collections
import itertools
import operator
import resource
import sys
import threading
import time

_count = 0


def _cb():
    global _count
    _count += 1


def _cb2(a, b):
    global _count
    _count += a - b  # a=2, b=1: proves both arguments arrived, in order


def _batched_call_soon(loop, n, batch, args):
    """A driver callback schedules `batch` callbacks, then itself, until n
    callbacks have been scheduled; the loop runs them all."""
    global _count
    _count = 0
    left = n
    call_soon = loop.call_soon

    def driver():
        nonlocal left
        k = min(batch, left)
        left -= k
        if args:
            for _ in range(k):
                call_soon(_cb2, 2, 1)
        else:
            for _ in range(k):
                call_soon(_cb)
        if left:
            call_soon(driver)
        else:
            call_soon(loop.stop)

    loop.call_soon(driver)
    t0 = time.perf_counter()
    loop.run_forever()
    dt = time.perf_counter() - t0
    return dt, _count, {}, {}


def call_soon(loop, n):
    return _batched_call_soon(loop, n, 10_000, False)


def call_soon_args(loop, n):
    return _batched_call_soon(loop, n, 10_000, True)


def call_later_cancel(loop, n):
    """n x (call_later(10, cb); cancel()), then one more loop iteration.
    Every 1000th handle is kept and checked afterwards; cb must never run."""
    fired = 0

    def cb():
        nonlocal fired
        fired += 1

    done = 0
    kept = []
    chunk = 1000

    def driver():
        nonlocal done
        call_later = loop.call_later
        for _ in range(n // chunk):
            for _ in range(chunk - 1):
                h = call_later(10, cb)
                h.cancel()
            h = call_later(10, cb)
            h.cancel()
            kept.append(h)
            done += chunk
        for _ in range(n % chunk):
            call_later(10, cb).cancel()
            done += 1
        loop.call_soon(loop.stop)  # the one iteration after the cancels

    loop.call_soon(driver)
    t0 = time.perf_counter()
    loop.run_forever()
    dt = time.perf_counter() - t0
    checks = {
        "callback_never_ran": fired == 0,
        "sampled_handles_cancelled": all(h.cancelled() for h in kept),
    }
    return dt, done, checks, {"sampled_handles": len(kept)}


def sleep0(loop, n):
    """One task awaiting asyncio.sleep(0) n times (n loop iterations)."""

    async def main():
        done = 0
        for _ in range(n):
            await asyncio.sleep(0)
            done += 1
        return done

    coro = main()
    t0 = time.perf_counter()
    done = loop.run_until_complete(coro)
    dt = time.perf_counter() - t0
    return dt, done, {}, {}


def tasks(loop, n, batch=5000):
    """n tasks, each awaiting sleep(0) once, created and gathered in batches."""
    global _count
    _count = 0

    async def child():
        global _count
        await asyncio.sleep(0)
        _count += 1

    async def main():
        create_task = loop.create_task
        left = n
        while left:
            k = min(batch, left)
            left -= k
            await asyncio.gather(*[create_task(child()) for _ in range(k)])

    coro = main()
    t0 = time.perf_counter()
    loop.run_until_complete(coro)
    dt = time.perf_counter() - t0
    return dt, _count, {}, {}


def threadsafe(loop, n):
    """One producer thread calls call_soon_threadsafe(cb) n times; the loop
    runs the callbacks and stops when it has counted n."""
    count = 0

    def cb():
        nonlocal count
        count += 1
        if count == n:
            loop.stop()

    def producer():
        cst = loop.call_soon_threadsafe
        for _ in range(n):
            cst(cb)

    thread = threading.Thread(target=producer, daemon=True)
    loop.call_soon(thread.start)
    t0 = time.perf_counter()
    loop.run_forever()
    dt = time.perf_counter() - t0
    thread.join(10)
    return dt, count, {"producer_finished": not thread.is_alive()}, {}


def _maxrss_bytes():
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def rss(loop, n):
    """n call_soon callbacks scheduled at once (from one callback), then
    run. The figure is the growth of peak RSS (ru_maxrss) over the
    baseline taken after the loop was created and ran one iteration."""
    global _count
    _count = 0
    loop.call_soon(loop.stop)
    loop.run_forever()  # the loop's lazy set-up happens before the baseline
    before = _maxrss_bytes()

    def driver():
        call_soon = loop.call_soon
        for _ in range(n):
            call_soon(_cb)
        call_soon(loop.stop)

    loop.call_soon(driver)
    t0 = time.perf_counter()
    loop.run_forever()
    dt = time.perf_counter() - t0
    after = _maxrss_bytes()
    delta_mib = (after - before) / (1 << 20)
    return dt, _count, {}, {"rss_delta_mib": delta_mib, "rss_before_mib": before / (1 << 20)}


def _empty():
    pass


def floor(loop, n):
    """The physical floor: a C loop (itertools.starmap drained by a
    zero-length deque) calling an empty Python function with no arguments.
    No event loop is involved. The counter is the number of items the C
    loop consumed from the repeat iterator (one call each)."""
    rep = itertools.repeat((), n)
    t0 = time.perf_counter()
    collections.deque(itertools.starmap(_empty, rep), 0)
    dt = time.perf_counter() - t0
    return dt, n - operator.length_hint(rep), {}, {}


class Workload:
    def __init__(self, name, func, size, title, metric="ns", needs_loop=True):
        self.name = name
        self.func = func
        self.size = size
        self.title = title
        self.metric = metric  # "ns": ns per operation; "rss": MiB of peak RSS growth
        self.needs_loop = needs_loop

    def expected(self, size):
        return size


WORKLOADS = {
    w.name: w
    for w in [
        Workload("call_soon", call_soon, 500_000, "call_soon, no args (batches of 10k)"),
        Workload("call_soon_args", call_soon_args, 500_000, "call_soon, 2 args (batches of 10k)"),
        Workload(
            "call_later_cancel", call_later_cancel, 200_000, "call_later(10) + cancel, then 1 iter"
        ),
        Workload("sleep0", sleep0, 200_000, "1 task, sleep(0) x N (loop iterations)"),
        Workload("tasks", tasks, 200_000, "N tasks awaiting sleep(0), batches of 5000"),
        Workload("threadsafe", threadsafe, 200_000, "call_soon_threadsafe from 1 thread"),
        Workload("rss", rss, 1_000_000, "peak RSS growth, N call_soon at once", metric="rss"),
    ]
}

FLOOR = Workload(
    "floor", floor, 2_000_000, "C loop calling an empty Python function", needs_loop=False
)
