"""Bad arguments to the scheduling and descriptor methods, and scheduling
on a closed loop. Dual-run tests assert asyncio's behaviour, in debug mode
(where asyncio checks callbacks at once) and outside it (where the error
comes when the handle runs). The one zloopgo-only test is the one place
zloopgo checks sooner than asyncio: a call_at deadline that is not a
number."""

import asyncio
import decimal
import functools
import os
import socket
import sys
import tempfile
import warnings

import pytest
from helpers import SCHEDULERS, run_once, schedule


async def coro_func():
    pass


def noop(*args):
    pass


# asyncio names the method it checks in; call_later checks through call_at.
def method_re(method):
    return r"call_(later|at)\(\)" if method in ("call_later", "call_at") else rf"{method}\(\)"


# ---- callbacks that are not plain callables -------------------------------


@pytest.mark.parametrize("method", SCHEDULERS)
@pytest.mark.parametrize("bad", [None, 42, "callback"])
def test_non_callable_rejected_in_debug_mode(loop, method, bad):
    loop.set_debug(True)
    with pytest.raises(TypeError, match="a callable object was expected by " + method_re(method)):
        schedule(loop, method, bad)
    with pytest.raises(TypeError) as info:
        schedule(loop, method, bad)
    assert str(info.value).endswith(", got " + repr(bad))
    run_once(loop)  # nothing was queued


@pytest.mark.parametrize("method", SCHEDULERS)
def test_coroutine_object_rejected_in_debug_mode(loop, method):
    loop.set_debug(True)
    coro = coro_func()
    try:
        with pytest.raises(TypeError, match="coroutines cannot be used with " + method_re(method)):
            schedule(loop, method, coro)
    finally:
        coro.close()
    run_once(loop)


@pytest.mark.parametrize("method", SCHEDULERS)
def test_coroutine_function_rejected_in_debug_mode(loop, method):
    loop.set_debug(True)
    with pytest.raises(TypeError, match="coroutines cannot be used with " + method_re(method)):
        schedule(loop, method, coro_func)
    run_once(loop)


@pytest.mark.parametrize("method", SCHEDULERS)
def test_coroutine_method_and_partial_rejected_in_debug_mode(loop, method):
    class Thing:
        async def method(self):
            pass

    loop.set_debug(True)
    with pytest.raises(TypeError, match="coroutines cannot be used"):
        schedule(loop, method, Thing().method)
    with pytest.raises(TypeError, match="coroutines cannot be used"):
        schedule(loop, method, functools.partial(coro_func))
    run_once(loop)


@pytest.mark.parametrize("method", SCHEDULERS)
@pytest.mark.parametrize("bad", [None, 42, "callback", "coroutine"])
def test_non_callable_accepted_without_debug_and_reported_at_run(loop, loop_errors, method, bad):
    # Without debug mode asyncio checks nothing when scheduling: the
    # TypeError of calling the object goes to the exception handler when
    # the handle runs (issue 19, row 7).
    coro = coro_func() if bad == "coroutine" else None
    assert not loop.get_debug()
    handle = schedule(loop, method, coro if coro is not None else bad)
    run_once(loop)
    if coro is not None:
        coro.close()
    assert [type(c["exception"]) for c in loop_errors] == [TypeError]
    assert loop_errors[0]["handle"] is handle
    assert "is not callable" in str(loop_errors[0]["exception"])


