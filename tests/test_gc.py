"""Garbage collection: handles, timers and loops are released, and the
reference cycles a loop and its callbacks form are collectable. Run on
stock asyncio and on zloopgo."""

import asyncio
import gc
import os
import sysconfig
import warnings
import weakref


class Holder:
    """An object holding the loop, whose bound method is a callback."""

    def __init__(self, loop):
        self.loop = loop
        self.handles = []

    def method(self, *args):
        pass


class Arg:
    """A weak-referenceable argument."""


def run_one_iteration(loop):
    loop.call_soon(loop.stop)
    loop.run_forever()


def collect():
    for _ in range(3):
        gc.collect()


def collect_unclosed():
    """collect(), quiet about the unclosed loop a test left for the collector."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        collect()


def test_ready_handle_cycle_collectable(loop_factory):
    # loop -> ready queue -> handle -> bound method -> holder -> loop
    lp = loop_factory()
    holder = Holder(lp)
    holder.handles.append(lp.call_soon(holder.method, Arg()))
    wr_holder, wr_loop = weakref.ref(holder), weakref.ref(lp)
    wr_handle = weakref.ref(holder.handles[0])
    del holder, lp
    collect_unclosed()
    assert wr_holder() is None
    assert wr_handle() is None
    assert wr_loop() is None


def test_timer_handle_cycle_collectable(loop_factory):
    lp = loop_factory()
    holder = Holder(lp)
    holder.handles.append(lp.call_later(3600, holder.method))
    holder.handles.append(lp.call_at(lp.time() + 7200, holder.method))
    lp.run_until_complete(asyncio.sleep(0))  # the engine now holds the timers
    wr_holder, wr_loop = weakref.ref(holder), weakref.ref(lp)
    del holder, lp
    collect_unclosed()
    assert wr_holder() is None
    assert wr_loop() is None


def test_reader_handle_cycle_collectable(loop_factory):
    r, w = os.pipe()
    try:
        lp = loop_factory()
        holder = Holder(lp)
        lp.add_reader(r, holder.method)
        lp.add_writer(w, holder.method)
        wr_holder, wr_loop = weakref.ref(holder), weakref.ref(lp)
        del holder, lp
        collect_unclosed()
        assert wr_holder() is None
        assert wr_loop() is None
    finally:
        os.close(r)
        os.close(w)


def test_closed_loop_collectable(loop_factory):
    lp = loop_factory()

    async def main():
        await asyncio.sleep(0.001)
        return asyncio.get_running_loop()

    assert lp.run_until_complete(main()) is lp
    holder = Holder(lp)
    lp.call_soon(holder.method)
    lp.call_later(100, holder.method)
    lp.close()
    wr_loop, wr_holder = weakref.ref(lp), weakref.ref(holder)
    del lp, holder
    collect()
    assert wr_loop() is None
    assert wr_holder() is None


def test_closing_releases_pending_callbacks(loop):
    # No cycle through the callbacks: closing alone must drop them.
    args = [Arg() for _ in range(3)]
    refs = [weakref.ref(a) for a in args]
    loop.call_soon(print, args[0])
    loop.call_later(100, print, args[1])
    loop.call_at(loop.time() + 100, print, args[2])
    del args
    loop.close()
    assert [r() for r in refs] == [None, None, None]


def test_cancelled_timer_releases_arguments_at_once(loop):
    arg = Arg()
    wr = weakref.ref(arg)
    h = loop.call_later(3600, print, arg)
    del arg
    assert wr() is not None  # held by the scheduled handle
    h.cancel()
    assert wr() is None  # released by cancel(), before any iteration
    assert h.cancelled()


def test_cancelled_timers_released_after_one_iteration(loop):
    args = [Arg() for _ in range(1000)]
    arg_refs = [weakref.ref(a) for a in args]
    handles = [loop.call_later(3600 + i, print, a) for i, a in enumerate(args)]
    run_one_iteration(loop)  # the timers reach the engine's heap
    handle_refs = [weakref.ref(h) for h in handles]
    for h in handles:
        h.cancel()
    del args, handles, h
    run_one_iteration(loop)
    assert all(r() is None for r in arg_refs)
    assert all(r() is None for r in handle_refs)


def test_cancelled_timers_before_first_iteration_released(loop):
    handles = [loop.call_later(3600, print) for _ in range(10)]
    refs = [weakref.ref(h) for h in handles]
    for h in handles:
        h.cancel()
    del handles, h
    run_one_iteration(loop)
    assert all(r() is None for r in refs)


def test_fired_timer_and_handle_released(loop):
    arg = Arg()
    wr_arg = weakref.ref(arg)
    got = []
    h = loop.call_later(0.001, got.append, arg)
    s = loop.call_soon(got.append, arg)
    wr_h, wr_s = weakref.ref(h), weakref.ref(s)
    del arg, h, s
    loop.run_until_complete(asyncio.sleep(0.01))
    assert len(got) == 2
    del got
    assert wr_h() is None and wr_s() is None
    assert wr_arg() is None


def test_removed_reader_releases_callback(loop):
    r, w = os.pipe()
    try:
        arg = Arg()
        wr = weakref.ref(arg)
        loop.add_reader(r, print, arg)
        del arg
        assert wr() is not None
        assert loop.remove_reader(r)
        assert wr() is None
    finally:
        os.close(r)
        os.close(w)


def test_finished_tasks_released(loop):
    async def job(a):
        await asyncio.sleep(0)
        return type(a).__name__

    async def main(a):
        return await asyncio.gather(*(job(a) for _ in range(10)))

    arg = Arg()
    wr = weakref.ref(arg)
    assert loop.run_until_complete(main(arg)) == ["Arg"] * 10
    del arg
    collect()
    assert wr() is None


def test_dropped_loop_with_many_pending_callbacks_collectable(loop_factory):
    # Callbacks nobody else references, each in a cycle through the loop.
    lp = loop_factory()
    holders = [Holder(lp) for _ in range(200)]
    for h in holders:
        lp.call_soon(h.method, Arg())
        lp.call_later(3600, h.method)
    refs = [weakref.ref(h) for h in holders] + [weakref.ref(lp)]
    del holders, h, lp
    collect_unclosed()
    assert [r() for r in refs] == [None] * len(refs)


def test_pending_handle_held_only_weakly_collectable(loop_factory):
    lp = loop_factory()
    holder = Holder(lp)
    wr_handle = weakref.ref(lp.call_soon(holder.method))
    lp.call_soon(print)  # the loop looks at the first handle again
    wr_holder, wr_loop = weakref.ref(holder), weakref.ref(lp)
    del holder, lp
    collect_unclosed()
    assert (wr_handle(), wr_holder(), wr_loop()) == (None, None, None)


def test_handle_kept_by_its_callbacks_owner_collectable_after_it_ran(loop):
    # loop alive; holder -> handle -> bound method -> holder
    holder = Holder(loop)
    holder.handles.append(loop.call_soon(holder.method))
    holder.handles.append(loop.call_later(0, holder.method))
    loop.run_until_complete(asyncio.sleep(0.01))
    wr = weakref.ref(holder)
    del holder
    collect()
    assert wr() is None


def test_cleared_gc_callbacks_do_not_break_collection(loop_factory):
    # Without zloopgo's collector hook a handle kept elsewhere may stay
    # alive longer; nothing is freed while in use.
    saved = gc.callbacks[:]
    gc.callbacks.clear()
    try:
        lp = loop_factory()
        holder = Holder(lp)
        holder.handles.append(lp.call_soon(holder.method, Arg()))
        collect()
        ran = []
        lp.call_soon(ran.append, 1)
        lp.run_until_complete(asyncio.sleep(0))
        assert ran == [1]
        assert holder.handles[0].cancelled() is False
        lp.close()
    finally:
        gc.callbacks[:] = saved


# A free-threaded build tracks every handle from the moment it is made
# (capi/pending.c says why); a GIL build keeps pending ones off the lists.
PENDING_TRACKED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def test_zloopgo_pending_handles_stay_off_the_collectors_lists():
    import zloopgo

    lp = zloopgo.new_event_loop()
    try:
        before = len(gc.get_objects())
        for _ in range(10_000):
            lp.call_soon(print)
        lp.call_later(3600, print)
        added = len(gc.get_objects()) - before
        # not one per handle: each was alone when the next was made, so its
        # call moved into its queue entry and the handle went (tracked or not)
        assert added < 100, added
        kept = lp.call_soon(print)
        assert gc.is_tracked(kept) is PENDING_TRACKED  # not looked at yet
        timer = lp.call_later(3600, print)
        assert gc.is_tracked(timer) is PENDING_TRACKED
        lp.call_soon(print)
        assert gc.is_tracked(kept)  # kept by the caller: tracked
    finally:
        lp.close()


def test_zloopgo_handle_scheduled_by_a_settled_lookup_is_not_looked_at_once_freed():
    """A lookup's completion is settled before the batch runs, and the future
    schedules its callback then: the batch runs that handle and frees it. The
    loop used to look at it again afterwards as "the last handle made", found
    the freed handle (kept for reuse) referenced "from elsewhere" and put it
    on the collector's lists; the next call_soon then returned a tracked
    handle, and a collection could meet a dead object (the crash on 3.15)."""
    import socket

    import zloopgo

    lp = zloopgo.new_event_loop()
    r, w = socket.socketpair()
    seen = []
    finished = lp.create_future()
    was_enabled = gc.isenabled()
    gc.disable()  # a collection would meet the freed handle on the old code

    def probe():
        r.recv(1)
        seen.append(gc.is_tracked(lp.call_soon(print)))
        lp.remove_reader(r.fileno())
        finished.set_result(None)

    async def look_up_then_wake_probe():
        flags = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
        await lp.getnameinfo(("127.0.0.1", 80), flags)
        w.send(b"x")  # no handle made: the lookup's stays the last one
        await finished

    try:
        lp.add_reader(r.fileno(), probe)
        lp.run_until_complete(look_up_then_wake_probe())
        assert seen == [PENDING_TRACKED]  # made as every call_soon's handle
    finally:
        if was_enabled:
            gc.enable()
        lp.close()
        r.close()
        w.close()


CLEARED_HANDLE_SCRIPT = """
import gc, re, weakref

