"""A call_soon handle that its caller drops, dual-run against asyncio, with
hostile Python around it.

On zloopgo, a handle that nothing but the ready queue holds when the loop
next looks at it (the next call_soon, the next batch, a collection) gives
its call to its queue entry and goes straight back to the loop's free list
(zl_handle_hand_over, capi/handle.c; capi/pending.c says when). These
programs aim at that way and at what must keep a handle out of it: a
handle kept, or only weakly referenced, and cancelled from another
callback; arguments whose finalizers schedule, cancel or close; weak
reference callbacks; a loop subclass whose call_soon keeps or drops what
it returns; a handle read after its run; where tracemalloc says a
handle made from the free list was made. A collection runs on nearly every
allocation (gc.set_threshold(1)), and gc.collect() between steps. They know
the loops only through asyncio's surface."""

import asyncio
import contextvars
import gc
import sys
import tracemalloc
import weakref

VAR = contextvars.ContextVar("VAR", default="unset")

# asyncio's own member descriptor of a Handle slot that a program may
# write through on either loop's handles
REPR_SLOT = asyncio.events.Handle.__dict__["_repr"]


def run_once(loop):
    """One iteration: the callbacks ready now run."""
    loop.call_soon(loop.stop)
    loop.run_forever()


def run_until(loop, done, limit=200):
    for _ in range(limit):
        if done():
            return
        run_once(loop)
        gc.collect()
    raise AssertionError("not done")


class OnFree:
    """An argument whose finalizer calls `action` (then records it)."""

    def __init__(self, seen, name, action):
        self.seen, self.name, self.action = seen, name, action

    def __repr__(self):
        return f"OnFree({self.name})"

    def __del__(self):
        try:
            result = self.action()
        except RuntimeError as exc:  # recorded: a finalizer's failure is not raised
            result = (type(exc).__name__, str(exc))
        self.seen.append(("freed", self.name, result))


def test_a_kept_handle_cancelled_from_another_callback_does_not_run(loop, collect_often):
    seen = []
    kept = loop.call_soon(seen.append, "kept")
    weak_only = weakref.ref(loop.call_soon(seen.append, "weakly held"))
    for i in range(3):  # dropped handles in between, handed over on zloopgo
        loop.call_soon(seen.append, i)
        gc.collect()
    # the weakly held one is still queued, so still there, and still itself
    assert weak_only() is not None
    assert weak_only()._callback == seen.append and weak_only()._args == ("weakly held",)
    loop.call_soon(lambda: seen.append(("cancelled", kept.cancel(), kept.cancelled())))
    # it runs after the cancelling callback only in a later batch: cancel
    # the weakly held one from a callback scheduled before it runs
    first = loop.call_soon(lambda: (weak_only() is not None) and weak_only().cancel())
    del first
    run_once(loop)
    run_once(loop)
    assert seen == ["kept", "weakly held", 0, 1, 2, ("cancelled", None, True)]
    assert kept.cancelled() and kept._callback is None and kept._args is None


def test_cancel_from_a_later_callback_of_the_same_batch(loop, collect_often):
    seen = []
    handles = [loop.call_soon(seen.append, i) for i in range(6)]
    for h in handles[1::2]:
        loop.call_soon(h.cancel)  # cancelled after it ran: no effect on the run
    victims = [loop.call_soon(seen.append, ("victim", i)) for i in range(3)]
    loop.call_soon(seen.append, "end")
    canceller = loop.call_soon(lambda: [v.cancel() for v in victims[::2]])
    del handles, canceller
    gc.collect()
    run_once(loop)
    # the canceller ran after the victims (scheduled after them)
    assert seen == [0, 1, 2, 3, 4, 5, ("victim", 0), ("victim", 1), ("victim", 2), "end"]
    assert [v.cancelled() for v in victims] == [True, False, True]


