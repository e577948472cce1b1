"""asyncio's debug mode on stock asyncio and on zloopgo: slow-callback
warnings, the thread check, source tracebacks, and the warnings for
never-awaited coroutines and unclosed loops."""

import asyncio
import gc
import logging
import sys
import threading
import time
import warnings

import pytest
from helpers import FOREIGN_CALL, refuses_foreign_calls


def test_slow_callback_logs_warning(loop, caplog):
    loop.set_debug(True)
    loop.slow_callback_duration = 0.01

    def slow_callback():
        time.sleep(0.05)

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        loop.call_soon(slow_callback)
        loop.run_until_complete(asyncio.sleep(0.01))
    slow = [r for r in caplog.records if r.name == "asyncio" and "Executing" in r.getMessage()]
    assert slow, [r.getMessage() for r in caplog.records]
    message = slow[0].getMessage()
    assert "took" in message and "seconds" in message
    assert "slow_callback" in message
    assert slow[0].levelno == logging.WARNING


def test_fast_callback_not_logged(loop, caplog):
    loop.set_debug(True)
    loop.slow_callback_duration = 10

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        loop.call_soon(lambda: None)
        loop.run_until_complete(asyncio.sleep(0))
    assert not [r for r in caplog.records if "Executing" in r.getMessage()]


def test_slow_callback_not_logged_without_debug(loop, caplog):
    loop.set_debug(False)
    loop.slow_callback_duration = 0.01
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        loop.call_soon(time.sleep, 0.03)
        loop.run_until_complete(asyncio.sleep(0))
    assert not [r for r in caplog.records if "Executing" in r.getMessage()]


def test_call_soon_from_other_thread_raises_in_debug(loop):
    loop.set_debug(True)

    def from_thread():
        errors = []
        for method, args in (
            (loop.call_soon, (print,)),
            (loop.call_later, (1, print)),
            (loop.call_at, (loop.time() + 1, print)),
        ):
            try:
                method(*args)
            except RuntimeError as exc:
                errors.append(str(exc))
        # the thread-safe variant is allowed
        loop.call_soon_threadsafe(lambda: None)
        return errors

    async def main():
        return await asyncio.get_running_loop().run_in_executor(None, from_thread)

    errors = loop.run_until_complete(main())
    loop.run_until_complete(loop.shutdown_default_executor())
    assert len(errors) == 3
    for e in errors:
        assert "Non-thread-safe operation invoked on an event loop other than the current one" in e


def test_call_soon_from_other_thread_allowed_without_debug(loop):
    loop.set_debug(False)
    ran = []

    def from_thread():
        loop.call_soon(ran.append, "ok")

    async def main():
        await asyncio.get_running_loop().run_in_executor(None, from_thread)
        await asyncio.sleep(0)

    if refuses_foreign_calls(loop):  # per-loop ownership, docs/compatibility.md
        with pytest.raises(RuntimeError, match=FOREIGN_CALL):
            loop.run_until_complete(main())
        loop.run_until_complete(loop.shutdown_default_executor())
        assert ran == []
        return
    loop.run_until_complete(main())
    loop.run_until_complete(loop.shutdown_default_executor())
    assert ran == ["ok"]


def test_source_traceback_in_debug_mode(loop):
    loop.set_debug(True)
    h1 = loop.call_soon(print)
    h2 = loop.call_later(10, print)
    h3 = loop.call_at(loop.time() + 10, print)
    try:
        for h in (h1, h2, h3):
            tb = h._source_traceback
            assert tb, h
            frame = tb[-1]
            assert frame.filename == __file__
            assert frame.name == "test_source_traceback_in_debug_mode"
        assert "created at" in repr(h1) and __file__ in repr(h1)
    finally:
        for h in (h1, h2, h3):
            h.cancel()


def test_no_source_traceback_without_debug(loop):
    loop.set_debug(False)
    h = loop.call_soon(print)
    t = loop.call_later(10, print)
    assert not h._source_traceback
    assert not t._source_traceback
    h.cancel()
    t.cancel()


