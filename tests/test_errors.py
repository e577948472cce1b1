"""Exceptions raised by callbacks and the exception handler API, dual-run
against asyncio (Handle._run, BaseEventLoop.call_exception_handler and
default_exception_handler)."""

import asyncio
import logging

import pytest
from helpers import SCHEDULERS, run_once, schedule


class Boom(Exception):
    pass


def raise_boom(*args):
    raise Boom(*args)


def noop(*args):
    pass


# ---- exceptions in callbacks ----------------------------------------------


@pytest.mark.parametrize("method", SCHEDULERS)
def test_callback_exception_reaches_handler_and_loop_goes_on(loop, loop_errors, method):
    out = []
    h = schedule(loop, method, raise_boom, "x")
    schedule(loop, method, out.append, "after")
    run_once(loop)
    assert out == ["after"]
    assert len(loop_errors) == 1
    ctx = loop_errors[0]
    assert ctx["message"].startswith("Exception in callback ")
    assert "raise_boom" in ctx["message"]
    assert isinstance(ctx["exception"], Boom)
    assert ctx["exception"].args == ("x",)
    assert ctx["handle"] is h
    assert ctx["exception"].__traceback__ is not None


def test_callback_exception_context_keys(loop, loop_errors):
    loop.call_soon(raise_boom)
    run_once(loop)
    assert len(loop_errors) == 1
    assert set(loop_errors[0]) == {"message", "exception", "handle"}


def test_callback_exception_in_debug_mode_has_source_traceback(loop, loop_errors):
    loop.set_debug(True)
    loop.call_soon(raise_boom)
    run_once(loop)
    assert len(loop_errors) == 1
    ctx = loop_errors[0]
    assert set(ctx) == {"message", "exception", "handle", "source_traceback"}
    assert ctx["source_traceback"][-1].name == (
        "test_callback_exception_in_debug_mode_has_source_traceback"
    )


def test_many_failing_callbacks_each_reported(loop, loop_errors):
    out = []
    for i in range(10):
        loop.call_soon(raise_boom, i)
        loop.call_soon(out.append, i)
    run_once(loop)
    assert out == list(range(10))
    assert [c["exception"].args for c in loop_errors] == [(i,) for i in range(10)]


def test_base_exception_subclass_goes_to_handler(loop, loop_errors):
    # Only SystemExit and KeyboardInterrupt escape; another BaseException
    # (e.g. GeneratorExit) is reported like an Exception.
    def raise_gen_exit():
        raise GeneratorExit("g")

    out = []
    loop.call_soon(raise_gen_exit)
    loop.call_soon(out.append, 1)
    run_once(loop)
    assert out == [1]
    assert len(loop_errors) == 1
    assert isinstance(loop_errors[0]["exception"], GeneratorExit)


def test_exception_in_task_reported_when_never_retrieved(loop, loop_errors):
    import gc

    async def fail():
        raise Boom("task")

    task = loop.create_task(fail())
    loop.run_until_complete(asyncio.sleep(0.001))
    assert task.done()
    del task
    gc.collect()
    assert len(loop_errors) == 1
    assert loop_errors[0]["message"] == "Task exception was never retrieved"
    assert isinstance(loop_errors[0]["exception"], Boom)


# ---- KeyboardInterrupt / SystemExit ---------------------------------------


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("method", SCHEDULERS)
def test_interrupt_in_callback_propagates_from_run_forever(loop, exc_type, method):
    out = []

    def interrupt():
        out.append("interrupt")
        raise exc_type("stop here")

    schedule(loop, method, out.append, 1)
    schedule(loop, method, interrupt)
    schedule(loop, method, out.append, 2)
    with pytest.raises(exc_type):
        loop.run_forever()
    assert out == [1, "interrupt"]
    assert not loop.is_running()
    assert asyncio._get_running_loop() is None
    # the rest of the batch is still queued and runs next time
    run_once(loop)
    assert out == [1, "interrupt", 2]


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_interrupt_in_callback_propagates_from_run_until_complete(loop, exc_type):
    out = []

    def interrupt():
        raise exc_type()

    async def main():
        await asyncio.sleep(0.01)
        out.append("main done")
        return "result"

    task = loop.create_task(main())
    loop.call_soon(interrupt)
    with pytest.raises(exc_type):
        loop.run_until_complete(task)
    assert not task.done()
    assert not loop.is_running()
    assert loop.run_until_complete(task) == "result"
    assert out == ["main done"]


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_interrupt_in_coroutine_propagates(loop, exc_type):
    async def main():
        await asyncio.sleep(0)
        raise exc_type()

    with pytest.raises(exc_type):
        loop.run_until_complete(main())
    assert loop.run_until_complete(asyncio.sleep(0, "again")) == "again"


def test_interrupt_does_not_leave_stop_pending(loop):
    out = []

    def interrupt():
        loop.stop()
        raise KeyboardInterrupt

    loop.call_soon(interrupt)
    with pytest.raises(KeyboardInterrupt):
        loop.run_forever()

    # asyncio resets _stopping when run_forever exits: a chain runs to its end
    def chain(i):
        out.append(i)
        if i < 3:
            loop.call_soon(chain, i + 1)
        else:
            loop.stop()

    loop.call_soon(chain, 0)
    loop.run_forever()
    assert out == [0, 1, 2, 3]


def test_interrupt_in_timer_keeps_other_due_timers(loop):
    out = []
    now = loop.time()

    def interrupt():
        raise KeyboardInterrupt

    loop.call_at(now - 3, out.append, "first")
    loop.call_at(now - 2, interrupt)
    loop.call_at(now - 1, out.append, "third")
    loop.call_later(0.01, out.append, "later")
    with pytest.raises(KeyboardInterrupt):
        loop.run_forever()
    assert out == ["first"]
    loop.run_until_complete(asyncio.sleep(0.03))
    assert out == ["first", "third", "later"]