def test_argument_finalizers_schedule_cancel_and_close(loop, collect_often):
    """The argument of a dropped handle is released after its call ran
    (asyncio drops the handle then): its finalizer schedules, cancels a
    kept handle, and tries to close the running loop."""
    seen = []
    victim = loop.call_soon(seen.append, "victim ran")  # runs first: its cancel comes too late
    late_victim_box = []

    def cancel_late_victim():
        return late_victim_box[0].cancel()

    def schedule():
        return type(loop.call_soon(seen.append, "scheduled by finalizer")).__name__

    def note_ran(arg):
        seen.append(("ran", arg.name))

    for name, action in (
        ("schedules", schedule),
        ("cancels", cancel_late_victim),
        ("closes", loop.close),
        ("cancels the one that ran", victim.cancel),
    ):
        loop.call_soon(note_ran, OnFree(seen, name, action))
    late_victim_box.append(loop.call_soon(seen.append, "late victim ran"))
    gc.collect()
    run_until(loop, lambda: "scheduled by finalizer" in seen)
    run_once(loop)
    names = [x[1] for x in seen if isinstance(x, tuple) and x[0] == "freed"]
    assert names == ["schedules", "cancels", "closes", "cancels the one that ran"]
    results = {x[1]: x[2] for x in seen if isinstance(x, tuple) and x[0] == "freed"}
    assert results["schedules"] == "Handle"
    assert results["cancels"] is None
    assert results["closes"] == ("RuntimeError", "Cannot close a running event loop")
    assert results["cancels the one that ran"] is None
    # the late victim was queued after the arguments' calls, so the
    # finalizer that cancelled it ran before it
    assert "late victim ran" not in seen
    assert seen.index("victim ran") == 0
    assert not loop.is_closed()


def test_weakref_callbacks_of_queued_handles(loop, collect_often):
    """A weakly referenced handle stays queued (and alive) until it ran;
    its weak reference's callback, which schedules, fires once it is
    dropped after its run, on both loops in the same order."""
    seen = []
    refs = []

    def on_gone(ref, i=None):
        seen.append(("gone", refs.index(ref)))
        loop.call_soon(seen.append, ("after gone", refs.index(ref)))

    for i in range(4):
        refs.append(weakref.ref(loop.call_soon(seen.append, ("ran", i)), on_gone))
        loop.call_soon(seen.append, ("dropped", i))
    assert [r()._args for r in refs] == [(("ran", i),) for i in range(4)]
    gc.collect()
    assert [r()._args for r in refs] == [(("ran", i),) for i in range(4)]
    run_until(loop, lambda: ("after gone", 3) in seen)
    ran = [x for x in seen if x[0] in ("ran", "dropped")]
    assert ran == [(k, i) for i in range(4) for k in ("ran", "dropped")]
    assert sorted(x for x in seen if x[0] == "gone") == [("gone", i) for i in range(4)]
    for i in range(4):
        assert seen.index(("ran", i)) < seen.index(("gone", i)) < seen.index(("after gone", i))


def test_a_weakref_made_and_dropped_before_the_next_call_soon(loop, collect_often):
    """A weak reference made and dropped again while the handle waits:
    the handle is then alone, and its call must still run once."""
    seen = []
    kept_refs = []
    for i in range(5):
        h = loop.call_soon(seen.append, i)
        r = weakref.ref(h)
        if i % 2:
            kept_refs.append(r)
        del r
        del h
    assert [r()._args for r in kept_refs] == [(1,), (3,)]
    run_once(loop)
    assert seen == [0, 1, 2, 3, 4]


def test_a_loop_subclass_overriding_call_soon(loop_factory, collect_often):
    probe = loop_factory()
    base = type(probe)
    probe.close()
    kept = []

    class Sub(base):
        def call_soon(self, callback, *args, context=None):
            handle = super().call_soon(callback, *args, context=context)
            if len(args) == 1 and isinstance(args[0], int) and args[0] % 3 == 0:
                kept.append(handle)  # every third one kept
            return handle

    seen = []
    lp = Sub()
    try:
        for i in range(12):
            ctx = contextvars.copy_context()
            ctx.run(VAR.set, f"v{i}")
            lp.call_soon(lambda i=i: seen.append((i, VAR.get())), context=ctx)
            lp.call_soon(seen.append, i)
        kept[1].cancel()  # argument 3
        gc.collect()
        run_once(lp)
        expected = []
        for i in range(12):
            expected.append((i, f"v{i}"))
            if i != 3:
                expected.append(i)
        assert seen == expected
        assert [h.cancelled() for h in kept] == [False, True, False, False]
        assert [h._args for h in kept] == [(0,), None, (6,), (9,)]
        assert all(isinstance(h, asyncio.Handle) for h in kept)
    finally:
        lp.close()


