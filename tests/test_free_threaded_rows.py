"""The rows of docs/architecture.md's "Free-threaded builds" table that are
built: per-loop ownership enforced, the inbox other threads queue into
(call_soon_threadsafe), the handle free lists kept by the loop's own
thread; the collector hook's absence and context snapshots (the block
after them); and (the block at the end) transports' native writes and
slot reads, the class caches and the module's set_* functions. Each test
runs on every build; what it asserts depends on the build only where
zloopgo differs on purpose (a build that declares the GIL unused,
scripts/gil-off's alone so far, refuses a loop method called off the
running loop's thread, which asyncio, a GIL build of zloopgo and a
free-threaded one with the GIL on let race: docs/compatibility.md).

scripts/gil-off runs this file with the GIL off, on a test-only build of
the engine that declares it does not need it; the first test checks that
the GIL is off there, and on elsewhere. It knows nothing of how the
adapter queues or checks: only what a program sees."""

import asyncio
import gc
import socket
import sys
import sysconfig
import threading

import pytest

import zloopgo
from zloopgo import _tls

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _gil_off_build():
    from zloopgo import _engine

    return getattr(_engine, "GIL_OFF_TEST_BUILD", 0) == 1


# where the engine declares the GIL unused, it enforces per-loop ownership
OWNERSHIP_ENFORCED = FREE_THREADED and _gil_off_build()
FOREIGN = "Non-thread-safe operation invoked on an event loop other than the current one"
THREADSAFE_HANDLE = hasattr(asyncio.events, "_ThreadSafeHandle")
# How long a worker thread may take before the test calls it hung: a guard,
# not a measure. Generous, since scripts/tsan runs these tests on an
# instrumented interpreter 5-15 times slower, where a collection stops
# every thread (at 60 s, two tests' threads outlived their joins there on
# a loaded machine and then finished).
HANG_GUARD = 600


def test_the_gil_is_as_the_engine_declares():
    # scripts/gil-off's build (GIL_OFF_TEST_BUILD) keeps the GIL off on a
    # free-threaded interpreter: the rows below then ran without it, not
    # with it turned on by the engine (or anything else) loading; any other
    # build turns it on, or runs where there is one
    loop = zloopgo.new_event_loop()
    loop.close()
    expect_off = _gil_off_build()
    enabled = getattr(sys, "_is_gil_enabled", lambda: True)()
    assert enabled is not expect_off


def _run_in_thread(fn):
    """fn() on a thread of its own: what it returned or raised."""
    out = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    t.join(HANG_GUARD)
    assert not t.is_alive()
    return out


def _run_in_threads(fn, n):
    """fn(0), ..., fn(n - 1), each on a thread of its own, all at once:
    what each returned or raised, in that order (as _run_in_thread)."""
    outs = [None] * n

    def body(i):
        outs[i] = _run_in_thread(lambda: fn(i))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD)
        assert not t.is_alive()
    return outs


def test_threadsafe_calls_from_many_threads_all_run_in_each_thread_order():
    loop = zloopgo.new_event_loop()
    threads, per_thread = 8, 3000
    seen = [[] for _ in range(threads)]
    total = threads * per_thread
    ran = 0
    done = loop.create_future()
    go = threading.Event()

    def record(t, i):
        nonlocal ran
        seen[t].append(i)
        ran += 1
        if ran % 997 == 0:
            gc.collect()  # the loop collects while other threads queue
        if ran == total:
            done.set_result(None)

    def produce(t):
        go.wait()
        for i in range(per_thread):
            loop.call_soon_threadsafe(record, t, i)

    async def main():
        workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        go.set()
        # the loop's own thread queues meanwhile too
        own = []
        for i in range(500):
            loop.call_soon(own.append, i)
            await asyncio.sleep(0)
        await done
        for w in workers:
            w.join()
        return own

    try:
        own = loop.run_until_complete(main())
    finally:
        loop.close()
    assert own == list(range(500))
    for t in range(threads):
        assert seen[t] == list(range(per_thread)), t


def test_threadsafe_calls_from_threads_in_debug_mode():
    # debug mode takes zloopgo's Python edge, then queues an adapter
    # Handle (3.14+: the runner of asyncio's _ThreadSafeHandle)
    loop = zloopgo.new_event_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = 60  # no slow-callback log on a loaded machine
    threads, per_thread = 4, 300
    seen = [[] for _ in range(threads)]
    finished = []

    def produce(t):
        for i in range(per_thread):
            loop.call_soon_threadsafe(seen[t].append, i)
        loop.call_soon_threadsafe(finished.append, t)

    async def main():
        workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        while len(finished) < threads:
            await asyncio.sleep(0.001)
        for w in workers:
            w.join()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    for t in range(threads):
        assert seen[t] == list(range(per_thread)), t


def test_threadsafe_call_before_the_loop_runs_keeps_its_place():
    # queued by another thread before run: between the loop thread's own
    # call_soon calls made before and after it, as in asyncio's one deque
    loop = zloopgo.new_event_loop()
    order = []
    loop.call_soon(order.append, "first")
    out = _run_in_thread(lambda: loop.call_soon_threadsafe(order.append, "second"))
    assert "error" not in out
    loop.call_soon(order.append, "third")
    loop.call_soon(loop.stop)
    try:
        loop.run_forever()
    finally:
        loop.close()
    assert order == ["first", "second", "third"]