# Where the collector runs the callback of a weak reference that a
# finalizer of a garbage cycle made to an object of that cycle (3.10 to
# 3.13.0; not 3.13.15, whose collector clears such references first, as
# 3.14's does), a Python program reaches a handle the collector cleared
# (tp_clear): that callback holds the handle weakly, and runs while the
# collector clears the cycle, after the handle was cleared.
outcomes = []

class Weak:
    pass

# The premise, without asyncio, in the same shape: does this collector run
# such a callback, and what does it find of a slotted object of the cycle
# (as asyncio's Handle is) made before it?
probe = []

class Slotted:
    __slots__ = ("x", "__weakref__")

class Probe:
    def __del__(self):
        def on_collected(ref, held=weakref.ref(self.held)):
            h = held()
            probe.append("freed" if h is None else "intact" if hasattr(h, "x") else "cleared")
        self.ref = weakref.ref(self.weak, on_collected)

gc.collect()
gc.disable()
held = Slotted()
held.x = 1
p, w = Probe(), Weak()
p.weak, p.held, w.cycle = w, held, p
del held, p, w
gc.collect()
gc.enable()
print("weak reference callbacks in a collection:", probe[0] if probe else "not run")

def outcome(what, call):
    try:
        result = call()
    except BaseException as exc:
        chain = []
        while exc is not None:
            named = re.search(r"attribute '(\\w+)'", str(exc))
            chain.append(f"{type(exc).__name__} {named.group(1) if named else str(exc)}")
            exc = exc.__context__
        outcomes.append(f"{what}: " + " from ".join(chain))
    else:
        outcomes.append(f"{what}: {type(result).__name__}")

