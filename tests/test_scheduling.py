"""call_soon / call_soon_threadsafe / stop / run_until_complete, dual-run:
each test runs on stock asyncio and on zloopgo and asserts asyncio's
behaviour (see BaseEventLoop in asyncio/base_events.py)."""

import asyncio
import contextvars
import threading
import time

import pytest
from helpers import run_once

VAR = contextvars.ContextVar("VAR", default="unset")


# ---- call_soon ------------------------------------------------------------


def test_call_soon_runs_callbacks_in_fifo_order(loop):
    out = []
    for i in range(300):  # more than the initial ready-queue capacity
        loop.call_soon(out.append, i)
    run_once(loop)
    assert out == list(range(300))


@pytest.mark.parametrize("nargs", [0, 1, 3, 4, 5])
def test_call_soon_passes_positional_args(loop, nargs):
    args = tuple(object() for _ in range(nargs))
    got = []
    loop.call_soon(lambda *a: got.append(a), *args)
    run_once(loop)
    assert len(got) == 1
    assert len(got[0]) == nargs
    assert all(a is b for a, b in zip(got[0], args, strict=True))


def test_call_soon_return_value_is_ignored(loop):
    out = []
    h = loop.call_soon(lambda: out.append(1) or 42)
    assert not h.cancelled()
    run_once(loop)
    assert out == [1]
    assert not h.cancelled()


def test_callbacks_scheduled_during_iteration_run_next_iteration(loop):
    out = []

    def a():
        out.append("a")
        loop.call_soon(out.append, "c")

    loop.call_soon(a)
    loop.call_soon(out.append, "b")
    run_once(loop)
    assert out == ["a", "b"]
    run_once(loop)
    assert out == ["a", "b", "c"]


def test_chain_advances_one_link_per_iteration(loop):
    steps = []

    def step(i):
        steps.append(i)
        if i < 5:
            loop.call_soon(step, i + 1)

    loop.call_soon(step, 0)
    for n in range(1, 7):
        run_once(loop)
        assert steps == list(range(n))
    run_once(loop)
    assert steps == list(range(6))


def test_call_soon_from_callbacks_interleaves_in_fifo_order(loop):
    out = []

    def spawn(name, depth):
        out.append(name)
        if depth:
            loop.call_soon(spawn, name + "a", depth - 1)
            loop.call_soon(spawn, name + "b", depth - 1)

    loop.call_soon(spawn, "x", 2)
    loop.call_soon(spawn, "y", 1)
    for _ in range(3):
        run_once(loop)
    assert out == ["x", "y", "xa", "xb", "ya", "yb", "xaa", "xab", "xba", "xbb"]


def test_callbacks_scheduled_mid_batch_grow_the_queue_in_order(loop):
    # 200 callbacks each schedule 5 more while the batch is being consumed
    out = []

    def parent(i):
        out.append(("p", i))
        for j in range(5):
            loop.call_soon(out.append, ("c", i, j))

    for i in range(200):
        loop.call_soon(parent, i)
    run_once(loop)
    assert out == [("p", i) for i in range(200)]
    run_once(loop)
    assert out[200:] == [("c", i, j) for i in range(200) for j in range(5)]


# ---- contexts -------------------------------------------------------------


def test_callback_sees_context_captured_at_scheduling(loop):
    seen = []
    token = VAR.set("scheduled")
    try:
        loop.call_soon(lambda: seen.append(VAR.get()))
        loop.call_later(0, lambda: seen.append(VAR.get()))
    finally:
        VAR.reset(token)
    assert VAR.get() == "unset"
    loop.run_until_complete(asyncio.sleep(0.01))
    assert seen == ["scheduled", "scheduled"]


def test_context_changes_in_callback_do_not_leak(loop):
    seen = []

    def setter():
        VAR.set("changed")
        seen.append(VAR.get())

    loop.call_soon(setter)
    loop.call_soon(lambda: seen.append(VAR.get()))
    run_once(loop)
    assert seen == ["changed", "unset"]
    assert VAR.get() == "unset"


