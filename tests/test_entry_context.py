"""A callback scheduled with context= (what a Task's step and a future's
callback are), its handle dropped, dual-run against asyncio with hostile
Python around it.

On zloopgo such a handle gives its call to its ready-queue entry, and the
entry runs it in its Context directly: entered, called, left, then its
argument, its callback and the context released, the context with a
plain decrement when something else holds it too (capi/ready.c,
run_entry and release_entry; capi/zl.h, zl_call_in_context). These
programs aim at what that way must keep: the callback's changes stay in
its context and nowhere else; a context nothing holds any more is freed
after the run; one the callback kept (a Token holds it) in a cycle is
collected, which needs it on the collector's lists; a context entered
already fails as asyncio's context.run fails, reported with a Handle; the
release's finalizers run in asyncio's order (the argument, the callback,
then the context: a freed Handle's slots, cleared sorted by name) and may
schedule, cancel or close. A collection runs on nearly every allocation
(gc.set_threshold(1)). They know the loops only through asyncio's
surface, and nothing of when a collection runs."""

import contextvars
import gc
import sys
import weakref

VAR = contextvars.ContextVar("VAR", default="unset")


def run_once(loop):
    """One iteration: the callbacks ready now run."""
    loop.call_soon(loop.stop)
    loop.run_forever()


def test_each_callback_changes_only_its_own_context(loop, collect_often):
    contexts = [contextvars.copy_context() for _ in range(4)]
    seen = []

    def step(i):
        seen.append((i, VAR.get()))
        VAR.set(f"set by {i}")

    for i, ctx in enumerate(contexts):
        loop.call_soon(step, i, context=ctx)
        loop.call_soon(step, i + 10, context=ctx)  # the same context again, after
    run_once(loop)
    assert seen == [
        (0, "unset"),
        (10, "set by 0"),
        (1, "unset"),
        (11, "set by 1"),
        (2, "unset"),
        (12, "set by 2"),
        (3, "unset"),
        (13, "set by 3"),
    ]
    assert [ctx[VAR] for ctx in contexts] == ["set by 10", "set by 11", "set by 12", "set by 13"]
    assert VAR.get() == "unset"


def test_a_context_is_freed_after_the_run_once_nothing_holds_it(loop, collect_often):
    ctx = contextvars.copy_context()
    held = contextvars.copy_context()  # held by the program while its call runs
    gone, held_gone = weakref.ref(ctx), weakref.ref(held)
    seen = []
    loop.call_soon(seen.append, "ran", context=ctx)
    loop.call_soon(seen.append, "held", context=held)
    loop.call_soon(seen.append, "next")  # the first two are handed over on zloopgo
    del ctx
    assert gone() is not None  # the queue holds it
    run_once(loop)
    assert seen == ["ran", "held", "next"]
    assert gone() is None  # no collection needed: the entry's reference went
    del held
    assert held_gone() is None


class Holder:
    """What a callback keeps: a Token of VAR, whose value is this holder, so
    that its context and the holder refer to each other (a cycle)."""


def keep_token(kept):
    holder = Holder()
    holder.token = VAR.set(holder)  # the context -> holder -> Token -> the context
    kept.append(weakref.ref(holder))


def test_a_context_the_callback_kept_is_collected_with_its_cycle(loop, collect_often):
    kept = []
    ctx = contextvars.copy_context()
    gone = weakref.ref(ctx)
    loop.call_soon(keep_token, kept, context=ctx)
    del ctx
    run_once(loop)
    # only the cycle holds it now (a collection may already have freed it)
    gc.collect()
    assert gone() is None and kept[0]() is None


def test_a_snapshot_the_callback_kept_is_collected_with_its_cycle(loop, collect_often):
    # without context=: the callback runs in a copy of the context current at
    # call_soon (on zloopgo one the adapter keeps off the collector's lists
    # until something else can reach it)
    kept = []
    for _ in range(3):
        loop.call_soon(keep_token, kept)
    run_once(loop)
    assert len(kept) == 3
    gc.collect()
    assert [ref() for ref in kept] == [None, None, None]


