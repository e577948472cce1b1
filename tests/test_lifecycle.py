"""Loop lifecycle and the asyncio APIs around it, dual-run where the loop
is the subject, plus zloopgo's entry points (run, install, uninstall and
asyncio.run's loop_factory)."""

import asyncio
import concurrent.futures
import contextvars
import gc
import sys
import threading
import weakref

import pytest
from helpers import run_once

import zloopgo

VAR = contextvars.ContextVar("VAR", default="unset")


class Token:
    pass


# ---- running / closed -----------------------------------------------------


def test_is_running_and_is_closed(loop):
    seen = []
    assert loop.is_running() is False
    assert loop.is_closed() is False
    loop.call_soon(lambda: seen.append(loop.is_running()))
    run_once(loop)
    assert seen == [True]
    assert loop.is_running() is False
    loop.close()
    assert loop.is_closed() is True
    assert loop.is_running() is False


def test_is_running_inside_coroutine(loop):
    async def main():
        return loop.is_running(), asyncio.get_running_loop() is loop

    assert loop.run_until_complete(main()) == (True, True)
    assert not loop.is_running()


def test_is_running_follows_thread_id(loop):
    # asyncio's is_running() is `self._thread_id is not None`: the thread
    # id is there while the loop runs, gone after (also after a run that
    # raised), and whatever is set there is what is_running() reads.
    seen = []

    def cb():
        seen.append((loop.is_running(), loop._thread_id == threading.get_ident()))
        raise SystemExit(3)

    assert loop._thread_id is None
    loop.call_soon(cb)
    with pytest.raises(SystemExit):
        loop.run_forever()
    assert seen == [(True, True)]
    assert loop._thread_id is None and loop.is_running() is False
    loop._thread_id = 12345
    assert loop.is_running() is True
    loop._thread_id = None
    assert loop.is_running() is False


def test_a_subclass_is_running_is_what_an_eager_task_asks(loop_factory):
    # Task(eager_start=True) asks loop.is_running(): a class derived from
    # the loop that answers otherwise is heard.
    if sys.version_info < (3, 12):
        pytest.skip("eager_start is new in 3.12")
    base_loop = loop_factory()
    base = type(base_loop)
    base_loop.close()

    class NeverRunning(base):
        def is_running(self):
            return False

    lp = NeverRunning()
    order = []

    async def child():
        order.append("child")

    async def main():
        task = asyncio.Task(child(), loop=lp, eager_start=True)
        order.append("created")
        await task

    try:
        lp.run_until_complete(main())
    finally:
        lp.close()
    assert order == ["created", "child"]


def test_close_twice(loop):
    loop.close()
    loop.close()
    assert loop.is_closed()


def test_close_while_running_raises(loop):
    errors = []

    def try_close():
        try:
            loop.close()
        except RuntimeError as e:
            errors.append(str(e))

    loop.call_soon(try_close)
    run_once(loop)
    assert errors == ["Cannot close a running event loop"]
    assert not loop.is_closed()
    assert loop.run_until_complete(asyncio.sleep(0, 1)) == 1


def test_close_drops_pending_callbacks_and_timers(loop):
    out = []
    soon_arg, timer_arg = Token(), Token()
    refs = [weakref.ref(soon_arg), weakref.ref(timer_arg)]
    loop.call_soon(out.append, soon_arg)
    loop.call_later(0.001, out.append, timer_arg)
    del soon_arg, timer_arg
    loop.close()
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert out == []


def test_close_shuts_down_default_executor(loop):
    def in_thread():
        return threading.get_ident()

    ident = loop.run_until_complete(loop.run_in_executor(None, in_thread))
    assert ident != threading.get_ident()
    executor = loop._default_executor
    assert executor is not None
    loop.close()
    with pytest.raises(RuntimeError):
        executor.submit(in_thread)