def test_explicit_context_is_used_and_mutated(loop):
    ctx = contextvars.copy_context()
    ctx.run(VAR.set, "in-ctx")
    seen = []

    def setter():
        seen.append(VAR.get())
        VAR.set("set-by-callback")

    loop.call_soon(setter, context=ctx)
    loop.call_soon(lambda: seen.append(VAR.get()), context=ctx)
    loop.call_soon(lambda: seen.append(VAR.get()))
    run_once(loop)
    assert seen == ["in-ctx", "set-by-callback", "unset"]
    assert ctx[VAR] == "set-by-callback"
    assert VAR.get() == "unset"


@pytest.mark.parametrize("method", ["call_later", "call_at"])
def test_timer_explicit_context(loop, method):
    ctx = contextvars.Context()
    ctx.run(VAR.set, "timer-ctx")
    seen = []

    def cb():
        seen.append(VAR.get())

    if method == "call_later":
        loop.call_later(0, cb, context=ctx)
    else:
        loop.call_at(loop.time(), cb, context=ctx)
    loop.run_until_complete(asyncio.sleep(0.01))
    assert seen == ["timer-ctx"]


def test_context_none_means_copy_of_current(loop):
    seen = []
    token = VAR.set("current")
    try:
        loop.call_soon(lambda: seen.append(VAR.get()), context=None)
    finally:
        VAR.reset(token)
    run_once(loop)
    assert seen == ["current"]


def test_call_soon_threadsafe_context(loop):
    ctx = contextvars.Context()
    ctx.run(VAR.set, "ts")
    seen = []
    loop.call_soon_threadsafe(lambda: seen.append(VAR.get()), context=ctx)
    run_once(loop)
    assert seen == ["ts"]


# ---- call_soon_threadsafe -------------------------------------------------


@pytest.mark.timeout(10)
def test_call_soon_threadsafe_wakes_a_blocked_loop(loop):
    got = []
    started = threading.Event()

    def worker():
        started.wait()
        time.sleep(0.02)
        loop.call_soon_threadsafe(lambda: got.append(threading.get_ident()))
        loop.call_soon_threadsafe(loop.stop)

    t = threading.Thread(target=worker)
    t.start()
    loop.call_soon(started.set)
    try:
        loop.run_forever()  # nothing scheduled: only the wake-up returns
    finally:
        t.join()
    assert got == [threading.get_ident()]  # ran on the loop's thread


@pytest.mark.timeout(10)
def test_call_soon_threadsafe_from_many_threads_all_run(loop):
    n_threads, per_thread = 4, 50
    got = []
    done = loop.create_future()

    def add(item):
        got.append(item)
        if len(got) == n_threads * per_thread and not done.done():
            done.set_result(None)

    def worker(k):
        for i in range(per_thread):
            loop.call_soon_threadsafe(add, (k, i))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    loop.run_until_complete(asyncio.wait_for(done, 5))
    for t in threads:
        t.join()
    assert sorted(got) == [(k, i) for k in range(n_threads) for i in range(per_thread)]
    for k in range(n_threads):  # each thread's callbacks stay in order
        assert [i for kk, i in got if kk == k] == list(range(per_thread))


# ---- stop -----------------------------------------------------------------


def test_stop_before_run_forever_runs_exactly_one_iteration(loop):
    out = []

    def a():
        out.append("a")
        loop.call_soon(out.append, "next")

    loop.call_soon(a)
    loop.stop()
    loop.run_forever()
    assert out == ["a"]
    assert not loop.is_running()


def test_stop_before_run_does_not_wait_for_timers(loop):
    fired = []
    h = loop.call_later(30, fired.append, 1)
    t0 = time.monotonic()
    run_once(loop)
    assert time.monotonic() - t0 < 5
    assert fired == []
    h.cancel()


def test_stop_twice_still_one_iteration_and_flag_is_reset(loop):
    out = []
    loop.stop()
    loop.stop()
    loop.call_soon(out.append, 1)
    loop.run_forever()
    assert out == [1]

    # The stop request does not survive run_forever(): a chain runs to its end.
    def chain(i):
        out.append(i)
        if i < 4:
            loop.call_soon(chain, i + 1)
        else:
            loop.stop()

    loop.call_soon(chain, 2)
    loop.run_forever()
    assert out == [1, 2, 3, 4]