def test_threadsafe_call_seen_before_a_later_call_soon():
    # another thread queues, then lets the loop know; the callback the
    # loop then schedules itself runs after the other thread's, as asyncio's
    loop = zloopgo.new_event_loop()
    order = []
    queued = threading.Event()

    def other():
        loop.call_soon_threadsafe(order.append, "other thread")
        queued.set()

    async def main():
        t = threading.Thread(target=other)
        t.start()
        await loop.run_in_executor(None, queued.wait)
        loop.call_soon(order.append, "loop thread")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        t.join()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert order == ["other thread", "loop thread"]


def test_threadsafe_call_wakes_a_loop_waiting_with_nothing_else_to_do():
    loop = zloopgo.new_event_loop()
    results = []

    def later():
        loop.call_soon_threadsafe(results.append, "woken")
        loop.call_soon_threadsafe(loop.stop)

    loop.call_soon(lambda: threading.Thread(target=later).start())
    try:
        loop.run_forever()  # nothing else: only the wake-up ends the wait
    finally:
        loop.close()
    assert results == ["woken"]


def test_threadsafe_calls_left_queued_are_released_at_close():
    loop = zloopgo.new_event_loop()
    released = threading.Event()

    class Arg:
        def __del__(self):
            released.set()

    out = _run_in_thread(lambda: loop.call_soon_threadsafe(_noop, Arg()))
    assert "error" not in out
    del out
    loop.close()
    gc.collect()
    assert released.is_set()


def test_a_threadsafe_call_as_the_loop_wakes_runs_and_closes():
    # Another thread makes one call_soon_threadsafe at a moment around the
    # end of the loop's one short sleep: the loop, asleep, wakes (by its
    # timer or by that call), finishes and is closed by its own thread. A
    # call that saw the loop asleep writes its wake-up after its push,
    # when the loop, woken by its timer, may already have run and closed,
    # unless the close waits for it (tsan41: the closing thread cleared
    # and freed the waker while such a call read it; ThreadSanitizer's
    # report, a crash where the freed waker was used). The call is either
    # taken (run, or released at the close) or refused as asyncio refuses
    # it on a closed loop; nothing else happens.
    import random
    import time

    rng = random.Random(41)
    outcomes = []
    for _ in range(60):
        loop = zloopgo.new_event_loop()
        ran = []
        delay = rng.random() * 0.04

        closed = threading.Event()

        def caller(loop=loop, ran=ran, delay=delay, closed=closed):
            time.sleep(delay)
            try:
                loop.call_soon_threadsafe(ran.append, 1)
                outcome = "taken"
            except RuntimeError as exc:
                outcome = str(exc)
            # busy until the loop is closed: a thread that blocks or
            # sleeps here would order its call before the close for
            # ThreadSanitizer (the interpreter's own bookkeeping of
            # threads that detach), hiding the race
            while not closed.is_set():
                pass
            outcomes.append(outcome)

        t = threading.Thread(target=caller)
        t.start()
        try:
            loop.run_until_complete(asyncio.sleep(0.02))
        finally:
            loop.close()
            closed.set()
        t.join(HANG_GUARD)
        assert not t.is_alive()
        assert ran in ([], [1])
    assert set(outcomes) <= {"taken", "Event loop is closed"}
    assert len(outcomes) == 60


