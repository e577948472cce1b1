"""The look zloopgo's C adapter takes at the epoll descriptor before an
iteration it runs alone (capi/dispatch.c, next_alone): asyncio polls once
per iteration, and so does zloopgo, either in its Go engine or, without
crossing into Go, by a zero-timeout epoll_wait of its own whose events it
hands over as the engine's wait would. With callbacks ready the look is
the iteration's poll; with none (a wait that may block) a look that finds
events is that wait, and one that finds nothing leaves the wait to the
engine and pauses such looks for a while (look_skips, doubling up to
LOOK_BACKOFF_MAX, 64, while they keep finding nothing).

The differential test generates programs of socket pairs whose readers
drain everything, one byte or nothing (a descriptor that stays ready),
bytes sent between yields, chains of call_soon, readers added and removed,
runs of yields long and short on both sides of the limits (31 batches
alone per crossing, a pause of 64), and with up to 66 descriptors watched
(a look takes the events of at most 64): every reader call and callback
must fall in the same iteration, in the same order, as on asyncio (a
look that took fewer events than were ready would reorder epoll's ready
list). The zloopgo-only tests pin the counts: every iteration polls once,
a descriptor that stays ready is handed over by the looks, and an idle
loop's looks pause."""

import asyncio
import random
import socket
import time

import pytest
from helpers import FACTORIES, assert_same_observations

import zloopgo

PAIRS = 3
PROGRAMS = 100
SEED = 23


def _program(rng):
    """A list of steps: ("idle", count) first (socket pairs whose readers
    are watched and never ready: the loop's own descriptor and these
    bring the count watched around the 64 a look allows), then
    ("send", pair, nbytes), ("mode", pair, mode), ("watch", pair, on),
    ("chain", depth), ("yield", count)."""
    steps = [("idle", rng.choice([0, 0, 0, 58, 59, 60, 61, 62]))]
    for _ in range(rng.randint(10, 40)):
        kind = rng.choice(["send", "send", "mode", "watch", "chain", "yield", "yield"])
        if kind == "send":
            steps.append(("send", rng.randrange(PAIRS), rng.choice([1, 3, 100])))
        elif kind == "mode":
            steps.append(("mode", rng.randrange(PAIRS), rng.choice(["all", "one", "none"])))
        elif kind == "watch":
            steps.append(("watch", rng.randrange(PAIRS), rng.random() < 0.7))
        elif kind == "chain":
            steps.append(("chain", rng.randint(1, 4)))
        else:
            # runs of yields short and long: under and over the 31 batches a
            # crossing may run alone, and the backoff's 64
            steps.append(("yield", rng.choice([1, 2, 5, 30, 31, 32, 33, 63, 64, 65, 130])))
    return steps


def _observations(loop_name, steps, counts=None):
    """The program's observations; on zloopgo, its loop's counts are added
    to `counts` if given."""
    loop = FACTORIES[loop_name]()
    log = []
    tick = [0]  # yields so far: the iteration an observation falls in

    async def main():
        pairs = [socket.socketpair() for _ in range(PAIRS)]
        for a, b in pairs:
            a.setblocking(False)
            b.setblocking(False)
        mode = ["all"] * PAIRS
        watched = [False] * PAIRS

        def on_readable(i):
            b = pairs[i][1]
            if mode[i] == "none":
                log.append((tick[0], "R", i, 0))
                return
            got = b.recv(1 << 16 if mode[i] == "all" else 1)
            log.append((tick[0], "R", i, len(got)))

        def chain(depth, name):
            log.append((tick[0], "C", name, depth))
            if depth > 1:
                loop.call_soon(chain, depth - 1, name)

        async def yields(count):
            for _ in range(count):
                await asyncio.sleep(0)
                tick[0] += 1

        idle = []
        for n, step in enumerate(steps):
            kind = step[0]
            if kind == "idle":
                idle = [socket.socketpair() for _ in range(step[1])]
                for _, quiet in idle:
                    loop.add_reader(quiet, log.append, "never")
            elif kind == "send":
                pairs[step[1]][0].send(b"x" * step[2])
            elif kind == "mode":
                mode[step[1]] = step[2]
            elif kind == "watch":
                i, on = step[1], step[2]
                if on and not watched[i]:
                    loop.add_reader(pairs[i][1], on_readable, i)
                elif not on and watched[i]:
                    loop.remove_reader(pairs[i][1])
                watched[i] = on
            elif kind == "chain":
                loop.call_soon(chain, step[1], n)
            else:
                await yields(step[1])
        await yields(3)
        for i, (a, b) in enumerate(pairs):
            if watched[i]:
                loop.remove_reader(b)
            a.close()
            b.close()
        for a, quiet in idle:
            loop.remove_reader(quiet)
            a.close()
            quiet.close()
        if counts is not None:
            for key, value in zloopgo.stats(loop).items():
                if isinstance(value, int):
                    counts[key] = counts.get(key, 0) + value

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return log


