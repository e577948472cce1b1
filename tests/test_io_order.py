"""Where descriptor callbacks fall among call_soon callbacks, dual-run.

asyncio polls once per iteration, before running what is ready: a
descriptor a callback makes ready (a write to a socketpair in the same
process, a reader added on a readable socket, data left unread) is
reported at the start of the next iteration, among the callbacks that
iteration runs. zloopgo skips that poll only after a batch that cannot
have made a descriptor ready (core/engine.go, Quiet); these tests pin
the cases where it must not skip it."""

import asyncio
import os
import resource
import signal
import socket

import pytest
from helpers import FACTORIES, assert_same_observations

import zloopgo


def _order(loop, first):
    """Runs `first(order, a, b)` as a callback with b's reader recording
    "R" (once), and returns the order of what ran."""
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    order = []
    done = loop.create_future()

    def on_readable():
        b.recv(1 << 20)
        loop.remove_reader(b)
        order.append("R")

    def finish():
        order.append("end")
        done.set_result(None)

    loop.add_reader(b, on_readable)
    loop.call_soon(first, order, a, b)
    loop.call_later(0.05, finish)
    loop.run_until_complete(done)
    a.close()
    b.close()
    return order


def test_a_callbacks_write_is_seen_by_the_next_iterations_poll(loop):
    def first(order, a, b):
        a.send(b"x")
        loop.call_soon(lambda: (order.append("Y"), loop.call_soon(order.append, "Z")))

    assert _order(loop, first) == ["Y", "R", "Z", "end"]


def test_a_transport_write_is_seen_by_the_next_iterations_poll(loop):
    async def main():
        order = []
        ours, peer = socket.socketpair()
        peer.setblocking(False)
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        got = loop.create_future()

        def on_readable():
            peer.recv(100)
            loop.remove_reader(peer)
            order.append("R")
            got.set_result(None)

        loop.add_reader(peer, on_readable)

        def first():
            transport.write(b"x")
            loop.call_soon(lambda: (order.append("Y"), loop.call_soon(order.append, "Z")))

        loop.call_soon(first)
        await got
        await asyncio.sleep(0.01)
        transport.close()
        peer.close()
        return order

    assert loop.run_until_complete(main()) == ["Y", "R", "Z"]


def test_a_stream_read_that_leaves_data_is_read_again_next_iteration(loop):
    # More than one read takes (max_size, 256 KiB) arrives at once: the
    # socket stays readable, and asyncio reads the rest in the very next
    # iteration, which also runs the task the first read woke; one
    # iteration later the task sees everything buffered.
    async def main():
        ours, peer = socket.socketpair()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        # a limit that never pauses reading here
        reader, writer = await asyncio.open_connection(sock=ours, limit=1 << 20)
        peer.sendall(b"d" * 400_000)
        first = await reader.read(1)  # woken by the first read
        seen = [len(reader._buffer)]
        await asyncio.sleep(0)
        seen.append(len(reader._buffer))
        writer.close()
        peer.close()
        return first, seen

    assert loop.run_until_complete(main()) == (b"d", [262_143, 399_999])


def test_a_busy_task_does_not_delay_a_readers_turn(loop):
    # A task that only yields (sleep(0)) keeps callbacks ready, so every
    # wait is skipped; asyncio still polls on each iteration, and a byte
    # the task writes reaches its reader after the same two yields every
    # time. Loops that poll only every so many iterations while callbacks
    # are ready run it tens or hundreds of yields later (docs/where-time-goes.md,
    # "One poll per iteration").
    async def main():
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        seen = []
        loop.add_reader(b, lambda: seen.append(b.recv(10)))
        yields_until_read = []
        for _ in range(20):
            seen.clear()
            a.send(b"x")
            yields = 0
            while not seen and yields < 1000:
                await asyncio.sleep(0)
                yields += 1
            yields_until_read.append(yields)
        loop.remove_reader(b)
        a.close()
        b.close()
        return yields_until_read

    assert loop.run_until_complete(main()) == [2] * 20