@pytest.mark.skipif(not THREADSAFE_HANDLE, reason="3.14+'s _ThreadSafeHandle and its lock")
def test_threadsafe_handle_cancelled_on_another_thread_while_it_runs():
    # 3.14's cancel() waits for the running callback (its lock): every
    # cancel that found the callback running returns after it finished
    loop = zloopgo.new_event_loop()
    rounds = 200
    late = []

    def one_round():
        started, cancelling, finished = threading.Event(), threading.Event(), threading.Event()

        def callback():
            started.set()
            cancelling.wait(10)
            finished.set()

        h = loop.call_soon_threadsafe(callback)
        started.wait(10)
        cancelling.set()
        h.cancel()  # waits for callback to return
        if not finished.is_set():
            late.append(h)

    async def main():
        def canceller():
            for _ in range(rounds):
                one_round()

        threads = [threading.Thread(target=canceller) for _ in range(3)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            await asyncio.sleep(0.001)
        for t in threads:
            t.join()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert late == []


def _noop(*args):
    pass


def _methods_off_thread(loop, sock):
    """Each loop method that is not thread-safe, called from another
    thread while loop runs: its name and what it returned or raised."""
    timer = loop.call_later(3600, _noop)
    handle = loop.call_soon(_noop)
    calls = {
        "call_soon": lambda: loop.call_soon(_noop),
        "call_later": lambda: loop.call_later(3600, _noop),
        "call_at": lambda: loop.call_at(loop.time() + 3600, _noop),
        "add_reader": lambda: loop.add_reader(sock.fileno(), _noop),
        "remove_reader": lambda: loop.remove_reader(sock.fileno()),
        "add_writer": lambda: loop.add_writer(sock.fileno(), _noop),
        "remove_writer": lambda: loop.remove_writer(sock.fileno()),
        "TimerHandle.cancel": timer.cancel,
        "Handle.cancel": handle.cancel,
    }
    return {name: _run_in_thread(fn) for name, fn in calls.items()}, (timer, handle)


def test_loop_methods_off_the_running_loops_thread():
    loop = zloopgo.new_event_loop()
    a, b = socket.socketpair()

    async def main():
        return _methods_off_thread(loop, a)

    try:
        outcomes, held = loop.run_until_complete(main())
        for h in held:
            h.cancel()
        loop.remove_reader(a.fileno())
        loop.remove_writer(a.fileno())
    finally:
        loop.close()
        a.close()
        b.close()
    for name, out in outcomes.items():
        if OWNERSHIP_ENFORCED:
            # the loop's C structures are its thread's: refused, as
            # asyncio's debug mode refuses call_soon
            assert isinstance(out.get("error"), RuntimeError), name
            assert str(out["error"]) == FOREIGN, name
        else:
            # the GIL keeps asyncio's behaviour: the call goes through
            assert "error" not in out, (name, out.get("error"))


def test_loop_methods_from_another_thread_while_it_is_not_running():
    # ownership is the running loop's: a loop that does not run may be
    # driven from any thread, as asyncio's
    loop = zloopgo.new_event_loop()
    try:
        out = _run_in_thread(lambda: (loop.call_soon(_noop), loop.call_later(1, _noop)))
        assert "error" not in out
        for h in out["value"]:
            h.cancel()
    finally:
        loop.close()


def test_transport_write_off_the_loops_thread():
    loop = zloopgo.new_event_loop()
    received = bytearray()

    async def main():
        got = loop.create_future()

        async def serve(reader, writer):
            while len(received) < 4:
                data = await reader.read(100)
                if not data:
                    break
                received.extend(data)
            got.set_result(None)
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        out = _run_in_thread(lambda: writer.write(b"late"))
        writer.write(b"ok!!")
        await got
        writer.close()
        server.close()
        await server.wait_closed()
        return out

    try:
        out = loop.run_until_complete(main())
    finally:
        loop.close()
    if OWNERSHIP_ENFORCED:
        assert isinstance(out.get("error"), RuntimeError)
        assert str(out["error"]) == FOREIGN
        assert bytes(received) == b"ok!!"
    else:
        assert "error" not in out
        assert bytes(received) == b"lateok!!"


# ---- the live-loop list and the collector hook (issue 41, fthook12) ----
# A GIL build keeps pending handles off the collector's lists and looks at
# every loop's last handle before each collection (a gc.callbacks hook
# walking a list of live loops); a free-threaded build tracks every handle
# instead, and has neither the hook nor the list (capi/pending.c). Loops on
# several threads make, keep and drop handles and cycles through them, and
# loops are made and dropped, while another thread collects in a loop.


class _Holder:
    """A cycle through a pending handle: holder -> handle -> bound method."""

    def method(self, *args):
        pass


def _collect_while(work, threads):
    """work(t) on `threads` threads while another calls gc.collect() until
    they are done: [what each returned], the number of collections made."""
    stop = threading.Event()
    collections = 0

    def collector():
        nonlocal collections
        while not stop.is_set():
            gc.collect()
            collections += 1

    c = threading.Thread(target=collector)
    c.start()
    try:
        outs = _run_in_threads(work, threads)
    finally:
        stop.set()
        c.join(HANG_GUARD)
    assert not c.is_alive()
    for out in outs:
        assert "error" not in out, out.get("error")
    return [out["value"] for out in outs], collections


def test_handles_made_kept_and_dropped_on_loop_threads_while_another_collects():
    import weakref

    rounds = 2000

    def work(t):
        loop = zloopgo.new_event_loop()
        ran, kept, cycles = [], [], []

        async def main():
            for i in range(rounds):
                loop.call_soon(ran.append, i)  # dropped at once: alone
                if i % 4 == 0:
                    kept.append(loop.call_soon(ran.append, -i))  # held: shared
                if i % 16 == 0:
                    holder = _Holder()
                    holder.handle = loop.call_soon(holder.method, i)
                    holder.timer = loop.call_later(3600, holder.method)
                    cycles.append(weakref.ref(holder))
                    holder.timer.cancel()
                    del holder
                await asyncio.sleep(0)

        try:
            loop.run_until_complete(main())
            tracked = [gc.is_tracked(h) for h in kept]
            cancelled = [h.cancelled() for h in kept]
        finally:
            loop.close()
        return ran, tracked, cancelled, cycles

    results, collections = _collect_while(work, threads=4)
    assert collections > 0
    hooks = [c for c in gc.callbacks if "zloopgo" in getattr(c, "__name__", "")]
    assert len(hooks) == (0 if FREE_THREADED else 1)  # the hook: a GIL build's alone
    want = []
    for i in range(rounds):
        want.append(i)
        if i % 4 == 0:
            want.append(-i)
    for ran, tracked, cancelled, _cycles in results:
        assert ran == want  # every callback ran once, in its loop's order
        assert all(tracked)  # a handle the program holds is the collector's
        assert not any(cancelled)
    gc.collect()
    for *_, cycles in results:
        assert [r() for r in cycles] == [None] * len(cycles)


def test_loops_made_and_dropped_on_threads_while_another_collects():
    import weakref

    from zloopgo._engine import LoopCore

    class Core(LoopCore):
        pass

    def work(t):
        refs = []
        for i in range(200):
            loop = zloopgo.new_event_loop()
            ran = []
            loop.call_soon(ran.append, i)
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()
            assert ran == [i]
            refs.append(weakref.ref(loop))
            # dropped unclosed with a handle waiting alone: the cycle
            # loop -> queue -> handle -> loop, the collector's to free
            core = Core()
            core.call_soon(ran.append, -i)
            refs.append(weakref.ref(core))
            del loop, core
        return refs

    results, collections = _collect_while(work, threads=4)
    assert collections > 0
    gc.collect()
    gc.collect()
    for refs in results:
        assert [r() for r in refs] == [None] * len(refs)


# ---- lookups in flight (fthook12): each loop settles its own lookups,
# taking each one's future out of its table in one step (PyDict_Pop) ----


def test_lookups_on_loops_on_several_threads_all_settle():
    import socket as socket_module

    per_loop = 400
    flags = socket_module.NI_NUMERICHOST | socket_module.NI_NUMERICSERV

    def work(t):
        loop = zloopgo.new_event_loop()

        async def main():
            # numeric getnameinfo: a lookup of the worker pool that needs
            # no resolver (a numeric getaddrinfo is answered in Python)
            names = [loop.getnameinfo(("127.0.0.1", 2000 + i), flags) for i in range(per_loop)]
            got = await asyncio.gather(*names)
            stats = zloopgo.stats(loop)
            return got, stats["lookups_done"], loop._zl_lookups_in_flight()

        try:
            return loop.run_until_complete(main())
        finally:
            loop.close()

    results, _ = _collect_while(work, threads=4)
    for got, done, in_flight in results:
        assert got == [("127.0.0.1", str(2000 + i)) for i in range(per_loop)]
        assert (done, in_flight) == (per_loop, 0)


# ---- context snapshots (fthook12): the loop's snapshot cache and spare
# context are its running thread's; a handle freed on another thread
# releases its context without making it the spare ----


def test_contexts_of_handles_freed_on_other_threads_while_the_loop_runs():
    import contextvars
    import queue

    var = contextvars.ContextVar("fthook12_var")
    rounds, per_round = 100, 8

    def work(t):
        loop = zloopgo.new_event_loop()
        seen = []
        handoff = queue.SimpleQueue()

        def record(i):
            seen.append((i, var.get()))
            var.set(-1)  # a private context of its own from now on

        def dropper():
            # takes references of its own, waits until the loop's thread
            # let go of its own, then frees the handles (and their private
            # contexts) here while the loop runs the next round
            while (item := handoff.get()) is not None:
                handles, taken, released = item
                mine = list(handles)
                loop.call_soon_threadsafe(taken.set_result, None)
                released.wait(60)
                del mine

        d = threading.Thread(target=dropper)
        d.start()

        async def main():
            for r in range(rounds):
                var.set(r)  # one snapshot shared by the round's handles
                handles = [loop.call_soon(record, r * per_round + j) for j in range(per_round)]
                await asyncio.sleep(0)
                taken, released = loop.create_future(), threading.Event()
                handoff.put((handles, taken, released))
                await taken
                handles.clear()
                released.set()

        try:
            loop.run_until_complete(main())
        finally:
            handoff.put(None)
            d.join(60)
            loop.close()
        return seen

    results, _ = _collect_while(work, threads=3)
    want = [(i, i // per_round) for i in range(rounds * per_round)]
    for seen in results:
        assert seen == want  # each callback saw its context as of scheduling


def _tracked_contexts_holding(var, value):
    import contextvars

    return sum(
        1
        for o in gc.get_objects()
        if type(o) is contextvars.Context and var in o and o[var] is value
    )


def test_a_snapshot_is_tracked_once_a_handle_sharing_it_is_freed_on_another_thread():
    # handles scheduled in one context share one snapshot of it, which
    # the adapter keeps off the collector's lists (capi/context.c) and must
    # put back before its last reference goes. With the GIL only the last
    # holder can tell it is the last (the count reads 1); without it two
    # holders letting go on two threads at once may both read 2, so a
    # free-threaded build puts it back at the first holder that lets go
    # and is not certainly the last: here a handle freed on another thread
    # while the loop's cache and a second handle still hold the snapshot
    import contextvars

    var = contextvars.ContextVar("giloff13_var")
    marker = object()
    loop = zloopgo.new_event_loop()

    def schedule():
        var.set(marker)
        return [loop.call_later(3600, print) for _ in range(2)]

    async def main():
        handles = contextvars.copy_context().run(schedule)
        for h in handles:
            h.cancel()  # their timer slots let go: the handles hold the snapshot
        return handles

    try:
        handles = loop.run_until_complete(main())
        gc.collect()
        before = _tracked_contexts_holding(var, marker)
        first = [handles.pop()]
        freer = threading.Thread(target=first.clear)  # the handle's dealloc runs there
        freer.start()
        freer.join(60)
        after = _tracked_contexts_holding(var, marker)
        handles.clear()
    finally:
        loop.close()
    assert before == 0  # the context the schedule ran in is gone; the snapshot untracked
    assert after == (1 if FREE_THREADED else 0)


def test_the_last_holders_of_a_snapshot_let_go_on_several_threads_at_once():
    # the race itself: each round, four cancelled handles sharing one
    # snapshot are its last holders (the loop's cache moved on to another),
    # and four threads drop one each at the same moment (a barrier) while
    # another thread collects. Each snapshot must be back on the
    # collector's lists before it goes: a debug build's Context dealloc
    # asserts it, a release build runs on (ThreadSanitizer or a debug
    # build is what shows a loss). Checked here: every round ends, and no
    # snapshot is left once the handles are gone.
    import contextvars

    var = contextvars.ContextVar("giloff13_race_var")
    threads, rounds = 4, 100
    slots = [None] * threads
    start = threading.Barrier(threads + 1)
    end = threading.Barrier(threads + 1)
    markers = [object() for _ in range(rounds)]

    def schedule(r):
        var.set(markers[r])
        handles = [loop.call_later(3600, print) for _ in range(threads)]
        for h in handles:
            h.cancel()  # the timer slots let go: the handles hold the snapshot
        return handles

    def dropper(t):
        for _ in range(rounds):
            start.wait(60)
            slots[t] = None  # one of the snapshot's last references
            end.wait(60)

    async def main():
        for r in range(rounds):
            handles = contextvars.copy_context().run(schedule, r)
            loop.call_soon(len, ())  # another context: the cache lets the snapshot go
            for t in range(threads):
                slots[t] = handles[t]
            handles.clear()
            start.wait(60)  # the loop's thread blocks while they drop
            end.wait(60)
            await asyncio.sleep(0)

    stop = threading.Event()

    def collector():
        while not stop.is_set():
            gc.collect()
            stop.wait(0.005)  # a collection stops every thread: let rounds run between

    loop = zloopgo.new_event_loop()
    workers = [threading.Thread(target=dropper, args=(t,)) for t in range(threads)]
    workers.append(threading.Thread(target=collector))
    for w in workers:
        w.start()
    finished = False
    try:
        loop.run_until_complete(main())
        finished = True
    finally:
        stop.set()
        if not finished:  # the droppers wait for rounds that will not come
            start.abort()
            end.abort()
        for w in workers:
            w.join(60)
        loop.close()
    assert not any(w.is_alive() for w in workers)
    gc.collect()
    assert sum(_tracked_contexts_holding(var, m) for m in markers[-3:]) == 0


# ---- ftxport12: transports, class caches and set_* (issue 41) ----
# The rows built by ftxport12: native writes into a StreamReader's buffer
# in a critical section, slot reads at recorded offsets taking their
# reference safely, the layout's checked class and the class caches as
# atomics, the module's set_* written once. Without the GIL each of these
# was a use-after-free or a torn read waiting for a user thread; with it
# the tests check the same outcomes, which a GIL build gives anyway.


@pytest.mark.parametrize("round_", range(3))  # the race shows by turns
def test_stream_buffer_read_and_cleared_by_a_thread_while_the_loop_feeds_it(round_):
    # the loop appends what the socket reads to reader._buffer natively
    # (the stream fast path), while a user thread takes bytes from its
    # front: every byte sent is taken once, in order (before the critical
    # section, the copy landed where the buffer's end had been)
    loop = zloopgo.new_event_loop()
    chunks = 5000
    expected = b"".join(i.to_bytes(4, "big") * 256 for i in range(chunks))
    taken = []
    stop = threading.Event()

    def drain(buffer):
        # a copy by slicing, not bytes(buffer): that one exports the
        # buffer while it copies, and asyncio's own extend() then fails
        # with BufferError as the native one does
        while not stop.is_set():
            data = buffer[:]
            if data:
                del buffer[: len(data)]  # the loop only appends behind it
                taken.append(bytes(data))

    async def main():
        async def serve(_reader, writer):
            for i in range(chunks):
                writer.write(i.to_bytes(4, "big") * 256)
                if i % 64 == 0:
                    await writer.drain()
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        # a limit past the whole stream: the reader never pauses reading
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 30)
        t = threading.Thread(target=drain, args=(reader._buffer,))
        t.start()
        try:
            # until the stream ends (or the transport fails) and the
            # thread has taken what was buffered
            transport = writer.transport
            while not reader._eof and not transport.is_closing():
                await asyncio.sleep(0.001)
            while reader._buffer and not transport.is_closing():
                await asyncio.sleep(0.001)
        finally:
            stop.set()
            t.join(60)
        writer.close()
        server.close()
        await server.wait_closed()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert b"".join(taken) == expected


class _Recording(asyncio.Protocol):
    """A protocol that hands what it receives to a shared list: many of
    them, made and dropped by another thread, receive one stream."""

    def __init__(self, into):
        self.into = into

    def data_received(self, data):
        self.into.append(data)

    def eof_received(self):
        self.into.append(None)


def test_protocol_swapped_by_a_thread_while_the_loop_reads():
    # the native read takes transport._protocol for each read; a user
    # thread replaces it (set_protocol, a new object each time, the old one
    # dropped) meanwhile: every byte reaches one of them, in order
    loop = zloopgo.new_event_loop()
    chunks = 3000
    expected = b"".join(i.to_bytes(4, "big") * 64 for i in range(chunks))
    received = []
    stop = threading.Event()

    def swap(transport):
        while not stop.is_set():
            transport.set_protocol(_Recording(received))

    async def main():
        async def serve(_reader, writer):
            for i in range(chunks):
                writer.write(i.to_bytes(4, "big") * 64)
                if i % 32 == 0:
                    await writer.drain()
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport, _ = await loop.create_connection(lambda: _Recording(received), "127.0.0.1", port)
        t = threading.Thread(target=swap, args=(transport,))
        t.start()
        try:
            while not received or received[-1] is not None:
                await asyncio.sleep(0.001)
        finally:
            stop.set()
            t.join(60)
        transport.close()
        server.close()
        await server.wait_closed()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert received[-1] is None
    assert b"".join(received[:-1]) == expected


def test_datagram_extra_and_protocol_swapped_by_a_thread_while_the_loop_sends():
    # a connected datagram transport's sendto reads _extra['peername'] and
    # its protocol natively; a user thread replaces both (new objects each
    # time, the old ones dropped) meanwhile: every datagram is sent
    loop = zloopgo.new_event_loop()
    count = 3000
    got = []
    stop = threading.Event()

    class Peer(asyncio.DatagramProtocol):
        def datagram_received(self, data, addr):
            got.append(data)

    def swap(transport, peername):
        host, port = peername
        while not stop.is_set():
            extra = dict(transport._extra)
            extra["peername"] = (str(host), int(port))  # a new tuple each time
            transport._extra = extra
            transport.set_protocol(asyncio.DatagramProtocol())

    async def main():
        peer, _ = await loop.create_datagram_endpoint(Peer, local_addr=("127.0.0.1", 0))
        address = peer.get_extra_info("sockname")
        transport, _ = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, remote_addr=address
        )
        t = threading.Thread(target=swap, args=(transport, address))
        t.start()
        try:
            for i in range(count):
                transport.sendto(b"%d" % i)
                if i % 16 == 15:  # paced: the loopback never drops one
                    while len(got) < i + 1:
                        await asyncio.sleep(0)
            while len(got) < count:
                await asyncio.sleep(0.001)
        finally:
            stop.set()
            t.join(60)
        transport.close()
        peer.close()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert got == [b"%d" % i for i in range(count)]


async def _echo_in_chunks(expected, chunks, size, server_ssl=None, client_ssl=None):
    """expected sent through a server of asyncio's streams that echoes it,
    in `chunks` writes of `size` bytes each way, over TLS where the
    contexts are given; returns (what came back, the client's transport
    class)."""

    async def serve(reader, writer):
        got = await reader.readexactly(len(expected))
        for i in range(chunks):
            writer.write(got[i * size : (i + 1) * size])
            if i % 16 == 0:
                await writer.drain()
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ssl)
    port = server.sockets[0].getsockname()[1]
    tls = {"ssl": client_ssl, "server_hostname": "localhost"} if client_ssl else {}
    reader, writer = await asyncio.open_connection("127.0.0.1", port, **tls)
    for i in range(chunks):
        writer.write(expected[i * size : (i + 1) * size])
        if i % 16 == 0:
            await writer.drain()
    echoed = await reader.readexactly(len(expected))
    writer.close()
    server.close()
    await server.wait_closed()
    return echoed, type(writer.transport)