def test_handle_repr(loop):
    def my_callback(x):
        pass

    h = loop.call_soon(my_callback, 1)
    t = loop.call_later(10, my_callback, 2)
    try:
        assert repr(h).startswith("<Handle ")
        assert "my_callback" in repr(h)
        assert repr(t).startswith("<TimerHandle when=")
        assert "my_callback" in repr(t)
    finally:
        h.cancel()
        t.cancel()
    assert "cancelled" in repr(h)


def test_cancelled_handle_repr_kept_in_debug(loop):
    loop.set_debug(True)

    def named_callback():
        pass

    h = loop.call_soon(named_callback)
    h.cancel()
    # asyncio saves the repr at cancel() in debug mode, callback included
    assert "named_callback" in repr(h)
    assert "cancelled" in repr(h)


def test_callback_exception_context_has_source_traceback(loop, loop_errors):
    loop.set_debug(True)

    def fail():
        raise ValueError("boom")

    loop.call_soon(fail)
    loop.run_until_complete(asyncio.sleep(0))
    assert len(loop_errors) == 1
    ctx = loop_errors[0]
    assert isinstance(ctx["exception"], ValueError)
    assert ctx["message"].startswith("Exception in callback")
    assert "fail" in ctx["message"]
    assert ctx["source_traceback"][-1].name == (
        "test_callback_exception_context_has_source_traceback"
    )


def test_callback_exception_without_debug(loop, loop_errors):
    def fail(arg):
        raise KeyError(arg)

    h = loop.call_soon(fail, "key")
    loop.run_until_complete(asyncio.sleep(0))
    assert len(loop_errors) == 1
    ctx = loop_errors[0]
    assert isinstance(ctx["exception"], KeyError)
    assert ctx["handle"] is h
    assert "Exception in callback" in ctx["message"] and "fail" in ctx["message"]
    assert "source_traceback" not in ctx


def test_debug_rejects_coroutine_callback(loop):
    async def coro_fn():
        pass

    loop.set_debug(True)
    with pytest.raises(TypeError, match="coroutines cannot be used with call_soon"):
        loop.call_soon(coro_fn)
    # (asyncio names call_at here: its call_later goes through call_at)
    with pytest.raises(TypeError, match="coroutines cannot be used with call_"):
        loop.call_later(1, coro_fn)
    with pytest.raises(TypeError, match="coroutines cannot be used with call_at"):
        loop.call_at(loop.time() + 1, coro_fn)
    with pytest.raises(TypeError, match="a callable object was expected by call_soon"):
        loop.call_soon(42)


def test_never_awaited_coroutine_warning(loop):
    loop.set_debug(True)

    async def never():
        pass

    async def main():
        coro = never()
        del coro
        gc.collect()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop.run_until_complete(main())
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("was never awaited" in m for m in msgs), msgs
    # debug mode tracks where the coroutine was created
    assert any("Coroutine created at" in m for m in msgs), msgs


def test_coroutine_origin_tracking_only_while_running_in_debug(loop):
    loop.set_debug(True)

    async def main():
        return sys.get_coroutine_origin_tracking_depth()

    before = sys.get_coroutine_origin_tracking_depth()
    depth = loop.run_until_complete(main())
    assert depth > 0
    assert sys.get_coroutine_origin_tracking_depth() == before


def test_unclosed_loop_resource_warning(loop_factory):
    lp = loop_factory()
    lp.run_until_complete(asyncio.sleep(0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del lp
        gc.collect()
    msgs = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert any("unclosed event loop" in m for m in msgs), msgs


def test_closed_loop_no_resource_warning(loop_factory):
    lp = loop_factory()
    lp.run_until_complete(asyncio.sleep(0))
    lp.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del lp
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_get_debug_set_debug(loop):
    assert loop.get_debug() in (False, sys.flags.dev_mode)
    loop.set_debug(True)
    assert loop.get_debug() is True
    loop.set_debug(False)
    assert loop.get_debug() is False


def test_debug_mode_thread_id_cleared_after_run(loop):
    loop.set_debug(True)
    loop.run_until_complete(asyncio.sleep(0))
    errors = []

    def other():
        try:
            loop.call_soon(lambda: None).cancel()
        except RuntimeError as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    # not running: asyncio's check only applies while the loop runs
    assert errors == []
