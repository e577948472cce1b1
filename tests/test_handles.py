"""Handle / TimerHandle API, dual-run against asyncio.events.Handle and
TimerHandle: cancel(), cancelled(), get_context(), repr, and the release
of the callback and its arguments."""

import asyncio
import contextvars
import gc
import socket
import subprocess
import sys
import weakref

import pytest
from helpers import SCHEDULERS, run_once, schedule, zloop

VAR = contextvars.ContextVar("VAR", default="unset")


class Token:
    """A weak-referenceable argument."""


class CallbackObject:
    """A weak-referenceable callable."""

    def __init__(self):
        self.calls = 0

    def __call__(self, *args):
        self.calls += 1


def my_named_callback(*args):
    pass


# ---- cancel / cancelled ---------------------------------------------------


@pytest.mark.parametrize("method", SCHEDULERS)
def test_cancelled_handle_does_not_run(loop, method):
    out = []
    h = schedule(loop, method, out.append, 1)
    assert h.cancelled() is False
    h.cancel()
    assert h.cancelled() is True
    run_once(loop)
    assert out == []


@pytest.mark.parametrize("method", SCHEDULERS)
def test_cancel_twice(loop, method):
    h = schedule(loop, method, my_named_callback)
    h.cancel()
    h.cancel()
    assert h.cancelled()
    run_once(loop)


class ReprRaises:
    """A callable whose repr raises, as debug mode's cancel() takes it."""

    def __call__(self, *args):
        pass

    def __repr__(self):
        raise RuntimeError("repr of the callback")


@pytest.mark.parametrize("method", SCHEDULERS)
def test_debug_cancel_raises_what_the_repr_raises(loop, method):
    # asyncio's Handle.cancel() marks the handle cancelled, then (debug
    # mode) takes its repr, then drops the callback: a repr that raises
    # makes cancel() raise, the callback still held. zloopgo cleared the
    # error (tests/hostile/found/cancel-in-debug-mode-swallows-repr-error).
    loop.set_debug(True)
    callback = ReprRaises()
    h = schedule(loop, method, callback)
    with pytest.raises(RuntimeError, match="repr of the callback"):
        h.cancel()
    assert h.cancelled() is True
    assert h._callback is callback
    h.cancel()  # cancelled already: nothing to do, nothing raised
    loop.set_debug(False)
    run_once(loop)


def test_remove_reader_raises_what_the_cancel_raises(loop):
    loop.set_debug(True)
    a, b = socket.socketpair()
    try:
        loop.add_reader(a, ReprRaises())
        with pytest.raises(RuntimeError, match="repr of the callback"):
            loop.add_reader(a, my_named_callback)  # the old handle's cancel raises
        assert loop.remove_reader(a) is True  # the new reader was registered
        loop.add_writer(a, ReprRaises())
        with pytest.raises(RuntimeError, match="repr of the callback"):
            loop.remove_writer(a)
        assert loop.remove_writer(a) is False
    finally:
        loop.set_debug(False)
        a.close()
        b.close()


@pytest.mark.parametrize("method", SCHEDULERS)
def test_a_finalizer_the_cancel_runs_sees_asyncios_state(loop, method):
    # asyncio's cancel() sets _callback to None, then _args: the callback's
    # finalizer, run by the first, still sees the arguments; an argument's,
    # run by the second, sees neither (tests/hostile, on 3.14).
    seen = []
    handles = []

    class Callback:
        def __call__(self, *args):
            pass

        def __del__(self):
            args = handles[0]._args
            names = None if args is None else [type(a).__name__ for a in args]
            seen.append(("callback's", handles[0]._callback, names))

    class Arg:
        def __del__(self):
            seen.append(("argument's", handles[0]._callback, handles[0]._args))

    handles.append(schedule(loop, method, Callback(), Arg()))
    seen.append(("before", handles[0]._args[0].__class__.__name__))
    handles[0].cancel()
    assert seen[0] == ("before", "Arg")
    assert seen[1:] == [("callback's", None, ["Arg"]), ("argument's", None, None)]
    run_once(loop)


@pytest.mark.parametrize("method", SCHEDULERS)
def test_handle_not_cancelled_after_running(loop, method):
    out = []
    h = schedule(loop, method, out.append, 1)
    run_once(loop)
    assert out == [1]
    assert h.cancelled() is False
    h.cancel()  # too late, but allowed
    assert h.cancelled() is True