def test_a_handle_kept_past_its_run(loop, collect_often):
    seen = []
    ctx = contextvars.copy_context()
    handles = []
    for i in range(3):
        handles.append(loop.call_soon(seen.append, i, context=ctx))
        loop.call_soon(seen.append, ("dropped", i))
    run_once(loop)
    gc.collect()
    assert seen == [0, ("dropped", 0), 1, ("dropped", 1), 2, ("dropped", 2)]
    h = handles[1]
    assert h._callback == seen.append and h._args == (1,)
    assert h._context is ctx
    assert not h.cancelled()
    assert "append" in repr(h)
    h.cancel()
    assert h.cancelled() and h._callback is None and h._args is None
    assert "cancelled" in repr(h)
    # run again by hand, as a program may: asyncio's _run of a kept handle
    handles[0]._run()
    assert seen[-1] == 0


def test_reentry_from_a_callback_that_schedules_and_drops(loop, collect_often):
    """Callbacks that schedule and drop handles while the batch runs, one
    of them cancelling the handle made just before (the last one made,
    which the loop has not yet looked at)."""
    seen = []

    def step(i):
        seen.append(("step", i))
        if i < 20:
            nxt = loop.call_soon(step, i + 1)
            if i % 4 == 3:
                extra = loop.call_soon(seen.append, ("extra", i))
                extra.cancel()
            del nxt
        gc.collect()

    loop.call_soon(step, 0)
    run_until(loop, lambda: ("step", 20) in seen)
    assert seen == [("step", i) for i in range(21)]


def test_hand_over_when_the_free_list_is_full(loop, collect_often):
    """Thousands of handles kept past their run and dropped at once fill
    the loop's free list (4096 on zloopgo) just before the last handle made
    is looked at: that one is handed over, and its dealloc's short way
    finds no room and frees it; what comes after still runs, in order."""
    seen = []
    kept = [loop.call_soon(seen.append, ("kept", i)) for i in range(5000)]
    for h in kept[::2]:
        h.cancel()
    run_once(loop)
    loop.call_soon(seen.append, "dropped")  # the last made: not yet looked at
    del kept, h  # their frees fill the free list
    for i in range(3):
        loop.call_soon(seen.append, ("after", i))
    gc.collect()
    run_once(loop)
    assert seen == [("kept", i) for i in range(1, 5000, 2)] + ["dropped"] + [
        ("after", i) for i in range(3)
    ]


def test_a_cancelled_handle_dropped_lets_go_of_its_argument_once(loop):
    """A handle with one argument, cancelled (which lets go of the
    argument) and then dropped while it is the last one made: on zloopgo
    the next call_soon hands it over, and its entry must take no argument
    from it (the hand-over reads the first inline argument, which cancel()
    leaves NULL). The argument, still held here, keeps its count."""
    seen = []
    arg = ["the argument"]
    before = sys.getrefcount(arg)
    h = loop.call_soon(seen.append, arg)
    h.cancel()
    del h
    loop.call_soon(seen.append, "next")  # looks at the cancelled one
    run_once(loop)
    run_once(loop)
    assert seen == ["next"]
    assert sys.getrefcount(arg) == before


def make_here(loop, callback, arg):
    """A handle made here, and the line that made it."""
    return loop.call_soon(callback, arg), sys._getframe().f_lineno


def make_there(loop, callback, arg):
    """A handle made from another line than make_here's."""
    return loop.call_soon(callback, arg), sys._getframe().f_lineno


def test_tracemalloc_names_where_each_reused_handle_was_made(loop):
    """With tracemalloc tracing, handles made from two lines in turn,
    dropped and run, so that the next ones reuse their memory (zloopgo's
    free list): the traceback of each handle kept names the line that made
    it, not where an earlier handle in the same memory was made."""
    seen = []
    makers = [make_here, make_there]
    tracemalloc.start(10)
    try:
        kept = []
        for turn in range(6):
            for _ in range(3):  # dropped: handed over, run, back to the free list
                makers[turn % 2](loop, seen.append, turn)
            run_once(loop)
            kept.append(makers[(turn + 1) % 2](loop, seen.append, "kept"))
            run_once(loop)
        wrong = []
        for handle, line in kept:
            traceback = tracemalloc.get_object_traceback(handle)
            lines = [f.lineno for f in traceback or () if f.filename == __file__]
            if not lines or lines[-1] != line:  # oldest frame first
                wrong.append((line, lines))
    finally:
        tracemalloc.stop()
    assert wrong == []
    assert seen.count("kept") == 6