class Finalized:
    def __del__(self):
        def on_collected(ref, handle=weakref.ref(self.handle), what=self.what):
            h = handle()
            if h is None:
                outcomes.append(f"{what}: freed")
                return
            # the methods asyncio's class of this version has
            kind = asyncio.TimerHandle if what == "timer" else asyncio.Handle
            for name in ("_run", "cancel", "cancelled", "get_context", "when"):
                if hasattr(kind, name):
                    outcome(f"{what} {name}()", getattr(h, name))
            outcome(f"{what} repr", lambda: repr(h))
            for name in ("_callback", "_args", "_loop", "_context", "_when", "_scheduled"):
                if hasattr(kind, name):
                    outcome(f"{what} {name}", lambda: getattr(h, name))
        self.ref = weakref.ref(self.weak, on_collected)

loop = factory()
ran = []
handles = {
    "handle": loop.call_soon(ran.append, 1),
    "timer": loop.call_later(0, ran.append, 2),
}
loop.run_until_complete(asyncio.sleep(0.01))
gc.collect()
gc.disable()
for what in list(handles):
    finalized, weak = Finalized(), Weak()
    # the weak object is dropped before the handle when the finalized
    # object's attributes are cleared: the order of insertion
    finalized.weak, finalized.handle, finalized.what = weak, handles.pop(what), what
    weak.cycle = finalized
    del finalized, weak
    gc.collect()