def test_cancel_earlier_handle_in_same_batch(loop):
    out = []
    victim = None

    def killer():
        out.append("killer")
        victim.cancel()

    loop.call_soon(killer)
    victim = loop.call_soon(out.append, "victim")
    loop.call_soon(out.append, "after")
    run_once(loop)
    assert out == ["killer", "after"]


@pytest.mark.parametrize("method", SCHEDULERS)
def test_handle_cancels_itself_while_running(loop, method):
    box = {}
    token = Token()
    ref = weakref.ref(token)

    def cb(arg):
        box["h"].cancel()
        box["cancelled_inside"] = box["h"].cancelled()
        box["arg_alive_inside"] = arg is ref()

    box["h"] = schedule(loop, method, cb, token)
    del token
    run_once(loop)
    assert box["cancelled_inside"] is True
    assert box["arg_alive_inside"] is True
    assert box["h"].cancelled()
    assert ref() is None  # the cancelled handle released its argument


def test_timer_handle_has_when_plain_handle_does_not(loop):
    h = loop.call_soon(my_named_callback)
    t = loop.call_later(10, my_named_callback)
    assert not hasattr(h, "when")
    assert isinstance(t.when(), float)
    h.cancel()
    t.cancel()


# ---- asyncio's classes ----------------------------------------------------


@pytest.mark.parametrize("method", SCHEDULERS)
def test_handles_are_instances_of_asyncios_classes(loop, method):
    h = schedule(loop, method, my_named_callback)
    timer = method in ("call_later", "call_at")
    assert isinstance(h, asyncio.Handle) and issubclass(type(h), asyncio.Handle)
    assert isinstance(h, asyncio.TimerHandle) is timer
    assert issubclass(type(h), asyncio.TimerHandle) is timer
    h.cancel()


def test_a_timer_kept_behind_an_isinstance_check_is_cancelled(loop):
    # what programs write: `if isinstance(self.handle, asyncio.TimerHandle):
    # self.handle.cancel()` before scheduling the next one (a debounce)
    fired = []
    box = {"handle": None}

    def poke(n):
        if isinstance(box["handle"], asyncio.TimerHandle):
            box["handle"].cancel()
        box["handle"] = loop.call_later(0.01, fired.append, n)

    for n in range(3):
        poke(n)
    loop.run_until_complete(asyncio.sleep(0.05))
    assert fired == [2]


@pytest.mark.parametrize("method", SCHEDULERS)
def test_asyncios_own_methods_read_the_handle(loop, method):
    h = schedule(loop, method, my_named_callback, 1)
    info = h._repr_info()  # asyncio's, inherited
    assert info[0] == type(h).__name__
    assert repr(h) == "<" + " ".join(info) + ">"
    assert asyncio.Handle.cancelled(h) is False
    if isinstance(h, asyncio.TimerHandle):
        assert asyncio.TimerHandle.when(h) == h.when()
    h.cancel()
    assert asyncio.Handle.cancelled(h) is True
    assert "cancelled" in h._repr_info()


@pytest.mark.parametrize("method", ["call_later", "call_at"])
def test_a_cancelled_timers_repr_says_cancelled_before_when(loop, method):
    # asyncio's TimerHandle._repr_info puts when= after "cancelled"
    t = schedule(loop, method, my_named_callback)
    t.cancel()
    assert repr(t) == f"<TimerHandle cancelled when={t.when()}>"


@pytest.mark.parametrize("method", SCHEDULERS)
def test_a_handles_type_called_raises_type_error(loop, method):
    # asyncio's wants its arguments; zloopgo's are made by the loop alone
    # (one made by a call had no loop, and cancelling it crashed)
    h = schedule(loop, method, my_named_callback)
    with pytest.raises(TypeError):
        type(h)()
    h.cancel()


