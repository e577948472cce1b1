"""Threads and loops: wake-ups from other threads, call_soon_threadsafe
ordering, a loop per thread, executors and concurrent futures. Every test
runs on stock asyncio and on zloopgo (the `loop` / `loop_factory` fixtures)."""

import asyncio
import concurrent.futures
import threading
import time

import pytest


def test_threadsafe_wakes_loop_blocked_on_long_timer(loop):
    # The loop sleeps in the poller until a 60 s timer is due; a callback
    # queued from another thread must wake it at once.
    fut = loop.create_future()
    far = loop.call_later(60, fut.set_result, "timer")
    started = threading.Event()

    def producer():
        started.wait(10)
        time.sleep(0.05)  # let the loop block in the poller
        loop.call_soon_threadsafe(fut.set_result, "thread")

    loop.call_soon(started.set)
    t = threading.Thread(target=producer)
    t.start()
    t0 = time.monotonic()
    try:
        assert loop.run_until_complete(fut) == "thread"
    finally:
        t.join(10)
        far.cancel()
    # a liveness bound (the timer is 60 s away), not a performance target
    assert time.monotonic() - t0 < 30


def test_threadsafe_wakes_loop_blocked_without_timers(loop):
    # No timer at all: the poller waits without a timeout.
    fut = loop.create_future()

    def producer():
        time.sleep(0.05)
        loop.call_soon_threadsafe(fut.set_result, 42)

    t = threading.Thread(target=producer)
    t.start()
    try:
        assert loop.run_until_complete(fut) == 42
    finally:
        t.join(10)


def test_threadsafe_many_producers_nothing_lost_fifo(loop):
    nthreads, per_thread = 4, 20_000
    total = nthreads * per_thread
    received = []
    done = loop.create_future()

    def sink(item):
        received.append(item)
        if len(received) == total:
            done.set_result(None)

    barrier = threading.Barrier(nthreads)

    def producer(tid):
        barrier.wait(10)
        for i in range(per_thread):
            loop.call_soon_threadsafe(sink, (tid, i))

    threads = [threading.Thread(target=producer, args=(tid,)) for tid in range(nthreads)]
    for t in threads:
        t.start()
    try:
        loop.run_until_complete(asyncio.wait_for(done, 60))
    finally:
        for t in threads:
            t.join(30)
    assert len(received) == total
    for tid in range(nthreads):
        mine = [i for (p, i) in received if p == tid]
        assert mine == list(range(per_thread)), f"producer {tid} out of order or lost"


def test_threadsafe_from_thread_returns_handle_cancellable(loop):
    ran = []
    result = {}

    def other():
        h = loop.call_soon_threadsafe(ran.append, "cancelled")
        h.cancel()
        result["cancelled"] = h.cancelled()
        loop.call_soon_threadsafe(ran.append, "kept")

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    loop.run_until_complete(asyncio.sleep(0))
    loop.run_until_complete(asyncio.sleep(0))
    assert result == {"cancelled": True}
    assert ran == ["kept"]


def test_threadsafe_on_closed_loop_raises(loop):
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        loop.call_soon_threadsafe(lambda: None)
    errors = []

    def other():
        try:
            loop.call_soon_threadsafe(lambda: None)
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert len(errors) == 1 and "closed" in str(errors[0])


def test_loop_per_thread(loop_factory):
    async def work(n):
        loop = asyncio.get_running_loop()
        acc = []
        for i in range(20):
            await asyncio.sleep(0.001)
            acc.append(i * n)
        fut = loop.create_future()
        loop.call_later(0.01, fut.set_result, sum(acc))
        return threading.get_ident(), loop, await fut

    def runner(n):
        lp = loop_factory()
        try:
            asyncio.set_event_loop(lp)
            ident, seen_loop, value = lp.run_until_complete(work(n))
        finally:
            asyncio.set_event_loop(None)
            lp.close()
        assert seen_loop is lp
        assert ident == threading.get_ident()
        return value

    barrier = threading.Barrier(3)

    def start(n):
        barrier.wait(10)  # the three loops run at the same time
        return runner(n)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futs = {n: pool.submit(start, n) for n in (1, 2, 3)}
        results = {n: f.result(30) for n, f in futs.items()}
    assert results == {n: n * sum(range(20)) for n in (1, 2, 3)}


def test_run_in_executor(loop):
    main_thread = threading.get_ident()

    def blocking(a, b):
        time.sleep(0.01)
        return a + b, threading.get_ident()

    async def main():
        lp = asyncio.get_running_loop()
        value, ident = await lp.run_in_executor(None, blocking, 2, 3)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = await asyncio.gather(
                *(lp.run_in_executor(pool, blocking, i, i) for i in range(8))
            )
        return value, ident, [r[0] for r in results]

    value, ident, doubled = loop.run_until_complete(main())
    loop.run_until_complete(loop.shutdown_default_executor())
    assert value == 5
    assert ident != main_thread
    assert doubled == [2 * i for i in range(8)]


def test_run_in_executor_exception(loop):
    def fail():
        raise ValueError("from the executor")

    async def main():
        return await asyncio.get_running_loop().run_in_executor(None, fail)

    with pytest.raises(ValueError, match="from the executor"):
        loop.run_until_complete(main())
    loop.run_until_complete(loop.shutdown_default_executor())


def test_to_thread(loop):
    import contextvars

    var = contextvars.ContextVar("var", default="unset")

    def in_thread(x):
        return x * 2, var.get(), threading.get_ident()

    async def main():
        var.set("copied")
        return await asyncio.to_thread(in_thread, 21)

    value, seen, ident = loop.run_until_complete(main())
    loop.run_until_complete(loop.shutdown_default_executor())
    assert value == 42
    assert seen == "copied"
    assert ident != threading.get_ident()


def test_wrap_future(loop):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        gate = threading.Event()

        def slow():
            gate.wait(10)
            return "done"

        cfut = pool.submit(slow)

        async def main():
            afut = asyncio.wrap_future(cfut)
            assert not afut.done()
            asyncio.get_running_loop().call_later(0.02, gate.set)
            return await afut

        assert loop.run_until_complete(main()) == "done"

        # an exception crosses over too
        def boom():
            raise KeyError("k")

        cfut2 = pool.submit(boom)
        with pytest.raises(KeyError):
            loop.run_until_complete(asyncio.wrap_future(cfut2, loop=loop))


def test_wrap_future_completed_by_plain_thread(loop):
    cfut = concurrent.futures.Future()

    def complete():
        time.sleep(0.05)
        cfut.set_result(7)

    async def main():
        afut = asyncio.wrap_future(cfut)
        t = threading.Thread(target=complete)
        t.start()
        try:
            return await afut
        finally:
            t.join(10)

    assert loop.run_until_complete(main()) == 7


def test_run_coroutine_threadsafe_into_running_loop(loop):
    async def add(a, b):
        await asyncio.sleep(0.001)
        return a + b

    results = []

    def other():
        futs = [asyncio.run_coroutine_threadsafe(add(i, i), loop) for i in range(50)]
        results.extend(f.result(10) for f in futs)

    async def main():
        t = threading.Thread(target=other)
        t.start()
        while t.is_alive():
            await asyncio.sleep(0.005)
        t.join()

    loop.run_until_complete(main())
    assert results == [2 * i for i in range(50)]
