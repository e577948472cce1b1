"""Handles that go back to their loop's free list, dual-run against
asyncio: what a dropped handle held must be released, and nothing of it
must reach the next handle made from the same memory.

On zloopgo most call_soon handles are freed while their call waits in
the ready queue (the queue's entry takes the call, capi/ready.c), and
such a handle, holding nothing but its loop, takes a short way back to
the free list (zl_handle_dealloc, capi/handle.c). These programs aim at
that way: objects a program stored in asyncio's own slots of the handle
(through asyncio's member descriptors) whose finalizers schedule on the
loop, weak references, cancelled handles, context= and more arguments
than a handle holds inline, with collections on nearly every
allocation. They know the loops only through asyncio's surface."""

import asyncio
import contextvars
import gc
import weakref

VAR = contextvars.ContextVar("VAR", default="unset")

# asyncio's own member descriptor of a Handle slot that a program may
# write through on either loop's handles
REPR_SLOT = asyncio.events.Handle.__dict__["_repr"]


class ScheduleWhenFreed:
    """Stored in a handle's slot: freed with the handle, it schedules a
    callback on the loop from its finalizer."""

    def __init__(self, loop, seen, name):
        self.loop, self.seen, self.name = loop, seen, name

    def __del__(self):
        self.seen.append(("freed", self.name))
        self.loop.call_soon(self.seen.append, ("scheduled by finalizer", self.name))


def run_until(loop, done, limit=200):
    """Runs the loop one iteration at a time until done() (at most limit)."""
    for _ in range(limit):
        if done():
            return
        loop.call_soon(loop.stop)
        loop.run_forever()
    raise AssertionError("not done")


def test_a_finalizer_in_an_asyncio_slot_of_a_dropped_handle_schedules(loop):
    seen = []
    for name in ("a", "b", "c"):
        handle = loop.call_soon(seen.append, ("ran", name))
        REPR_SLOT.__set__(handle, ScheduleWhenFreed(loop, seen, name))
        del handle
    run_until(loop, lambda: len(seen) == 9)
    assert sorted(seen) == sorted(
        [(step, name) for name in "abc" for step in ("ran", "freed", "scheduled by finalizer")]
    )
    for name in "abc":  # each ran before its handle was gone or after; its finalizer's call after
        assert seen.index(("freed", name)) < seen.index(("scheduled by finalizer", name))
    assert [s for s in seen if s[0] == "ran"] == [("ran", n) for n in "abc"]


def test_recycled_handles_carry_nothing_to_the_next(loop, collect_often):
    """Handles made and dropped in every shape, many more than one batch:
    each callback runs once with its own arguments and context, in
    call_soon's order; a cancelled one does not run; a weakly referenced
    one is freed once run."""
    seen = []
    refs = []

    def record(*args):
        seen.append((VAR.get(), args))

    expected = []
    for i in range(600):
        nargs = i % 6  # 0 to 5: more than a handle keeps inline from 4 on
        args = tuple(f"{i}-{k}" for k in range(nargs))
        kind = i % 5
        if kind == 0:
            handle = loop.call_soon(record, *args)
            expected.append(("unset", args))
        elif kind == 1:
            ctx = contextvars.copy_context()
            ctx.run(VAR.set, f"ctx{i}")
            handle = loop.call_soon(record, *args, context=ctx)
            expected.append((f"ctx{i}", args))
        elif kind == 2:
            handle = loop.call_soon(record, *args)
            handle.cancel()
        elif kind == 3:
            handle = loop.call_soon(record, *args)
            refs.append(weakref.ref(handle))
            expected.append(("unset", args))
        else:
            token = VAR.set(f"current{i}")
            handle = loop.call_soon(record, *args)
            VAR.reset(token)
            expected.append((f"current{i}", args))
        del handle
    run_until(loop, lambda: len(seen) >= len(expected))
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == expected
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


def test_a_handle_freed_from_its_own_finalizer_chain(loop, collect_often):
    """A finalizer freed with one handle drops the last reference to
    another handle, whose slot's finalizer schedules again: the frees
    nest inside one another."""
    seen = []

    class DropsAnother:
        def __init__(self, other):
            self.other = other

        def __del__(self):
            seen.append("outer freed")
            self.other = None

    inner = loop.call_soon(seen.append, "inner ran")
    REPR_SLOT.__set__(inner, ScheduleWhenFreed(loop, seen, "inner"))
    outer = loop.call_soon(seen.append, "outer ran")
    REPR_SLOT.__set__(outer, DropsAnother(inner))
    del inner, outer
    run_until(loop, lambda: ("scheduled by finalizer", "inner") in seen)
    ran = sorted(x for x in seen if isinstance(x, str))
    assert ran == ["inner ran", "outer freed", "outer ran"]
    assert ("freed", "inner") in seen
