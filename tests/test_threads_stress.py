"""call_soon_threadsafe under load: 8 producer threads x 100k calls into a
running loop lose nothing and keep each producer's order (dual-run: stock
asyncio and zloopgo); producers racing the loop's own call_soon batches; a
ping-pong between threads and a loop that goes to sleep between messages
catches a lost wake-up (a missed eventfd write would stall a round trip,
with no timer pending to hide it)."""

import asyncio
import threading
import time

import pytest

NTHREADS = 8


def produce_and_check(loop, nthreads, per_thread, timeout=120):
    total = nthreads * per_thread
    last = [-1] * nthreads
    out_of_order = []
    count = [0]
    done = loop.create_future()

    def sink(tid, i):
        if i != last[tid] + 1:
            out_of_order.append((tid, last[tid], i))
        last[tid] = i
        count[0] += 1
        if count[0] == total:
            done.set_result(None)

    barrier = threading.Barrier(nthreads + 1)
    errors = []

    def producer(tid):
        try:
            barrier.wait(30)
            cs = loop.call_soon_threadsafe
            for i in range(per_thread):
                cs(sink, tid, i)
        except RuntimeError as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(nthreads)]
    for t in threads:
        t.start()

    async def main():
        # the loop is running (and may sleep) while the producers start
        await loop.run_in_executor(None, barrier.wait, 30)
        await asyncio.wait_for(done, timeout)

    t0 = time.monotonic()
    try:
        loop.run_until_complete(main())
    finally:
        for t in threads:
            t.join(60)
        loop.run_until_complete(loop.shutdown_default_executor())
    elapsed = time.monotonic() - t0
    assert not errors
    assert count[0] == total, f"{total - count[0]} callbacks lost"
    assert out_of_order == [], f"out of order (producer, previous, got): {out_of_order[:10]}"
    assert last == [per_thread - 1] * nthreads
    return elapsed


def test_threadsafe_8x100k(loop):
    produce_and_check(loop, NTHREADS, 100_000)
    # and the loop is still usable afterwards
    assert loop.run_until_complete(asyncio.sleep(0, "ok")) == "ok"


def test_threadsafe_from_callbacks_while_loop_busy(loop):
    # producers run while the loop is busy in long batches of its own
    # call_soon callbacks: both queues stay in order
    own = []
    stop = threading.Event()

    def busy(i):
        own.append(i)
        if not stop.is_set():
            loop.call_soon(busy, i + 1)

    loop.call_soon(busy, 0)
    try:
        produce_and_check(loop, 4, 10_000)
    finally:
        stop.set()
        loop.run_until_complete(asyncio.sleep(0))
    assert own == list(range(len(own)))


@pytest.mark.parametrize("pause", [0.0, 0.001])
def test_threadsafe_ping_pong_no_lost_wakeup(loop, pause):
    # Each producer waits for the loop to run its callback before sending
    # the next, so the loop keeps going to sleep in the poller with nothing
    # to do and no timer; each call must wake it. A lost wake-up shows as a
    # slow round trip; the producer then wakes the loop through asyncio's
    # self-pipe so the test ends and reports it.
    nthreads, rounds = 4, 300 if pause else 1_000
    acks = [threading.Event() for _ in range(nthreads)]
    got = [[] for _ in range(nthreads)]
    stalls = []
    finished = loop.create_future()
    remaining = [nthreads]

    def on_loop(tid, i):
        got[tid].append(i)
        acks[tid].set()

    def producer_done():
        remaining[0] -= 1
        if remaining[0] == 0:
            finished.set_result(None)

    def producer(tid):
        for i in range(rounds):
            acks[tid].clear()
            loop.call_soon_threadsafe(on_loop, tid, i)
            if not acks[tid].wait(2.0):
                stalls.append((tid, i))
                loop._write_to_self()
                acks[tid].wait(30)
            if pause:
                time.sleep(pause)
        loop.call_soon_threadsafe(producer_done)

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(nthreads)]
    for t in threads:
        t.start()
    try:
        loop.run_until_complete(finished)
    finally:
        for t in threads:
            t.join(60)
    assert stalls == [], f"round trips that needed a second wake-up: {stalls[:10]}"
    assert got == [list(range(rounds))] * nthreads