def test_run_forever_restores_running_loop_and_asyncgen_hooks(loop):
    hooks_before = sys.get_asyncgen_hooks()
    seen = []

    def inside():
        seen.append(asyncio.get_running_loop())
        seen.append(sys.get_asyncgen_hooks())

    loop.call_soon(inside)
    run_once(loop)
    assert seen[0] is loop
    assert seen[1] != hooks_before
    assert sys.get_asyncgen_hooks() == hooks_before
    assert asyncio._get_running_loop() is None
    with pytest.raises(RuntimeError, match="no running event loop"):
        asyncio.get_running_loop()


def test_two_loops_alternate_and_keep_their_own_callbacks(loop, loop_factory):
    other = loop_factory()
    try:
        out = []
        loop.call_soon(out.append, "mine")
        other.call_soon(out.append, "other")
        loop.call_later(0.001, out.append, "mine-timer")
        other.call_later(0.001, out.append, "other-timer")
        loop.run_until_complete(asyncio.sleep(0.01))
        assert sorted(out) == ["mine", "mine-timer"]
        other.run_until_complete(asyncio.sleep(0.01))
        assert sorted(out) == ["mine", "mine-timer", "other", "other-timer"]
    finally:
        other.close()


def test_running_another_loop_inside_a_running_loop_raises(loop, loop_factory):
    other = loop_factory()
    try:

        async def main():
            fut = other.create_future()
            with pytest.raises(RuntimeError, match="another loop is running"):
                other.run_until_complete(fut)
            with pytest.raises(RuntimeError, match="another loop is running"):
                other.run_forever()
            fut.cancel()
            return "ok"

        assert loop.run_until_complete(main()) == "ok"
        assert not other.is_running()
    finally:
        other.close()


# ---- debug ----------------------------------------------------------------


def test_get_set_debug(loop):
    loop.set_debug(True)
    assert loop.get_debug() is True
    loop.set_debug(False)
    assert loop.get_debug() is False
    loop.set_debug(1)
    assert loop.get_debug()


def test_debug_mode_rejects_call_soon_from_another_thread_while_running(loop):
    loop.set_debug(True)
    errors = []

    def worker():
        try:
            loop.call_soon(lambda: None)
        except RuntimeError as e:
            errors.append(str(e))
        loop.call_soon_threadsafe(loop.stop)

    loop.call_soon(lambda: threading.Thread(target=worker).start())
    loop.run_forever()
    assert len(errors) == 1
    assert "Non-thread-safe operation" in errors[0]


def test_debug_slow_callback_duration_attribute(loop):
    assert loop.slow_callback_duration == pytest.approx(0.1)
    loop.slow_callback_duration = 0.5
    assert loop.slow_callback_duration == 0.5


# ---- tasks ----------------------------------------------------------------


def test_current_task_all_tasks_get_running_loop(loop):
    async def child():
        await asyncio.sleep(0.01)

    async def main():
        me = asyncio.current_task()
        other = asyncio.create_task(child())
        tasks = asyncio.all_tasks()
        assert asyncio.get_running_loop() is loop
        assert asyncio.get_event_loop() is loop
        await other
        return me, other, tasks

    task = loop.create_task(main())
    me, other, tasks = loop.run_until_complete(task)
    assert me is task
    assert tasks == {task, other}
    assert asyncio.current_task(loop) is None
    assert asyncio.all_tasks(loop) == set()


def test_current_task_in_plain_callback_is_none(loop):
    seen = []
    loop.call_soon(lambda: seen.append(asyncio.current_task()))
    run_once(loop)
    assert seen == [None]


def test_create_task_name(loop):
    async def main():
        return asyncio.current_task().get_name()

    task = loop.create_task(main(), name="my-task")
    assert task.get_name() == "my-task"
    assert loop.run_until_complete(task) == "my-task"
    assert task.get_loop() is loop


@pytest.mark.skipif(sys.version_info < (3, 11), reason="create_task(context=) is new in 3.11")
def test_create_task_context(loop):
    ctx = contextvars.Context()
    ctx.run(VAR.set, "task-ctx")

    async def main():
        before = VAR.get()
        await asyncio.sleep(0)
        VAR.set("changed")
        return before

    assert loop.run_until_complete(loop.create_task(main(), context=ctx)) == "task-ctx"
    assert ctx[VAR] == "changed"
    assert VAR.get() == "unset"


