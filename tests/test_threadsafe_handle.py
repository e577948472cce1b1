"""The handle call_soon_threadsafe returns, as asyncio's: its type (3.14+'s
_ThreadSafeHandle, a plain Handle's behaviour before), cancel() from another
thread waiting for the running callback, cancelled(), repr, the exception
handler's 'handle', context=, debug mode's source traceback and the closed
loop's error. Every test runs on stock asyncio and on zloopgo (the `loop`
fixture)."""

import asyncio
import contextvars
import threading

import pytest

THREADSAFE_HANDLE = getattr(asyncio.events, "_ThreadSafeHandle", None)
request_id = contextvars.ContextVar("request_id", default="unset")


def _run_callbacks(loop):
    loop.call_soon_threadsafe(loop.stop)
    loop.run_forever()


def test_handle_type_is_asyncios(loop):
    h = loop.call_soon_threadsafe(lambda: None)
    if THREADSAFE_HANDLE is not None:
        assert type(h) is THREADSAFE_HANDLE
        assert isinstance(h, asyncio.Handle)
    assert not h.cancelled()
    _run_callbacks(loop)


def test_repr_before_and_after_cancel(loop):
    def callback(a, b):
        pass

    h = loop.call_soon_threadsafe(callback, 1, "x")
    name = "_ThreadSafeHandle" if THREADSAFE_HANDLE is not None else "Handle"
    assert repr(h).startswith(f"<{name} test_repr_before_and_after_cancel.<locals>.callback(")
    if THREADSAFE_HANDLE is not None:  # what asyncio's own __init__ makes
        assert repr(h) == repr(THREADSAFE_HANDLE(callback, (1, "x"), loop))
    h.cancel()
    assert h.cancelled()
    assert repr(h) == f"<{name} cancelled>"
    _run_callbacks(loop)


def test_cancelled_before_run_is_skipped_and_released(loop):
    ran = []
    h = loop.call_soon_threadsafe(ran.append, 1)
    h.cancel()
    _run_callbacks(loop)
    assert ran == []
    assert h._callback is None and h._args is None


def test_callback_runs_with_args_in_order(loop):
    ran = []
    for i in range(5):
        loop.call_soon_threadsafe(ran.append, i)
    loop.call_soon(ran.append, "soon")
    _run_callbacks(loop)
    assert ran == [0, 1, 2, 3, 4, "soon"]


def test_cancel_from_other_thread_waits_for_running_callback(loop):
    started = threading.Event()
    release = threading.Event()
    events_seen = []
    handle_box = []

    def callback():
        started.set()
        release.wait(10)
        events_seen.append("callback returned")

    def other_thread():
        started.wait(10)
        cancelling = threading.Thread(target=cancel_it)
        cancelling.start()
        # 3.14+: the canceller stays blocked on the handle's lock while the
        # callback runs (however long it is given); before, nothing blocks it
        cancelling.join(0.2 if THREADSAFE_HANDLE is not None else 10)
        events_seen.append("canceller alive" if cancelling.is_alive() else "canceller done")
        release.set()
        cancelling.join(10)
        loop.call_soon_threadsafe(loop.stop)

    def cancel_it():
        handle_box[0].cancel()
        events_seen.append("cancel returned")

    handle_box.append(loop.call_soon_threadsafe(callback))
    t = threading.Thread(target=other_thread)
    t.start()
    loop.run_forever()
    t.join(10)
    if THREADSAFE_HANDLE is not None:
        assert events_seen == ["canceller alive", "callback returned", "cancel returned"]
    else:  # a plain Handle's cancel() takes no lock
        assert events_seen == ["cancel returned", "canceller done", "callback returned"]
    assert handle_box[0].cancelled()