@pytest.mark.parametrize("program", range(PROGRAMS))
def test_generated_programs_see_descriptors_in_asyncios_iterations(program):
    rng = random.Random(SEED * 1000 + program)
    steps = _program(rng)
    assert_same_observations("reader calls and callbacks by iteration", steps, _observations, steps)


def test_the_generated_programs_make_looks_that_find_events_and_looks_that_do_not():
    counts = {}
    for program in range(20):
        steps = _program(random.Random(SEED * 1000 + program))
        _observations("zloopgo", steps, counts)
    assert counts["looks_ahead_ready"] > 0
    assert counts["looks_ahead"] - counts["looks_ahead_ready"] > 1000


def _yielding_with_a_reader(drain, n, busy=0.0):
    """n yields with one socket pair's reader watched; the reader drains
    (or not) what one send put there, and keeps the CPU busy seconds.
    Returns the reader's calls and the loop's counts."""
    loop = zloopgo.new_event_loop()
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    calls = [0]

    def on_readable():
        calls[0] += 1
        if drain:
            b.recv(100)
        end = time.perf_counter() + busy
        while time.perf_counter() < end:
            pass

    async def main():
        loop.add_reader(b, on_readable)
        a.send(b"x")
        await asyncio.sleep(0)
        zloopgo.reset_stats(loop)
        for _ in range(n):
            await asyncio.sleep(0)
        stats = zloopgo.stats(loop)
        loop.remove_reader(b)
        return stats

    try:
        stats = loop.run_until_complete(main())
    finally:
        loop.close()
        a.close()
        b.close()
    return calls[0], stats


def test_every_iteration_polls_while_a_descriptor_is_watched():
    n = 3000
    _, s = _yielding_with_a_reader(True, n)
    assert s["waits_skipped"] == 0
    # (the batches of the Dispatch still running are not counted yet)
    assert s["waits"] == s["iterations"] >= n - 32
    # the batches were run alone: all but about one iteration in 32 polled in C
    assert s["looks_ahead"] >= s["iterations"] * 0.9
    assert s["looks_ahead_ready"] == 0


def test_a_descriptor_that_stays_ready_is_handed_over_by_the_looks():
    n = 3000
    calls, s = _yielding_with_a_reader(False, n)
    assert calls >= n  # its reader runs in every iteration, as asyncio's
    assert s["waits_skipped"] == 0 and s["waits"] == s["iterations"]
    # one event per iteration, whoever polled: no poll was made twice
    assert s["events"] == s["iterations"]
    # every look found it ready and handed it over: all but the engine's
    # own iterations (one in 32) looked
    assert s["looks_ahead"] == s["looks_ahead_ready"] >= s["iterations"] * 0.9
    # none left to the engine: no look is made once it is due to yield
    assert s["looks_ahead_left"] == 0