@pytest.mark.parametrize(
    "replacement, says",
    [
        ("class Handle:\n    __slots__ = ('_callback',)", "instance layout"),
        ("Handle = 1", "is not a class"),
    ],
)
def test_an_asyncio_handle_of_another_layout_fails_the_import(replacement, says):
    # zloopgo's handles extend asyncio's layout, checked when its types are
    # made: a Python whose asyncio.events.Handle differs gets an ImportError
    body = (
        "import asyncio.events as events\n"
        f"{replacement}\n"
        "events.Handle = Handle\n"
        "import zloopgo\n"
        "try:\n"
        "    zloopgo.new_event_loop()\n"  # the engine is imported with the first loop
        "except ImportError as exc:\n"
        "    print('ImportError:', exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", body], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.startswith("ImportError: zloopgo: asyncio.events.Handle") and says in out, out


# ---- get_context ----------------------------------------------------------


@pytest.mark.skipif(sys.version_info < (3, 12), reason="Handle.get_context() is new in 3.12")
@pytest.mark.parametrize("method", SCHEDULERS)
def test_get_context_explicit(loop, method):
    ctx = contextvars.Context()
    h = schedule(loop, method, my_named_callback, context=ctx)
    assert h.get_context() is ctx
    h.cancel()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="Handle.get_context() is new in 3.12")
@pytest.mark.parametrize("method", SCHEDULERS)
def test_get_context_copied(loop, method):
    token = VAR.set("captured")
    try:
        h = schedule(loop, method, my_named_callback)
    finally:
        VAR.reset(token)
    ctx = h.get_context()
    assert isinstance(ctx, contextvars.Context)
    assert ctx[VAR] == "captured"
    assert ctx is not contextvars.copy_context()
    h.cancel()


@pytest.mark.parametrize("method", SCHEDULERS)
def test_zloopgo_get_context_on_every_version(method):
    with zloop() as lp:
        ctx = contextvars.Context()
        h = schedule(lp, method, my_named_callback, context=ctx)
        assert h.get_context() is ctx
        token = VAR.set("captured")
        try:
            h2 = schedule(lp, method, my_named_callback)
        finally:
            VAR.reset(token)
        assert h2.get_context()[VAR] == "captured"
        h.cancel()
        h2.cancel()


# ---- repr -----------------------------------------------------------------


def _kind(method):
    """The class name repr() starts with: 3.14 returns a _ThreadSafeHandle
    from call_soon_threadsafe (a Handle whose cancel() and run take a lock)."""
    if method in ("call_later", "call_at"):
        return "TimerHandle"
    if method == "call_soon_threadsafe" and hasattr(asyncio.events, "_ThreadSafeHandle"):
        return "_ThreadSafeHandle"
    return "Handle"


@pytest.mark.parametrize("method", SCHEDULERS)
def test_repr_names_the_callback(loop, method):
    h = schedule(loop, method, my_named_callback, 1, "two")
    r = repr(h)
    kind = _kind(method)
    assert r.startswith(f"<{kind} ")
    # arguments are shown up to 3.12; 3.13+ shows them in debug mode only
    assert "my_named_callback(" in r
    assert "cancelled" not in r
    if kind == "TimerHandle":
        assert f"when={h.when()}" in r
    h.cancel()
    r = repr(h)
    assert r.startswith(f"<{kind} ")
    assert "cancelled" in r
    assert "my_named_callback" not in r  # the callback was released


@pytest.mark.parametrize("method", SCHEDULERS)
def test_repr_in_debug_mode_keeps_callback_after_cancel(loop, method):
    # asyncio: Handle.cancel() sets _cancelled, then (debug) saves repr(self)
    # so the saved repr says 'cancelled' and still names the callback.
    loop.set_debug(True)
    h = schedule(loop, method, my_named_callback, 5)
    r = repr(h)
    assert "my_named_callback(5)" in r
    assert "created at " in r
    h.cancel()
    r = repr(h)
    assert "my_named_callback(5)" in r
    assert "cancelled" in r


def test_repr_of_partial_and_method(loop):
    import functools

    class Thing:
        def method(self):
            pass

    h1 = loop.call_soon(functools.partial(my_named_callback, 1), 2)
    h2 = loop.call_soon(Thing().method)
    assert "my_named_callback(" in repr(h1)
    assert "Thing.method(" in repr(h2)
    h1.cancel()
    h2.cancel()


# ---- references are released ----------------------------------------------