def test_cancelled_from_other_thread_waits_for_running_callback(loop):
    started = threading.Event()
    release = threading.Event()
    order = []
    handle_box = []

    def callback():
        started.set()
        release.wait(10)
        order.append("callback returned")

    def other_thread():
        started.wait(10)
        asking = threading.Thread(target=lambda: order.append(handle_box[0].cancelled()))
        asking.start()
        asking.join(0.2 if THREADSAFE_HANDLE is not None else 10)
        order.append("asker alive" if asking.is_alive() else "asker done")
        release.set()
        asking.join(10)
        loop.call_soon_threadsafe(loop.stop)

    handle_box.append(loop.call_soon_threadsafe(callback))
    t = threading.Thread(target=other_thread)
    t.start()
    loop.run_forever()
    t.join(10)
    if THREADSAFE_HANDLE is not None:
        assert order == ["asker alive", "callback returned", False]
    else:
        assert order == [False, "asker done", "callback returned"]


def test_cancel_in_own_callback_takes_effect_without_stopping_it(loop):
    ran = []
    box = []

    def callback():
        box[0].cancel()  # the same thread: the lock is reentrant
        ran.append(box[0].cancelled())

    box.append(loop.call_soon_threadsafe(callback))
    _run_callbacks(loop)
    assert ran == [True]
    assert box[0].cancelled()


def test_exception_handler_gets_the_returned_handle(loop):
    seen = []
    loop.set_exception_handler(lambda lp, ctx: seen.append(ctx))

    def fails():
        raise ValueError("boom")

    h = loop.call_soon_threadsafe(fails)
    _run_callbacks(loop)
    assert len(seen) == 1
    assert seen[0]["handle"] is h
    assert isinstance(seen[0]["exception"], ValueError)
    assert seen[0]["message"].startswith("Exception in callback ")
    assert "source_traceback" not in seen[0]


def test_base_exception_other_than_exit_goes_to_handler(loop):
    class Custom(BaseException):
        pass

    seen = []
    loop.set_exception_handler(lambda lp, ctx: seen.append(type(ctx["exception"])))

    def fails():
        raise Custom

    loop.call_soon_threadsafe(fails)
    _run_callbacks(loop)
    assert seen == [Custom]


def test_keyboard_interrupt_propagates_and_lock_is_released(loop):
    def fails():
        raise KeyboardInterrupt

    h = loop.call_soon_threadsafe(fails)
    with pytest.raises(KeyboardInterrupt):
        loop.run_forever()
    # the lock was let go: another thread can cancel at once
    t = threading.Thread(target=h.cancel)
    t.start()
    t.join(10)
    assert not t.is_alive()
    assert h.cancelled()


class _FailsAndSoDoesItsRepr:
    """A callback that raises, and whose repr (which the report of that
    takes) raises as well."""

    def __call__(self):
        raise ValueError("the callback's")

    def __repr__(self):
        raise RuntimeError("the repr's")


@pytest.mark.parametrize("debug", [False, True])
def test_failure_of_the_report_escapes_the_run(loop, debug):
    # Handle._run's except block takes the callback's repr: what that
    # raises escapes _run and the loop's run, in asyncio's
    # _ThreadSafeHandle too (not reported as a callback's own failure)
    loop.set_debug(debug)
    seen = []
    loop.set_exception_handler(lambda lp, ctx: seen.append(ctx))
    h = loop.call_soon_threadsafe(_FailsAndSoDoesItsRepr())
    stop = loop.call_soon(loop.stop)  # a run that does not raise returns
    with pytest.raises(RuntimeError, match="the repr's") as raised:
        loop.run_forever()
    stop.cancel()
    assert isinstance(raised.value.__context__, ValueError)
    assert seen == []
    # the handle's lock was let go: another thread takes it at once
    # (cancelled(), as cancel() in debug mode would take the repr)
    t = threading.Thread(target=h.cancelled)
    t.start()
    t.join(10)
    assert not t.is_alive()