def test_no_look_is_made_when_the_engine_is_due_to_yield():
    # Iterations of 1 ms: the engine yields every 8 ms, at the start of an
    # iteration it runs. A look made when the yield is due would find the
    # descriptor ready only for the engine's wait to poll it again.
    calls, s = _yielding_with_a_reader(False, 150, busy=0.001)
    assert calls >= 150
    assert s["yields"] >= 5
    assert s["looks_ahead_left"] == 0
    assert s["events"] == s["iterations"]
    assert s["waits"] == s["iterations"]


def test_an_idle_loops_looks_pause():
    # A task that sleeps 0.2 ms at a time, a descriptor watched that never
    # becomes ready: each wait may block, and a look before it finds
    # nothing. After such a look the next 1, 2, 4, ... 64 waits go to the
    # engine unlooked, so the looks stay near n / 64; none finds events.
    loop = zloopgo.new_event_loop()
    a, b = socket.socketpair()
    n = 400

    async def main():
        loop.add_reader(b, print)
        await asyncio.sleep(0)
        zloopgo.reset_stats(loop)
        for _ in range(n):
            await asyncio.sleep(0.0002)
        stats = zloopgo.stats(loop)
        loop.remove_reader(b)
        return stats

    try:
        s = loop.run_until_complete(main())
    finally:
        loop.close()
        a.close()
        b.close()
    assert s["looks_ahead_ready"] == 0
    # a look per sleep is the poll of the batch its timer's callback
    # readies, which runs alone; those left to the engine are the idle ones
    assert 0 < s["looks_ahead_left"] <= n / 64 + 10
    # every sleep's wait was the engine's, which made it blocking
    assert s["waits_blocking"] >= n * 0.9


def test_a_look_that_finds_events_runs_their_iteration_without_the_engine():
    # A client and its server on one loop: each round trip's waits find
    # the other side's bytes already there, so the looks hand them over
    # and the engine makes few of the waits itself.
    loop = zloopgo.new_event_loop()
    n = 400

    async def main():
        async def echo(reader, writer):
            while data := await reader.read(65536):
                writer.write(data)
            # closed here: from 3.12.1 on, server.wait_closed() waits for it
            writer.close()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
        writer.write(b"x")
        await reader.readexactly(1)
        zloopgo.reset_stats(loop)
        for _ in range(n):
            writer.write(b"x" * 100)
            await reader.readexactly(100)
        stats = zloopgo.stats(loop)
        writer.close()
        server.close()
        await server.wait_closed()
        return stats

    try:
        s = loop.run_until_complete(main())
    finally:
        loop.close()
    assert s["looks_ahead_ready"] >= n * 1.5  # two waits a round trip, most looked
    assert s["waits_blocking"] <= n * 0.1


@pytest.mark.parametrize("extra", [62, 63, 64])
def test_a_loop_looks_ahead_while_it_watches_at_most_64_descriptors(extra):
    # the loop's own descriptor, the one reader of _yielding_with_a_reader's
    # kind and `extra` idle ones: 64, 65 or 66 watched
    loop = zloopgo.new_event_loop()
    idle = [socket.socketpair() for _ in range(extra)]
    a, b = socket.socketpair()

    async def main():
        for _, quiet in idle:
            loop.add_reader(quiet, print)
        loop.add_reader(b, print)
        await asyncio.sleep(0)
        zloopgo.reset_stats(loop)
        for _ in range(500):
            await asyncio.sleep(0)
        stats = zloopgo.stats(loop)
        for _, quiet in idle:
            loop.remove_reader(quiet)
        loop.remove_reader(b)
        return stats

    try:
        s = loop.run_until_complete(main())
    finally:
        loop.close()
        for x, y in [*idle, (a, b)]:
            x.close()
            y.close()
    assert s["descriptors"] == extra + 2
    assert s["waits"] == s["iterations"] and s["waits_skipped"] == 0
    if s["descriptors"] <= 64:
        assert s["looks_ahead"] >= 500 * 0.9
    else:
        assert s["looks_ahead"] == 0