def test_stop_inside_callback_finishes_current_batch(loop):
    out = []

    def a():
        out.append("a")
        loop.stop()
        loop.call_soon(out.append, "later")

    loop.call_soon(a)
    loop.call_soon(out.append, "b")
    loop.call_soon(out.append, "c")
    loop.run_forever()
    assert out == ["a", "b", "c"]
    run_once(loop)
    assert out == ["a", "b", "c", "later"]


def test_stop_from_timer_callback(loop):
    out = []
    loop.call_later(0.01, lambda: (out.append("t"), loop.stop()))
    loop.run_forever()
    assert out == ["t"]


def test_stop_during_run_until_complete_raises(loop):
    async def never():
        await asyncio.sleep(10)

    loop.call_soon(loop.stop)
    task = loop.create_task(never())
    with pytest.raises(RuntimeError, match="Event loop stopped before Future completed"):
        loop.run_until_complete(task)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        loop.run_until_complete(task)


def test_run_forever_can_run_again_after_stop(loop):
    out = []
    for i in range(3):
        loop.call_soon(out.append, i)
        loop.call_soon(loop.stop)
        loop.run_forever()
    assert out == [0, 1, 2]


# ---- run_until_complete ---------------------------------------------------


def test_run_until_complete_future(loop):
    fut = loop.create_future()
    loop.call_soon(fut.set_result, 42)
    assert loop.run_until_complete(fut) == 42


def test_run_until_complete_future_set_by_timer(loop):
    fut = loop.create_future()
    loop.call_later(0.01, fut.set_result, "late")
    assert loop.run_until_complete(fut) == "late"


def test_run_until_complete_coroutine(loop):
    async def main(x):
        await asyncio.sleep(0)
        await asyncio.sleep(0.001)
        return x * 2

    assert loop.run_until_complete(main(21)) == 42


def test_run_until_complete_coroutine_exception_propagates(loop):
    class Boom(Exception):
        pass

    async def main():
        await asyncio.sleep(0)
        raise Boom("x")

    with pytest.raises(Boom, match="x"):
        loop.run_until_complete(main())
    # still usable
    assert loop.run_until_complete(asyncio.sleep(0, "ok")) == "ok"


def test_run_until_complete_finished_future(loop):
    fut = loop.create_future()
    fut.set_result(7)
    assert loop.run_until_complete(fut) == 7


def test_run_until_complete_future_with_exception(loop):
    fut = loop.create_future()
    fut.set_exception(ZeroDivisionError("z"))
    with pytest.raises(ZeroDivisionError):
        loop.run_until_complete(fut)


def test_run_until_complete_cancelled_future(loop):
    fut = loop.create_future()
    loop.call_soon(fut.cancel)
    with pytest.raises(asyncio.CancelledError):
        loop.run_until_complete(fut)


def test_run_until_complete_future_of_other_loop(loop, loop_factory):
    other = loop_factory()
    try:
        fut = other.create_future()
        with pytest.raises(ValueError, match="different loop"):
            loop.run_until_complete(fut)
        fut.cancel()
    finally:
        other.close()
    assert loop.run_until_complete(asyncio.sleep(0, 3)) == 3


def test_run_until_complete_awaitable(loop):
    class Awaitable:
        def __await__(self):
            yield from asyncio.sleep(0).__await__()
            return "awaited"

    assert loop.run_until_complete(Awaitable()) == "awaited"


def test_run_forever_reentrant_raises(loop):
    errors = []

    def reenter():
        try:
            loop.run_forever()
        except RuntimeError as e:
            errors.append(str(e))
        loop.stop()

    loop.call_soon(reenter)
    loop.run_forever()
    assert errors == ["This event loop is already running"]


def test_run_until_complete_reentrant_raises(loop):
    async def main():
        inner = loop.create_future()
        with pytest.raises(RuntimeError, match="already running"):
            loop.run_until_complete(inner)
        inner.cancel()
        return "done"

    assert loop.run_until_complete(main()) == "done"


def test_run_after_close_raises(loop):
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.run_forever()
    coro = asyncio.sleep(0)
    try:
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            loop.run_until_complete(coro)
    finally:
        coro.close()
    fut = asyncio.Future(loop=loop)
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.run_until_complete(fut)