# ---- the exception handler API --------------------------------------------


def test_get_and_set_exception_handler(loop):
    def handler(lp, ctx):
        pass

    loop.set_exception_handler(None)
    assert loop.get_exception_handler() is None
    loop.set_exception_handler(handler)
    assert loop.get_exception_handler() is handler
    loop.set_exception_handler(None)
    assert loop.get_exception_handler() is None


def test_set_exception_handler_rejects_non_callable(loop):
    with pytest.raises(TypeError, match="A callable object or None is expected"):
        loop.set_exception_handler(42)


def test_call_exception_handler_calls_custom_handler(loop):
    calls = []
    loop.set_exception_handler(lambda lp, ctx: calls.append((lp, ctx)))
    context = {"message": "hello", "extra": 1}
    loop.call_exception_handler(context)
    assert len(calls) == 1
    assert calls[0][0] is loop
    assert calls[0][1] is context


def test_default_exception_handler_logs(loop, caplog):
    loop.set_exception_handler(None)
    caplog.set_level(logging.ERROR, logger="asyncio")
    exc = Boom("logged")
    loop.call_exception_handler({"message": "custom message", "exception": exc, "extra": 5})
    records = [r for r in caplog.records if r.name == "asyncio"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert records[0].getMessage().startswith("custom message")
    assert "extra: 5" in records[0].getMessage()
    assert records[0].exc_info[1] is exc


def test_default_exception_handler_without_message(loop, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    loop.default_exception_handler({})
    records = [r for r in caplog.records if r.name == "asyncio"]
    assert [r.getMessage() for r in records] == ["Unhandled exception in event loop"]


def test_default_handler_logs_callback_exception(loop, caplog):
    loop.set_exception_handler(None)
    caplog.set_level(logging.ERROR, logger="asyncio")
    out = []
    loop.call_soon(raise_boom, "via-default")
    loop.call_soon(out.append, 1)
    run_once(loop)
    assert out == [1]
    records = [r for r in caplog.records if r.name == "asyncio"]
    assert len(records) == 1
    assert records[0].getMessage().startswith("Exception in callback ")
    assert isinstance(records[0].exc_info[1], Boom)


def test_custom_handler_can_defer_to_default(loop, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    seen = []

    def handler(lp, ctx):
        seen.append(ctx["message"])
        lp.default_exception_handler(ctx)

    loop.set_exception_handler(handler)
    loop.call_soon(raise_boom)
    run_once(loop)
    assert len(seen) == 1 and seen[0].startswith("Exception in callback")
    assert any(r.getMessage().startswith("Exception in callback") for r in caplog.records)


def test_exception_in_exception_handler_is_logged_and_loop_goes_on(loop, loop_errors, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")

    def bad_handler(lp, ctx):
        loop_errors.append(ctx)
        raise RuntimeError("handler is broken")

    loop.set_exception_handler(bad_handler)
    out = []
    loop.call_soon(raise_boom, 1)
    loop.call_soon(out.append, "after")
    run_once(loop)
    assert out == ["after"]
    assert len(loop_errors) == 1
    assert isinstance(loop_errors[0]["exception"], Boom)
    records = [r for r in caplog.records if r.name == "asyncio"]
    assert len(records) == 1
    assert records[0].getMessage().startswith("Unhandled error in exception handler")
    assert isinstance(records[0].exc_info[1], RuntimeError)
    # the loop still works
    assert loop.run_until_complete(asyncio.sleep(0, "fine")) == "fine"


def test_exception_in_exception_handler_direct_call(loop, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")

    def bad_handler(lp, ctx):
        raise ValueError("bad")

    loop.set_exception_handler(bad_handler)
    loop.call_exception_handler({"message": "m"})  # does not raise
    records = [r for r in caplog.records if r.name == "asyncio"]
    assert len(records) == 1
    assert "Unhandled error in exception handler" in records[0].getMessage()


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_interrupt_in_exception_handler_propagates(loop, exc_type):
    def handler(lp, ctx):
        raise exc_type()

    loop.set_exception_handler(handler)
    with pytest.raises(exc_type):
        loop.call_exception_handler({"message": "m"})
    out = []
    loop.call_soon(raise_boom)
    loop.call_soon(out.append, 1)
    with pytest.raises(exc_type):
        run_once(loop)
    assert out == []
    loop.set_exception_handler(lambda lp, ctx: None)
    run_once(loop)
    assert out == [1]


@pytest.mark.timeout(10)
def test_sigint_while_waiting_raises_keyboard_interrupt(loop):
    import os
    import signal
    import threading
    import time

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    h = loop.call_later(30, noop)  # the loop sleeps: nothing else is due
    kill = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
    fallback = threading.Timer(3.0, loop.call_soon_threadsafe, (loop.stop,))
    # Both timers start from inside the loop, so that the signal cannot
    # arrive before run_forever() (it would escape from the test itself).
    loop.call_soon(kill.start)
    loop.call_soon(fallback.start)
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_forever()
        assert time.monotonic() - t0 < 2.5  # not woken by the fallback
    finally:
        fallback.cancel()
        for timer in (kill, fallback):
            if timer.is_alive() or timer.ident is not None:
                timer.join()
        h.cancel()
    assert loop.run_until_complete(asyncio.sleep(0, "usable")) == "usable"


def test_interrupt_in_callback_in_debug_mode(loop):
    loop.set_debug(True)
    out = []

    def interrupt():
        raise KeyboardInterrupt

    loop.call_soon(interrupt)
    loop.call_soon(out.append, 1)
    with pytest.raises(KeyboardInterrupt):
        loop.run_forever()
    assert out == []
    run_once(loop)
    assert out == [1]