gc.enable()
loop.close()
print("ran", sorted(ran))
for line in outcomes:
    print(line)
print("done")
"""


def test_a_handle_the_collector_cleared_reads_as_asyncios():
    # The collector clears a Handle (tp_clear) that a weak reference's
    # callback can still reach where the collector runs that callback
    # (CLEARED_HANDLE_SCRIPT; its probe, without asyncio, says whether
    # this Python's does and what it finds: pyenv's 3.10.13 to 3.13.0 run
    # it on a cleared object, Debian's 3.13.15, 3.14.8 and 3.15.2 run
    # none).
    # asyncio's is cleared too: every read of its slots raises
    # AttributeError (_run's of _context, then of _callback in its except
    # block). zloopgo's cancel() dereferenced the cleared loop (a crash)
    # and _run() raised RuntimeError("the handle was cleared").
    from helpers import run_script

    runs = {name: run_script(name, CLEARED_HANDLE_SCRIPT) for name in ("asyncio", "zloopgo")}
    for name, proc in runs.items():
        assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    want, got = (runs[name].stdout.splitlines() for name in ("asyncio", "zloopgo"))
    assert got == want
    premise = want[0].removeprefix("weak reference callbacks in a collection: ")
    if premise == "cleared":  # the callback finds what the collector cleared
        assert "handle _run(): AttributeError _callback from AttributeError _context" in want
        assert "timer cancel(): AttributeError _cancelled" in want
    elif premise == "not run":
        # this collector clears such weak references first: no program
        # reaches the cleared handles, the callbacks never run
        assert want[1:] == ["ran [1, 2]", "done"]
    elif premise == "intact":  # the callback runs before the collector clears
        assert "handle cancelled(): bool" in want and "timer cancelled(): bool" in want
    else:
        assert premise == "freed", want[0]
        assert "handle: freed" in want and "timer: freed" in want


LOOP_FREED_BY_THE_HOOK_SCRIPT = """
import gc, weakref
from zloopgo._engine import LoopCore

kept = factory()  # the oldest of the live loops: the walk reaches it last
log = []

class Plain(LoopCore):
    pass

class Finalizing(LoopCore):
    def __del__(self):
        log.append("finalized")
        # a loop made (and left to the collector) while the hook walks
        other = Plain()
        other.call_soon(print)

class CollectsWhenCleared:
    # held in a loop's __dict__: its __del__ runs while that loop is
    # deallocated, its count 0, and still on the list of live loops
    def __del__(self):
        log.append("collected while a loop is deallocated")
        gc.collect()

gc.collect()
refs = []
for cls in (Plain, Finalizing, Plain):
    # a loop whose last call_soon's handle, waiting alone in its ready
    # queue, holds the only reference left to it: the hook's look at that
    # handle hands its call over and drops that reference, the loop's last
    lp = cls()
    lp.call_soon(print)
    refs.append(weakref.ref(lp))
    del lp
gc.collect()
gc.collect()
print("dropped loops freed", [r() is None for r in refs])

lp = Plain()
lp.sink = CollectsWhenCleared()
del lp
kept.call_soon(log.append, "kept loop runs")
kept.run_until_complete(asyncio.sleep(0))
kept.close()
print(log)
print("done")
"""


def test_zloopgo_loop_freed_by_the_collector_hook_ends_its_walk_safely():
    """A loop whose only reference left is its pending handle's: the hook
    run before each collection (capi/pending.c) hands that handle over, the
    loop is deallocated, and the walk over the live loops read the next
    one from the freed loop (a crash with freed memory overwritten, glibc's
    MALLOC_PERTURB_ with PYTHONMALLOC=malloc; ASan's heap-use-after-free
    under scripts/sanitize). The loop whose dealloc collects while it is
    still listed guards the fix's order: its count is 0 then, so holding
    it (an increment and a decrement) would deallocate it twice."""
    from helpers import check, run_script

    # freed memory overwritten (glibc); a free-threaded build has no hook,
    # and its allocator is mimalloc alone (it refuses PYTHONMALLOC=malloc)
    env = {"MALLOC_PERTURB_": "85", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}
    if not PENDING_TRACKED:
        env["PYTHONMALLOC"] = "malloc"
    proc = run_script("zloopgo", LOOP_FREED_BY_THE_HOOK_SCRIPT, env=env)
    check(
        proc,
        "dropped loops freed [True, True, True]",
        "['finalized', 'collected while a loop is deallocated', 'kept loop runs']",
        "done",
    )