def _while_a_thread_changes_classes(targets, swap_in, put_back, run_loop):
    """Runs run_loop("a") and run_loop("b"), each on a thread of its own,
    while a third thread keeps changing the classes targets() names (a new
    attribute each time; every 50th change swap_in(), 25 later
    put_back()); then puts back and takes the attribute away again.
    Returns how many changes were made."""
    stop = threading.Event()
    changed = []

    def change_classes():
        i = 0
        while not stop.is_set():
            i += 1
            for cls in targets():
                cls._zl_test_changed = i
            if i % 50 == 0:
                swap_in()
            elif i % 50 == 25:
                put_back()
        changed.append(i)

    changer = threading.Thread(target=change_classes)
    loops = [threading.Thread(target=run_loop, args=(n,)) for n in ("a", "b")]
    changer.start()
    try:
        for t in loops:
            t.start()
        for t in loops:
            t.join(120)
    finally:
        stop.set()
        changer.join(60)
        put_back()
        for cls in targets():
            if "_zl_test_changed" in cls.__dict__:
                delattr(cls, "_zl_test_changed")
    return changed[0] if changed else 0


def test_classes_changed_by_a_thread_while_loops_on_two_others_use_their_caches():
    # the transport's layout check, the stream fast path's class checks and
    # the loop's clock remember a class by its version tag; a thread keeps
    # changing those classes (a new attribute each time, and now and then
    # StreamReader.feed_data replaced by a wrapper and put back) while two
    # loops, each on its own thread, stream through them: every byte
    # arrives, in order, on both, and the wrapper, while installed, is called
    chunks, size = 400, 1024
    expected = b"".join(i.to_bytes(4, "big") * (size // 4) for i in range(chunks))
    wrapped_calls = []
    original_feed = asyncio.StreamReader.feed_data

    def wrapped_feed(self, data):
        wrapped_calls.append(len(data))
        return original_feed(self, data)

    async def stream_once():
        return await _echo_in_chunks(expected, chunks, size)

    results = {}
    classes = []

    def run_loop(name):
        loop = zloopgo.new_event_loop()
        try:
            for _ in range(5):
                echoed, transport_type = loop.run_until_complete(stream_once())
                results.setdefault(name, []).append(echoed == expected)
                classes.append(transport_type)
            classes.append(type(loop))
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            results[name] = exc
        finally:
            loop.close()

    def swap_in():
        asyncio.StreamReader.feed_data = wrapped_feed

    def put_back():
        asyncio.StreamReader.feed_data = original_feed

    changed = _while_a_thread_changes_classes(
        lambda: [asyncio.StreamReader, asyncio.StreamReaderProtocol, zloopgo.Loop] + classes[:1],
        swap_in,
        put_back,
        run_loop,
    )
    assert results == {"a": [True] * 5, "b": [True] * 5}
    assert changed > 0
    # with the classes left alone, the wrapper, installed, is what runs
    loop = zloopgo.new_event_loop()
    asyncio.StreamReader.feed_data = wrapped_feed
    try:
        wrapped_calls.clear()
        echoed, _ = loop.run_until_complete(stream_once())
    finally:
        asyncio.StreamReader.feed_data = original_feed
        loop.close()
    assert echoed == expected
    assert sum(wrapped_calls) >= len(expected)  # both ends' readers fed through it


@pytest.mark.skipif(
    not _tls.NATIVE_TLS,
    reason="the native TLS record path and its class caches are 3.11-3.15's "
    "(3.10's asyncio has the SSLProtocol before 3.11's rewrite)",
)
def test_tls_classes_changed_by_a_thread_while_loops_on_two_others_stream_through_them(
    tls_contexts,
):
    # the TLS record path remembers ssl.SSLObject (its own read and write)
    # and zloopgo's SSLProtocol (its step methods) by their version tags
    # (sslobject_unchanged, protocol_class_unchanged, unreplaced: tls.c); a
    # thread keeps changing those classes (a new attribute each time, and
    # now and then SSLObject.read and SSLProtocol._do_read replaced by
    # wrappers and put back) while two loops, each on its own thread,
    # stream over TLS: every byte arrives, in order, on both, and the
    # wrappers, while installed, are called
    import ssl

    server_ctx, client_ctx = tls_contexts
    chunks, size = 200, 1024
    expected = b"".join(i.to_bytes(4, "big") * (size // 4) for i in range(chunks))
    protocol_class = _tls.protocol_class
    original_read = ssl.SSLObject.__dict__["read"]
    original_do_read = protocol_class.__dict__.get("_do_read")
    wrapped_calls = {"read": 0, "_do_read": 0}

    def wrapped_read(self, *args, **kwargs):
        wrapped_calls["read"] += 1
        return original_read(self, *args, **kwargs)

    def wrapped_do_read(self):
        wrapped_calls["_do_read"] += 1
        return (original_do_read or sslproto_do_read)(self)

    sslproto_do_read = asyncio.sslproto.SSLProtocol._do_read

    def put_back():
        ssl.SSLObject.read = original_read
        if original_do_read is not None:
            protocol_class._do_read = original_do_read
        elif "_do_read" in protocol_class.__dict__:
            del protocol_class._do_read

    async def stream_once():
        echoed, _ = await _echo_in_chunks(expected, chunks, size, server_ctx, client_ctx)
        return echoed

    results = {}

    def run_loop(name):
        loop = zloopgo.new_event_loop()
        try:
            for _ in range(3):
                echoed = loop.run_until_complete(stream_once())
                results.setdefault(name, []).append(echoed == expected)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            results[name] = exc
        finally:
            loop.close()

    def swap_in():
        ssl.SSLObject.read = wrapped_read
        protocol_class._do_read = wrapped_do_read

    changed = _while_a_thread_changes_classes(
        lambda: [ssl.SSLObject, protocol_class, asyncio.sslproto.SSLProtocol],
        swap_in,
        put_back,
        run_loop,
    )
    assert results == {"a": [True] * 3, "b": [True] * 3}
    assert changed > 0
    # with the classes left alone, the wrappers, installed, are what run
    loop = zloopgo.new_event_loop()
    ssl.SSLObject.read = wrapped_read
    protocol_class._do_read = wrapped_do_read
    try:
        wrapped_calls.update(read=0, _do_read=0)
        echoed = loop.run_until_complete(stream_once())
    finally:
        put_back()
        loop.close()
    assert echoed == expected
    assert wrapped_calls["read"] > 0 and wrapped_calls["_do_read"] > 0


def _fresh_engine():
    """A module object of the engine of its own (a state of its own, as
    test_interpreters' re-import makes), so that what it refuses or
    accepts leaves the imported zloopgo's alone."""
    import importlib.util

    from zloopgo import _engine

    spec = importlib.util.spec_from_file_location("zloopgo._engine", _engine.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_modules_layouts_and_tls_classes_are_set_once():
    # loops read what set_transport_layout, set_datagram_layout and
    # set_tls record without a lock: a second call is refused, in every
    # build, and leaves the first's in place
    from zloopgo import _datagram, _transports

    engine = _fresh_engine()
    for name, cls in (
        ("set_transport_layout", _transports.SocketTransport),
        ("set_datagram_layout", _datagram.DatagramTransport),
    ):
        assert getattr(engine, name)(cls) is None
        with pytest.raises(RuntimeError, match=f"{name} was called already"):
            getattr(engine, name)(cls)
    # the imported module's, set at import, refuse too
    from zloopgo import _engine

    with pytest.raises(RuntimeError, match="set_transport_layout was called already"):
        _engine.set_transport_layout(_transports.SocketTransport)
    if _tls.NATIVE_TLS:  # the versions whose SSLProtocol the native path knows
        with pytest.raises(RuntimeError, match="set_tls was called already"):
            _engine.set_tls(object, None, (), object, False, None, None)
    # and streams still flow through the layouts recorded first
    loop = zloopgo.new_event_loop()

    async def echo_once():
        async def serve(reader, writer):
            writer.write(await reader.readexactly(5))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.sockets[0].getsockname()[1]
        )
        writer.write(b"hello")
        got = await reader.readexactly(5)
        writer.close()
        server.close()
        await server.wait_closed()
        return got

    try:
        assert loop.run_until_complete(echo_once()) == b"hello"
    finally:
        loop.close()


def test_stream_classes_switch_off_and_on_but_are_replaced_only_with_the_gil():
    # set_streams is switched off (None) and on again with the same classes
    # (zloopgo's tests do); other classes replace them in a GIL build, and
    # a free-threaded build, whose loops read them without a lock, refuses
    engine = _fresh_engine()
    asserts = sys.flags.optimize == 0
    proto, reader = asyncio.StreamReaderProtocol, asyncio.StreamReader
    assert engine.set_streams(proto, reader, asserts) is None
    assert engine.set_streams(None, None, False) is None
    assert engine.set_streams(proto, reader, asserts) is None

    class OtherReader(asyncio.StreamReader):
        pass

    if FREE_THREADED:
        with pytest.raises(RuntimeError, match="sets them once"):
            engine.set_streams(proto, OtherReader, asserts)
    else:
        assert engine.set_streams(proto, OtherReader, asserts) is None


# ---- end to end (tsan41): a server's loop and its clients' loops on
# threads of their own, talking through sockets and through each other's
# call_soon_threadsafe, with the executor, the resolver's worker pool and
# zloopgo.open's in between ----


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_an_echo_server_loop_serves_client_loops_on_other_threads(tls, tls_contexts, tmp_path):
    # A program as a user would write it: one thread runs the server's
    # loop; three more each run a client loop that resolves "localhost"
    # (the worker pool's getaddrinfo, settled through the engine's inbox),
    # reads its payload from a file with zloopgo.open (the pool again),
    # streams it to the server in chunks, checks the echo's digest in the
    # executor and reports to the server's loop with
    # run_coroutine_threadsafe (call_soon_threadsafe both ways), while a
    # fifth thread collects now and then. Every byte comes back, each
    # report reaches the server's loop and its answer the client's.
    import hashlib
    import random

    if tls and not _tls.NATIVE_TLS:
        pytest.skip("the native TLS path is 3.11-3.15's")
    server_ctx, client_ctx = tls_contexts if tls else (None, None)
    clients, size, chunk = 3, (64 if tls else 256) * 1024, 7 * 1024
    payloads = [random.Random(i).randbytes(size) for i in range(clients)]
    for i, data in enumerate(payloads):
        (tmp_path / f"payload{i}").write_bytes(data)

    server_ready = threading.Event()
    server_box = {}
    reports = []  # appended on the server's loop alone

    async def echo(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def record(i, digest):
        # runs on the server's loop (run_coroutine_threadsafe)
        assert asyncio.get_running_loop() is server_box["loop"]
        reports.append((i, digest))
        count = len(reports)
        await asyncio.sleep(0)  # the answer crosses back after a turn of the loop
        return count

    def serve():
        loop = zloopgo.new_event_loop()
        server_box["loop"] = loop
        stop = loop.create_future()
        server_box["stop"] = stop

        async def main():
            server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server_ctx)
            server_box["port"] = server.sockets[0].getsockname()[1]
            server_ready.set()
            await stop
            server.close()
            await server.wait_closed()

        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    def client(i):
        loop = zloopgo.new_event_loop()

        async def main():
            infos = await loop.getaddrinfo("localhost", server_box["port"], type=socket.SOCK_STREAM)
            host = next(a[4][0] for a in infos if a[0] == socket.AF_INET)
            async with zloopgo.open(tmp_path / f"payload{i}", "rb") as f:
                data = await f.read()
            tls_args = {"ssl": client_ctx, "server_hostname": "localhost"} if tls else {}
            reader, writer = await asyncio.open_connection(host, server_box["port"], **tls_args)
            received = bytearray()

            async def receive():
                while len(received) < len(data):
                    received.extend(await reader.read(65536))

            receiving = asyncio.ensure_future(receive())
            for at in range(0, len(data), chunk):
                writer.write(data[at : at + chunk])
                await writer.drain()
            await receiving
            writer.close()
            digest = await loop.run_in_executor(None, lambda: hashlib.sha256(received).hexdigest())
            answer = asyncio.run_coroutine_threadsafe(record(i, digest), server_box["loop"])
            count = await asyncio.wrap_future(answer)
            return digest, count

        try:
            return loop.run_until_complete(main())
        finally:
            loop.close()

    stop_collecting = threading.Event()

    def collector():
        while not stop_collecting.wait(0.05):
            gc.collect()

    server_thread = threading.Thread(target=serve)
    collecting = threading.Thread(target=collector)
    server_thread.start()
    collecting.start()
    try:
        assert server_ready.wait(HANG_GUARD)
        outs = _run_in_threads(client, clients)
    finally:
        stop_collecting.set()
        if "stop" in server_box:
            server_box["loop"].call_soon_threadsafe(server_box["stop"].set_result, None)
        server_thread.join(HANG_GUARD)
        collecting.join(HANG_GUARD)
    assert not server_thread.is_alive()
    want = [hashlib.sha256(data).hexdigest() for data in payloads]
    assert [out.get("error") for out in outs] == [None] * clients
    assert [out["value"][0] for out in outs] == want
    assert sorted(out["value"][1] for out in outs) == list(range(1, clients + 1))
    assert sorted(reports) == sorted(enumerate(want))