def _room_freed_observations(loop_name):
    # Both ends of a socket pair on one loop: a Protocol transport whose
    # write waits in its buffer (its writer is watched), and a stream whose
    # native read frees room in the socket. A task woken by each read looks
    # at the writer's buffer, yields once, and looks again.
    loop = FACTORIES[loop_name]()

    async def main():
        a, b = socket.socketpair()
        for s in (a, b):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader, writer = await asyncio.open_connection(sock=b, limit=1 << 20)
        tr, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
        tr.write(b"w" * 60_000)
        seen, got = [], 0
        while got < 60_000:
            got += len(await reader.read(65536))
            seen.append(tr.get_write_buffer_size())
            await asyncio.sleep(0)
            seen.append(tr.get_write_buffer_size())
        tr.close()
        writer.close()
        return seen

    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_a_read_that_frees_a_watched_writers_room_is_seen_by_the_next_poll():
    # The read makes the other end writable: asyncio's next poll reports it
    # and its _write_ready runs in that iteration, after the woken task.
    # zloopgo skips a poll after a quiet batch of stream reads only while no
    # descriptor is watched for writing (capi/dispatch.c), so the task sees
    # the writer's buffer shrink after the same yields on both loops.
    assert_same_observations(
        "writer's buffer as the reader sees it",
        "60,000 bytes through 4 KiB buffers",
        _room_freed_observations,
    )


@pytest.mark.parametrize("source", ["write", "signal"])
def test_after_a_quiet_batch_the_programs_readiness_keeps_its_place(loop, loop_name, source):
    # Issue 39, item 16. A batch of one native stream read that drained its
    # socket is quiet: zloopgo skips the next iteration's zero-timeout poll
    # (capi/dispatch.c), which could report only what became ready on its
    # own meanwhile. What the program makes ready comes from program code,
    # which makes its batch not quiet, so the poll after it is made: a
    # write to a watched socket, or a signal to itself (its handler's
    # callback, through the self-pipe), lands among the callbacks exactly
    # where asyncio's lands. Readiness from outside the process (or from a
    # thread in a system call) during a quiet batch is reported one
    # iteration later than asyncio's select(0) would if it came before
    # that select; asyncio itself reports it there whenever it comes a few
    # microseconds later, so no program can tell the two apart.
    order = []

    async def main():
        ours, peer = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=ours)
        r, w = socket.socketpair()
        r.setblocking(False)

        def on_readable():
            r.recv(100)
            order.append("R")

        loop.add_reader(r, on_readable)
        if source == "signal":
            loop.add_signal_handler(signal.SIGUSR1, order.append, "SIG")
        before = zloopgo.stats() if loop_name == "zloopgo" else None
        try:
            for i in range(20):
                peer.send(b"x")
                await reader.read(100)  # a batch of that one read: quiet on zloopgo
                order.append(("read", i))
                if source == "signal":
                    os.kill(os.getpid(), signal.SIGUSR1)
                else:
                    w.send(b"y")
                loop.call_soon(order.append, f"X{i}")
                loop.call_soon(
                    lambda i=i: (order.append(f"Y{i}"), loop.call_soon(order.append, f"Z{i}"))
                )
                for _ in range(4):
                    await asyncio.sleep(0)
            return zloopgo.stats()["waits_skipped"] - before["waits_skipped"] if before else None
        finally:
            loop.remove_reader(r)
            if source == "signal":
                loop.remove_signal_handler(signal.SIGUSR1)
            writer.close()
            for s in (peer, r, w):
                s.close()

    skipped = loop.run_until_complete(main())
    last = ["R", "Z{}"] if source == "write" else ["Z{}", "SIG"]
    expected = []
    for i in range(20):
        expected += [("read", i), f"X{i}", f"Y{i}"] + [x.format(i) for x in last]
    assert order == expected
    if loop_name == "zloopgo":
        assert skipped >= 10  # the quiet batches did skip their polls


@pytest.mark.parametrize("ready", [127, 128, 255, 256, 257, 600])
def test_every_descriptor_ready_at_once_runs_in_one_iteration(loop, ready):
    # asyncio's selector asks for as many events as it has registrations,
    # so every reader ready at once runs in the iteration after the sends,
    # in the order the sockets became ready; zloopgo's engine grows its
    # event buffer with the descriptors watched (core/engine.go,
    # eventsFor): 256 at first, the sizes around it and past a doubling.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * ready + 100
    assert hard == resource.RLIM_INFINITY or hard >= need, (
        f"RLIMIT_NOFILE's hard limit {hard} < {need}"
    )
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    pairs = []
    try:
        pairs = [socket.socketpair() for _ in range(ready)]
        log = []

        async def main():
            for i, (_, b) in enumerate(pairs):
                b.setblocking(False)
                loop.add_reader(b, lambda i=i, b=b: (b.recv(10), log.append(i)))
            for a, _ in pairs:
                a.send(b"x")
            for tick in range(3):
                log.append(f"tick{tick}")
                await asyncio.sleep(0)
            for _, b in pairs:
                loop.remove_reader(b)

        loop.run_until_complete(main())
        assert log == ["tick0", "tick1", *range(ready), "tick2"]
    finally:
        for a, b in pairs:
            a.close()
            b.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