@pytest.mark.parametrize("method", SCHEDULERS)
def test_coroutine_function_accepted_without_debug(loop, method):
    # Scheduling a coroutine function outside debug mode calls it when the
    # handle runs, as asyncio does: the coroutine it returns is dropped
    # unawaited (asyncio warns about that when it is collected).
    called = []

    async def records():
        called.append(1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        schedule(loop, method, records)
        run_once(loop)
    assert called == []


@pytest.mark.parametrize("method", SCHEDULERS)
def test_debug_mode_extracts_one_stack_per_handle(loop, method, monkeypatch):
    # In debug mode the checks and the source traceback come from one call
    # (zloopgo built the stack twice per call_soon).
    from asyncio import format_helpers

    calls = []
    real = format_helpers.extract_stack

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(format_helpers, "extract_stack", counting)
    loop.set_debug(True)
    handle = schedule(loop, method, noop)
    assert len(calls) == 1
    assert handle._source_traceback[-1].name == "schedule"
    handle.cancel()
    run_once(loop)


# ---- bad delays and deadlines ---------------------------------------------


@pytest.mark.parametrize("delay", ["1", b"1", [1], object(), decimal.Decimal("0.1")])
def test_call_later_non_numeric_delay(loop, delay):
    with pytest.raises(TypeError):
        loop.call_later(delay, noop)
    run_once(loop)


def test_call_later_delay_too_large_for_a_float(loop):
    with pytest.raises(OverflowError):
        loop.call_later(10**400, noop)
    run_once(loop)


# asyncio checks for None from 3.11; on 3.10 call_later's time() + None
# fails in the addition and call_at's TimerHandle asserts `when is not None`.
NONE_DELAY = (
    (TypeError, "delay must not be None")
    if sys.version_info >= (3, 11)
    else (TypeError, r"unsupported operand type\(s\) for \+: 'float' and 'NoneType'")
)
NONE_WHEN = (
    (TypeError, "when cannot be None") if sys.version_info >= (3, 11) else (AssertionError, "^$")
)


def test_call_later_none_delay(loop):
    with pytest.raises(NONE_DELAY[0], match=NONE_DELAY[1]):
        loop.call_later(None, noop)


def test_call_at_none_when(loop):
    with pytest.raises(NONE_WHEN[0], match=NONE_WHEN[1]):
        loop.call_at(None, noop)


@pytest.mark.parametrize("when", ["soon", [1], object()])
def test_call_at_non_numeric_when_fails_the_next_run(loop, when):
    # asyncio stores any `when` and fails when its run loop compares it
    # with the time (capi/timers.c asks zloopgo's the same); cancelled, it
    # is dropped unasked
    h = loop.call_at(when, noop)
    assert isinstance(h, asyncio.TimerHandle) and h.when() is when
    with pytest.raises(TypeError, match="'>=' not supported"):
        run_once(loop)
    with pytest.raises(TypeError, match="'>=' not supported"):
        run_once(loop)
    h.cancel()
    run_once(loop)


# ---- bad call signatures --------------------------------------------------


@pytest.mark.parametrize("method", SCHEDULERS)
def test_unknown_keyword_argument(loop, method):
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        schedule(loop, method, noop, bogus=1)
    run_once(loop)


def test_missing_callback(loop):
    with pytest.raises(TypeError):
        loop.call_soon()
    with pytest.raises(TypeError):
        loop.call_soon_threadsafe()
    with pytest.raises(TypeError):
        loop.call_later(1)
    with pytest.raises(TypeError):
        loop.call_at(loop.time())
    with pytest.raises(TypeError):
        loop.call_later()
    run_once(loop)


def test_context_that_is_not_a_context_is_reported_at_run(loop, loop_errors):
    out = []
    loop.call_soon(out.append, 1, context=object())
    loop.call_soon(out.append, 2)
    run_once(loop)
    assert out == [2]
    assert len(loop_errors) == 1
    assert loop_errors[0]["message"].startswith("Exception in callback")
    assert isinstance(loop_errors[0]["exception"], Exception)


def test_run_until_complete_non_awaitable(loop):
    with pytest.raises(TypeError, match=r"An asyncio\.Future, a coroutine or an awaitable"):
        loop.run_until_complete(42)
    assert loop.run_until_complete(asyncio.sleep(0, "ok")) == "ok"


# ---- a closed loop --------------------------------------------------------


@pytest.mark.parametrize("method", SCHEDULERS)
def test_scheduling_on_closed_loop(loop, method):
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        schedule(loop, method, noop)


def test_create_task_on_closed_loop(loop):
    loop.close()
    coro = coro_func()
    try:
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            loop.create_task(coro)
    finally:
        coro.close()


def test_run_until_complete_on_closed_loop(loop):
    loop.close()
    coro = coro_func()
    try:
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            loop.run_until_complete(coro)
    finally:
        coro.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.run_forever()


def test_run_in_executor_on_closed_loop(loop):
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.run_in_executor(None, noop)


def test_add_reader_on_closed_loop(loop):
    r, w = os.pipe()
    try:
        loop.close()
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            loop.add_reader(r, noop)
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            loop.add_writer(w, noop)
        assert loop.remove_reader(r) is False
        assert loop.remove_writer(w) is False
    finally:
        os.close(r)
        os.close(w)


def test_non_callable_on_closed_loop_says_closed(loop):
    # asyncio checks closed first, then (in debug mode) the callback
    loop.set_debug(True)
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_soon(42)


# ---- add_reader / add_writer ----------------------------------------------


@pytest.mark.parametrize("which", ["reader", "writer"])
def test_add_watch_negative_fd(loop, which):
    with pytest.raises(ValueError, match="Invalid file descriptor: -1"):
        getattr(loop, "add_" + which)(-1, noop)
    with pytest.raises(ValueError, match="Invalid file descriptor: -1"):
        getattr(loop, "remove_" + which)(-1)
    run_once(loop)


@pytest.mark.parametrize("which", ["reader", "writer"])
@pytest.mark.parametrize("bad", [object(), "3", 1.5, None])
def test_add_watch_object_without_fileno(loop, which, bad):
    with pytest.raises(ValueError, match="Invalid file object"):
        getattr(loop, "add_" + which)(bad, noop)
    with pytest.raises(ValueError, match="Invalid file object"):
        getattr(loop, "remove_" + which)(bad)


@pytest.mark.parametrize("which", ["reader", "writer"])
def test_add_watch_fd_too_large(loop, which):
    with pytest.raises(OverflowError):
        getattr(loop, "add_" + which)(2**40, noop)


@pytest.mark.parametrize("which", ["reader", "writer"])
def test_add_watch_closed_fd_registers_nothing(loop, which):
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    fd = r
    with pytest.raises(OSError) as info:
        getattr(loop, "add_" + which)(fd, noop)
    assert info.value.errno == 9  # EBADF
    assert getattr(loop, "remove_" + which)(fd) is False
    run_once(loop)


@pytest.mark.parametrize("which", ["reader", "writer"])
def test_add_watch_regular_file_registers_nothing(loop, which):
    with tempfile.TemporaryFile() as f:
        with pytest.raises(PermissionError):
            getattr(loop, "add_" + which)(f, noop)
        assert getattr(loop, "remove_" + which)(f) is False
        assert getattr(loop, "remove_" + which)(f.fileno()) is False


def test_failed_add_reader_leaves_loop_working(loop):
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError):
        loop.add_reader(r, noop)
    a, b = socket.socketpair()
    try:
        got = []

        def on_readable():
            got.append(a.recv(10))
            loop.remove_reader(a)
            loop.stop()

        loop.add_reader(a, on_readable)
        b.send(b"ping")
        loop.run_forever()
        assert got == [b"ping"]
        assert loop.remove_reader(a) is False
    finally:
        a.close()
        b.close()


