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

from helpers import zloop

import zloopgo


def test_a_thread_holding_the_gil_wakes_a_sleeping_loop_once():
    # The loop sleeps with no timer; a thread makes 2,000 calls without
    # giving up the GIL (a long switch interval). The first wakes the loop;
    # the loop then waits for the GIL, and the 1,999 calls made meanwhile
    # need no wake-up: the batch it runs next sees them all.
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
