"""Cross-thread wake-ups: call_soon_threadsafe writes to the reactor only
while the loop sleeps in it, and once per sleep (capi/schedule.c,
capi/dispatch.c). Counted by zloopgo.stats()["wakeups"], which stock
asyncio has no counterpart of; that the callbacks run, in order, is what
tests/test_threads.py checks on both loops."""

import gc
import sys
import threading
import time
import warnings
import weakref

from helpers import engine_without_gil, zloop

import zloopgo


def test_a_thread_holding_the_gil_wakes_a_sleeping_loop_once():
    # The loop sleeps with no timer; a thread makes 2,000 calls without
    # giving up the GIL (a long switch interval). The first wakes the loop;
    # the loop then waits for the GIL, and the 1,999 calls made meanwhile
    # need no wake-up: the batch it runs next sees them all.
    #
    # Where the engine runs without the GIL (scripts/gil-off's build) the
    # premise does not hold: the loop drains the inbox while the thread
    # pushes, and sleeps again between calls. What holds on every build is
    # once per sleep: a call writes a wake-up only while the loop sleeps
    # (`polling`) and only if none was written during that sleep
    # (`wake_sent`, reset by zl_release alone), and every release is a wait
    # that stats() counts in waits_blocking.
    calls = 2000
    got = []
    started = threading.Event()

    def producer():
        started.wait(10)
        time.sleep(0.05)  # the loop is asleep in the reactor by now
        for i in range(calls):
            loop.call_soon_threadsafe(got.append, i)
        loop.call_soon_threadsafe(loop.stop)

    interval = sys.getswitchinterval()
    with zloop() as loop:
        watchdog = loop.call_later(30, loop.stop)
        loop.call_soon(started.set)
        thread = threading.Thread(target=producer)
        sys.setswitchinterval(1.0)
        try:
            thread.start()
            zloopgo.reset_stats(loop)
            loop.run_forever()
        finally:
            sys.setswitchinterval(interval)
            thread.join(10)
        stats = zloopgo.stats(loop)
        watchdog.cancel()
    assert got == list(range(calls))
    assert 1 <= stats["wakeups"] <= stats["waits_blocking"]
    if not engine_without_gil():
        assert stats["wakeups"] <= 3  # against one per call before


def test_each_sleep_gets_its_own_wakeup():
    # The other side of "once per sleep": a call made while a later sleep
    # lasts must wake that one, or the loop sleeps until the watchdog.
    rounds = 3
    ran = []
    ran_event = threading.Event()

    def note(i):
        ran.append(i)
        ran_event.set()

    def producer():
        for i in range(rounds):
            time.sleep(0.05)  # the loop is asleep again by now
            loop.call_soon_threadsafe(note, i)
            ran_event.wait(10)
            ran_event.clear()
        loop.call_soon_threadsafe(loop.stop)

    with zloop() as loop:
        watchdog = loop.call_later(20, loop.stop)
        thread = threading.Thread(target=producer)
        loop.call_soon(thread.start)
        t0 = time.monotonic()
        try:
            zloopgo.reset_stats(loop)
            loop.run_forever()
        finally:
            thread.join(10)
        elapsed = time.monotonic() - t0
        stats = zloopgo.stats(loop)
        watchdog.cancel()
    assert ran == list(range(rounds))
    assert elapsed < 15  # the watchdog did not end the run
    assert 1 <= stats["wakeups"] <= stats["waits_blocking"]


def test_threads_calling_at_once_wake_each_sleep_at_most_once():
    # Several threads call at the same moment (a barrier), round after
    # round, while the loop sleeps between rounds: all of them may find it
    # asleep (`polling`), and only the first of each sleep may write
    # (`wake_sent`, exchanged). Without the GIL they do so truly at once.
    threads, rounds, per_round = 4, 50, 5
    got = []
    barrier = threading.Barrier(threads)

    def producer(t):
        for r in range(rounds):
            barrier.wait(10)
            for i in range(per_round):
                loop.call_soon_threadsafe(got.append, (t, r, i))
            time.sleep(0.001)  # the loop drains and sleeps again meanwhile

    def stop_when_all_done(workers):
        for worker in workers:
            worker.join(20)
        loop.call_soon_threadsafe(loop.stop)

    with zloop() as loop:
        watchdog = loop.call_later(30, loop.stop)
        workers = [threading.Thread(target=producer, args=(t,)) for t in range(threads)]
        stopper = threading.Thread(target=stop_when_all_done, args=(workers,))
        try:
            zloopgo.reset_stats(loop)
            for worker in workers:
                worker.start()
            stopper.start()
            loop.run_forever()
        finally:
            stopper.join(30)
        stats = zloopgo.stats(loop)
        watchdog.cancel()
    assert len(got) == threads * rounds * per_round
    for t in range(threads):
        mine = [(r, i) for (u, r, i) in got if u == t]
        assert mine == [(r, i) for r in range(rounds) for i in range(per_round)]
    assert 1 <= stats["wakeups"] <= stats["waits_blocking"]


# call_soon_threadsafe's handles stay off the collector's lists while the
# ready queue holds them (capi/schedule.c); a cycle through one must still
# be collected, and nothing the queue holds may be freed under it.


class _Box:
    pass


def _cycle_through_a_queued_handle(loop, got):
    box = _Box()
    box.handle = loop.call_soon_threadsafe(got.append, box)
    return weakref.ref(box)


def test_a_cycle_through_a_queued_handle_survives_collection_and_is_freed_after_it_ran():
    got = []
    with zloop() as loop:
        ref = _cycle_through_a_queued_handle(loop, got)
        gc.collect()
        assert ref() is not None and got == []  # queued, so alive
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert got == [ref()]
        got.clear()
        gc.collect()
        assert ref() is None


def test_a_cycle_through_a_handle_left_queued_at_close_is_freed():
    with zloop() as loop:
        ref = _cycle_through_a_queued_handle(loop, [])
    gc.collect()
    assert ref() is None


def test_an_unclosed_loop_with_a_queued_handle_is_collected():
    # loop -> queue -> handle -> handle._loop -> loop: a cycle the
    # collector sees only through the queue's traversal of the handle.
    loop = zloopgo.new_event_loop()
    loop.call_soon_threadsafe(print, "never")
    ref = weakref.ref(loop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        del loop
        for _ in range(3):
            gc.collect()
    assert ref() is None