def test_context_argument_and_default_copy(loop):
    seen = []
    ctx = contextvars.copy_context()
    ctx.run(request_id.set, "given")
    token = request_id.set("caller")
    try:
        h_default = loop.call_soon_threadsafe(lambda: seen.append(request_id.get()))
        loop.call_soon_threadsafe(lambda: seen.append(request_id.get()), context=ctx)
        loop.call_soon_threadsafe(lambda: seen.append(request_id.get()), context=None)
    finally:
        request_id.reset(token)
    _run_callbacks(loop)
    assert seen == ["caller", "given", "caller"]
    # the default is a copy: a set() in the callback stays in the handle's context
    assert request_id.get() == "unset"
    if THREADSAFE_HANDLE is not None:
        assert h_default._context is not ctx
        assert h_default._context[request_id] == "caller"


def test_context_that_is_not_a_context_fails_as_asyncios(loop):
    seen = []
    loop.set_exception_handler(lambda lp, ctx: seen.append(type(ctx["exception"])))
    loop.call_soon_threadsafe(lambda: None, context=object())
    _run_callbacks(loop)
    assert seen == [AttributeError]


def test_unknown_keyword_and_missing_callback(loop):
    with pytest.raises(TypeError):
        loop.call_soon_threadsafe(lambda: None, bogus=1)
    with pytest.raises(TypeError):
        loop.call_soon_threadsafe()


def test_closed_loop_error(loop):
    loop.close()
    with pytest.raises(RuntimeError, match=r"^Event loop is closed$"):
        loop.call_soon_threadsafe(lambda: None)


def test_debug_mode_source_traceback_and_callback_check(loop):
    loop.set_debug(True)

    def callback():
        pass

    h = loop.call_soon_threadsafe(callback)
    assert h._source_traceback
    frame = h._source_traceback[-1]
    assert frame.name == "test_debug_mode_source_traceback_and_callback_check"
    assert "created at" in repr(h)

    async def coro():
        pass

    with pytest.raises(TypeError, match="coroutines cannot be used with call_soon_threadsafe"):
        loop.call_soon_threadsafe(coro)
    with pytest.raises(TypeError, match="a callable object was expected by call_soon_threadsafe"):
        loop.call_soon_threadsafe(1)
    _run_callbacks(loop)
    loop.set_debug(False)
    assert loop.call_soon_threadsafe(callback)._source_traceback is None
    _run_callbacks(loop)


def test_debug_mode_exception_context_has_source_traceback(loop):
    loop.set_debug(True)
    seen = []
    loop.set_exception_handler(lambda lp, ctx: seen.append(ctx))

    def fails():
        raise ValueError

    h = loop.call_soon_threadsafe(fails)
    _run_callbacks(loop)
    assert seen[0]["handle"] is h
    assert seen[0]["source_traceback"] is h._source_traceback


def test_from_other_thread_wakes_and_runs(loop):
    ran = []

    def other_thread():
        h = loop.call_soon_threadsafe(ran.append, "thread")
        ran.append(type(h).__name__)
        loop.call_soon_threadsafe(loop.stop)

    loop.call_soon(lambda: threading.Thread(target=other_thread).start())
    loop.run_forever()
    name = "_ThreadSafeHandle" if THREADSAFE_HANDLE is not None else "Handle"
    assert sorted(ran, key=str) == sorted(["thread", name], key=str)


def test_adapter_runner_refuses_what_it_did_not_make():
    # zloopgo's runner of 3.14's handles is reachable from Python: it must
    # refuse, not trust, an object that is not one of its loop's handles
    from zloopgo import _loop

    if THREADSAFE_HANDLE is None:
        assert _loop._RUN_THREADSAFE is None
        return
    with pytest.raises(TypeError):
        _loop._RUN_THREADSAFE(object())
    stock = asyncio.new_event_loop()
    try:
        foreign = THREADSAFE_HANDLE(lambda: None, (), stock)
        with pytest.raises(TypeError):
            _loop._RUN_THREADSAFE(foreign)
    finally:
        stock.close()