def test_task_copies_context_at_creation(loop):
    async def main():
        return VAR.get()

    token = VAR.set("at-creation")
    try:
        task = loop.create_task(main())
    finally:
        VAR.reset(token)
    assert loop.run_until_complete(task) == "at-creation"


def test_set_and_get_task_factory(loop):
    made = []

    def factory(lp, coro, **kwargs):
        task = asyncio.Task(coro, loop=lp, **kwargs)
        made.append(task)
        return task

    assert loop.get_task_factory() is None
    loop.set_task_factory(factory)
    assert loop.get_task_factory() is factory

    async def main():
        return 5

    task = loop.create_task(main())
    assert made == [task]
    assert loop.run_until_complete(task) == 5
    loop.run_until_complete(main())  # run_until_complete wraps through the factory too
    assert len(made) == 2
    loop.set_task_factory(None)
    assert loop.get_task_factory() is None
    with pytest.raises(TypeError, match="task factory must be a callable or None"):
        loop.set_task_factory(42)


def test_cancel_task(loop):
    async def sleeper():
        await asyncio.sleep(10)

    task = loop.create_task(sleeper())
    loop.call_later(0.01, task.cancel)
    with pytest.raises(asyncio.CancelledError):
        loop.run_until_complete(task)
    assert task.cancelled()


def test_gather_and_wait_for(loop):
    async def delayed(x, d):
        await asyncio.sleep(d)
        return x

    async def main():
        res = await asyncio.gather(delayed(1, 0.01), delayed(2, 0.0), delayed(3, 0.005))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(delayed(4, 10), 0.01)
        return res

    assert loop.run_until_complete(main()) == [1, 2, 3]


# ---- executors ------------------------------------------------------------


def test_run_in_executor_default(loop):
    def work(a, b):
        return a + b, threading.get_ident()

    result, ident = loop.run_until_complete(loop.run_in_executor(None, work, 2, 3))
    assert result == 5
    assert ident != threading.get_ident()


def test_run_in_executor_exception(loop):
    def work():
        raise ValueError("in thread")

    with pytest.raises(ValueError, match="in thread"):
        loop.run_until_complete(loop.run_in_executor(None, work))


def test_run_in_executor_custom_executor(loop):
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        fut = loop.run_in_executor(ex, threading.current_thread)
        thread = loop.run_until_complete(fut)
    assert thread is not threading.current_thread()


def test_set_default_executor(loop):
    ex = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="zl-test-exec")
    loop.set_default_executor(ex)
    name = loop.run_until_complete(
        loop.run_in_executor(None, lambda: threading.current_thread().name)
    )
    assert name.startswith("zl-test-exec")
    loop.run_until_complete(loop.shutdown_default_executor())


def test_shutdown_default_executor(loop):
    loop.run_until_complete(loop.run_in_executor(None, lambda: None))
    executor = loop._default_executor
    loop.run_until_complete(loop.shutdown_default_executor())
    with pytest.raises(RuntimeError):
        executor.submit(lambda: None)
    with pytest.raises(RuntimeError, match="Executor shutdown has been called"):
        loop.run_in_executor(None, lambda: None)


def test_shutdown_default_executor_without_executor(loop):
    assert loop.run_until_complete(loop.shutdown_default_executor()) is None


# ---- async generators -----------------------------------------------------


async def _agen(finalized):
    """Yields 1 and 2; records the running loop when it is finalized."""
    try:
        yield 1
        yield 2
    finally:
        finalized.append(asyncio.get_running_loop())


def test_shutdown_asyncgens_finalizes_async_generator(loop):
    finalized = []

    async def main():
        g = _agen(finalized)
        assert await g.__anext__() == 1
        return g

    g = loop.run_until_complete(main())
    assert finalized == []
    loop.run_until_complete(loop.shutdown_asyncgens())
    assert finalized == [loop]
    del g