@pytest.mark.parametrize("method", SCHEDULERS)
@pytest.mark.parametrize("nargs", [1, 5])
def test_cancel_releases_arguments_without_gc(loop, method, nargs):
    tokens = [Token() for _ in range(nargs)]
    refs = [weakref.ref(t) for t in tokens]
    h = schedule(loop, method, my_named_callback, *tokens)
    del tokens
    assert all(r() is not None for r in refs)  # the queued handle holds them
    h.cancel()
    assert all(r() is None for r in refs)  # released at cancel, no gc needed
    assert h.cancelled()
    run_once(loop)


@pytest.mark.parametrize("method", SCHEDULERS)
def test_cancel_releases_callback(loop, method):
    cb = CallbackObject()
    ref = weakref.ref(cb)
    h = schedule(loop, method, cb)
    del cb
    assert ref() is not None
    h.cancel()
    assert ref() is None
    run_once(loop)


@pytest.mark.parametrize("method", SCHEDULERS)
def test_cancel_releases_arguments_in_a_cycle_with_gc(loop, method):
    token = Token()
    token.self = token  # a cycle: only the collector frees it
    ref = weakref.ref(token)
    h = schedule(loop, method, my_named_callback, token)
    del token
    h.cancel()
    gc.collect()
    assert ref() is None
    run_once(loop)


@pytest.mark.parametrize("method", SCHEDULERS)
@pytest.mark.parametrize("nargs", [1, 5])
def test_run_handle_releases_references(loop, method, nargs):
    cb = CallbackObject()
    cb_ref = weakref.ref(cb)
    tokens = [Token() for _ in range(nargs)]
    refs = [weakref.ref(t) for t in tokens]
    schedule(loop, method, cb, *tokens)  # the handle is not kept
    del tokens
    calls = cb
    del cb
    assert all(r() is not None for r in refs)
    run_once(loop)
    assert calls.calls == 1
    del calls
    assert cb_ref() is None
    assert all(r() is None for r in refs)


def test_run_handle_releases_references_after_an_exception(loop, loop_errors):
    token = Token()
    ref = weakref.ref(token)

    def boom(arg):
        raise ValueError("boom")

    loop.call_soon(boom, token)
    del token
    run_once(loop)
    assert len(loop_errors) == 1
    loop_errors.clear()  # the context holds the handle, and so the argument
    gc.collect()
    assert ref() is None


def test_cancelled_timer_is_released_by_the_loop(loop):
    # A cancelled TimerHandle's callback and args are dropped at cancel();
    # the loop forgets the cancelled timer by the time the deadline passes.
    out = []
    token = Token()
    ref = weakref.ref(token)
    h = loop.call_later(0.005, out.append, token)
    del token
    h.cancel()
    assert ref() is None
    loop.run_until_complete(asyncio.sleep(0.02))
    assert out == []


# ---- handles the caller drops before they run ---------------------------
# zloopgo's ready queue takes over the call of a handle nothing else holds
# (capi/ready.c); none of that may show.


def noop(*args):
    pass


@pytest.mark.parametrize("nargs", [0, 1, 2])
def test_dropped_handles_run_in_order_with_their_arguments(loop, nargs):
    seen = []

    def cb(*args):
        seen.append(args)

    for i in range(300):
        loop.call_soon(cb, *([i] * nargs))
        if i % 7 == 0:
            kept = loop.call_soon(cb, *(["kept"] * nargs))
            kept.cancel()
    run_once(loop)
    assert seen == [tuple([i] * nargs) for i in range(300)]


def test_a_weak_reference_keeps_a_pending_handle(loop):
    ref = weakref.ref(loop.call_soon(noop))
    loop.call_soon(noop)  # zloopgo looks at the first handle again here
    gc.collect()
    assert ref() is not None and not ref().cancelled()
    run_once(loop)
    gc.collect()
    assert ref() is None


def test_a_dropped_handle_that_raises_is_reported_with_a_handle(loop, loop_errors):
    def fails(x):
        raise ValueError(x)

    loop.call_soon(fails, "boom")
    loop.call_soon(noop)
    run_once(loop)
    (ctx,) = loop_errors
    assert type(ctx["exception"]) is ValueError
    assert ctx["handle"]._callback is fails and ctx["handle"]._args == ("boom",)
    assert ctx["message"].startswith("Exception in callback ")
    assert ".fails(" in ctx["message"]  # 3.13+ leave the arguments out outside debug mode