def test_failed_add_writer_keeps_existing_reader(loop):
    # A failed registration changes nothing; an existing reader is kept.
    a, b = socket.socketpair()
    try:
        loop.add_reader(a, noop)
        with pytest.raises(ValueError):
            loop.add_writer(-1, noop)
        assert loop.remove_reader(a) is True
        assert loop.remove_reader(a) is False
    finally:
        a.close()
        b.close()


class _EqRaises(int):
    """A descriptor number whose comparisons raise (a hostile int)."""

    def __eq__(self, other):
        raise ValueError("eq raises")

    __hash__ = int.__hash__


def test_a_descriptor_whose_eq_raises_is_a_kept_difference(loop, loop_name):
    # asyncio's selector keeps the object add_writer was given as the key
    # of its descriptor table and looks up the number the kernel reports
    # in it: the lookup calls the object's __eq__, and the ValueError comes
    # out of the loop's run. zloopgo keeps the number and runs the
    # callback and later finds the number (docs/compatibility.md, "Known
    # differences").
    a, b = socket.socketpair()
    try:
        ran = []
        loop.add_writer(_EqRaises(a.fileno()), lambda: ran.append(True) or loop.stop())
        if loop_name == "zloopgo":
            loop.run_forever()
            assert ran == [True]
        else:
            with pytest.raises(ValueError, match="eq raises"):
                loop.run_forever()
            assert ran == []
            # and so does every later lookup of that number
            with pytest.raises(ValueError, match="eq raises"):
                loop.remove_writer(a.fileno())
            return
        assert loop.remove_writer(a.fileno()) is True
    finally:
        a.close()
        b.close()