def test_async_generator_collected_while_running_is_closed_on_the_loop(loop):
    finalized = []

    async def main():
        g = _agen(finalized)
        await g.__anext__()
        del g
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)

    loop.run_until_complete(main())
    assert finalized == [loop]


def test_shutdown_asyncgens_twice(loop):
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_asyncgens())


# ---- zloopgo entry points -------------------------------------------------


def test_zloopgo_run_returns_result_on_a_zloopgo_loop():
    async def main(x):
        await asyncio.sleep(0.001)
        lp = asyncio.get_running_loop()
        return x, isinstance(lp, zloopgo.Loop), lp.get_debug()

    assert zloopgo.run(main(7)) == (7, True, False)
    assert asyncio._get_running_loop() is None


def test_zloopgo_run_debug():
    async def main():
        return asyncio.get_running_loop().get_debug()

    assert zloopgo.run(main(), debug=True) is True


def test_zloopgo_run_propagates_exception_and_closes_loop():
    loops = []

    async def main():
        loops.append(asyncio.get_running_loop())
        raise KeyError("k")

    with pytest.raises(KeyError):
        zloopgo.run(main())
    assert loops[0].is_closed()


def test_zloopgo_run_cancels_leftover_tasks():
    cancelled = []

    async def forever():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main():
        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(0)

    zloopgo.run(main())
    assert cancelled == [True]


def test_zloopgo_run_rejects_non_coroutine():
    # As asyncio.run on this Python: ValueError up to 3.13, TypeError
    # (it takes any awaitable) from 3.14.
    with pytest.raises(Exception) as expected:
        asyncio.run(42)
    with pytest.raises(type(expected.value)) as got:
        zloopgo.run(42)
    assert str(got.value) == str(expected.value)


def test_zloopgo_run_inside_running_loop_raises():
    # asyncio.run() fails fast with this message before making a loop
    async def inner():
        pass

    async def main():
        coro = inner()
        try:
            with pytest.raises(RuntimeError, match="cannot be called from a running event loop"):
                zloopgo.run(coro)
        finally:
            coro.close()

    zloopgo.run(main())


@pytest.mark.skipif(sys.version_info < (3, 12), reason="asyncio.run(loop_factory=) is new in 3.12")
def test_asyncio_run_with_loop_factory():
    async def main():
        return type(asyncio.get_running_loop())

    assert asyncio.run(main(), loop_factory=zloopgo.new_event_loop) is zloopgo.Loop


def test_new_event_loop_gives_a_fresh_open_loop():
    a = zloopgo.new_event_loop()
    b = zloopgo.new_event_loop()
    try:
        assert a is not b
        assert isinstance(a, zloopgo.Loop)
        assert isinstance(a, asyncio.AbstractEventLoop)
        assert not a.is_closed() and not a.is_running()
    finally:
        a.close()
        b.close()


def test_install_and_uninstall():
    before = asyncio.get_event_loop_policy()
    zloopgo.install()
    try:
        assert isinstance(asyncio.get_event_loop_policy(), zloopgo.EventLoopPolicy)
        lp = asyncio.new_event_loop()
        try:
            assert isinstance(lp, zloopgo.Loop)
        finally:
            lp.close()

        async def main():
            return type(asyncio.get_running_loop())

        assert asyncio.run(main()) is zloopgo.Loop
    finally:
        zloopgo.uninstall()
    assert not isinstance(asyncio.get_event_loop_policy(), zloopgo.EventLoopPolicy)
    lp = asyncio.new_event_loop()
    try:
        assert not isinstance(lp, zloopgo.Loop)
    finally:
        lp.close()
    assert type(asyncio.get_event_loop_policy()) is type(before)


def test_uninstall_leaves_another_policy_alone():
    class OtherPolicy(asyncio.DefaultEventLoopPolicy):
        pass

    policy = OtherPolicy()
    asyncio.set_event_loop_policy(policy)
    try:
        zloopgo.uninstall()
        assert asyncio.get_event_loop_policy() is policy
    finally:
        asyncio.set_event_loop_policy(None)