def test_a_context_entered_already_fails_as_context_run_does(loop, loop_errors, caplog):
    outer = contextvars.copy_context()
    seen = []
    # the loop runs inside outer: a callback scheduled in outer cannot enter it
    loop.call_soon(seen.append, "not run", context=outer)
    loop.call_soon(seen.append, "after")
    outer.run(run_once, loop)
    assert seen == ["after"]
    if sys.version_info >= (3, 12):
        # asyncio's call_exception_handler runs the handler in the handle's
        # context too, which fails the same way: the handler is not called,
        # the failure is logged with the callback's error as its cause
        assert loop_errors == []
        logged = [r for r in caplog.records if r.name == "asyncio"]
        assert [r.getMessage().splitlines()[0] for r in logged] == [
            "Unhandled error in exception handler"
        ]
        assert logged[0].exc_info[0] is RuntimeError
        assert type(logged[0].exc_info[1].__context__) is RuntimeError
        return
    assert len(loop_errors) == 1
    error = loop_errors[0]
    assert type(error["exception"]) is RuntimeError
    assert str(error["exception"]).startswith("cannot enter context:")
    assert str(error["exception"]).endswith("is already entered")
    assert error["message"].startswith("Exception in callback ")
    assert error["handle"]._callback == seen.append
    assert error["handle"]._args == ("not run",)


class OnFree:
    """Records its calls, and when freed calls `action` and records that
    (with the name of what the action raised, if it did)."""

    def __init__(self, seen, name, action=None):
        self.seen, self.name, self.action = seen, name, action

    def __call__(self, *args):
        self.seen.append(("called", self.name))

    def __del__(self):
        raised = None
        if self.action is not None:
            try:
                self.action()
            except RuntimeError as exc:
                raised = type(exc).__name__
        self.seen.append(("freed", self.name, raised))


def test_release_order_and_finalizers_that_schedule_and_cancel(loop, collect_often):
    seen = []
    later = loop.call_soon(seen.append, "cancelled, never run")
    ctx = contextvars.copy_context()
    gone = weakref.ref(ctx)

    def schedule():
        loop.call_soon(seen.append, "scheduled")

    first = loop.call_soon(seen.append, "first")
    callback = OnFree(seen, "callback", later.cancel)
    argument = OnFree(seen, "argument", schedule)
    first.cancel()  # a kept handle, cancelled before it runs
    del first
    later.cancel()
    loop.call_soon(callback, argument, context=ctx)
    del callback, argument, ctx
    loop.call_soon(seen.append, "next")
    run_once(loop)
    assert gone() is None
    run_once(loop)
    assert seen == [
        ("called", "callback"),
        # asyncio's Handle, freed, clears its slots sorted by name: _args,
        # _callback, _context
        ("freed", "argument", None),
        ("freed", "callback", None),
        "next",
        "scheduled",
    ]


def test_an_argument_whose_finalizer_closes_the_running_loop(loop, collect_often):
    seen = []
    ctx = contextvars.copy_context()
    argument = OnFree(seen, "argument", loop.close)
    loop.call_soon(len, [argument], context=ctx)
    del argument
    loop.call_soon(seen.append, "next")
    run_once(loop)
    assert seen == [("freed", "argument", "RuntimeError"), "next"]
    assert not loop.is_closed()


def test_a_raising_callback_in_its_context_is_reported_with_a_handle(loop, loop_errors):
    ctx = contextvars.copy_context()

    def fail(x):
        VAR.set("failed")
        raise ValueError(x)

    loop.call_soon(fail, 1, context=ctx)
    loop.call_soon(fail, 2, context=ctx)
    run_once(loop)
    assert [str(e["exception"]) for e in loop_errors] == ["1", "2"]
    assert [e["handle"]._args for e in loop_errors] == [(1,), (2,)]
    assert all(e["handle"]._context is ctx for e in loop_errors)
    assert ctx[VAR] == "failed"


def test_closed_and_debug_checks_of_call_soon(loop_factory):
    lp = loop_factory()
    try:
        lp.set_debug(True)
        h = lp.call_soon(lambda: None)
        assert h._source_traceback is not None
        lp.set_debug(False)
        h = lp.call_soon(lambda: None)
        assert h._source_traceback is None
    finally:
        lp.close()
    try:
        lp.call_soon(lambda: None)
    except RuntimeError as exc:
        assert str(exc) == "Event loop is closed"
    else:
        raise AssertionError("call_soon on a closed loop did not raise")
