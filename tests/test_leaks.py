"""Leaks and lifetimes: memory stays flat under sustained call_soon, timer,
connection and loop create/close churn; no descriptor is left open; and
callbacks, their arguments, their contexts' values and protocols are
released once they have run, were cancelled, or the loop closed.

Every test runs on stock asyncio and on zloopgo. Sizes are modest so the
file stays quick; scripts/reliability/soak.py runs the full-size figures
(1M call_soon, 100k timers, 10k connections, 500 loop cycles) in fresh
processes.

Two measures of "flat", both taken after a warm-up and a full collection:
resident memory (generous bound: it also sees the Go runtime's heap) and
sys.getallocatedblocks() (tight: every leaked Python object, handle or
PyMem block from the adapter counts). The last one reads 0 when CPython
runs with PYTHONMALLOC=malloc (valgrind); its check is then vacuous.
"""

import asyncio
import contextvars
import gc
import os
import socket
import sys
import threading
import warnings
import weakref
from typing import ClassVar

import pytest
from helpers import check, run_script

MiB = 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def collect():
    for _ in range(3):
        gc.collect()


class Mark:
    """Memory and object counts at one moment, after a full collection."""

    def __init__(self):
        collect()
        self.rss = rss()
        self.blocks = sys.getallocatedblocks()

    def growth(self):
        now = Mark()
        return now.rss - self.rss, now.blocks - self.blocks


def assert_flat(start, what, rss_bound=16 * MiB, block_bound=2_000):
    d_rss, d_blocks = start.growth()
    assert d_rss < rss_bound, f"{what}: RSS grew by {d_rss / MiB:.1f} MiB after warm-up"
    assert d_blocks < block_bound, f"{what}: {d_blocks} more allocated blocks after warm-up"


def assert_rounds_flat(one_round, warm, measured, what):
    """Run `warm` rounds, then `measured` more, and assert that the
    measured ones left memory flat."""
    for _ in range(warm):
        one_round()
    start = Mark()
    for _ in range(measured):
        one_round()
    assert_flat(start, what)


def one_iteration(loop):
    loop.call_soon(loop.stop)
    loop.run_forever()


class Obj:
    """A weak-referenceable callable, argument or context value."""

    def __call__(self, *args):
        pass


def noop(*args):
    pass


# ---- sustained load: memory flat after warm-up ------------------------


def test_call_soon_200k_memory_flat(loop):
    batch, warm, rounds = 10_000, 4, 20

    def one_round():
        for i in range(batch):
            loop.call_soon(noop, i)
        one_iteration(loop)

    assert_rounds_flat(one_round, warm, rounds - warm, "call_soon")


def test_call_soon_chain_memory_flat(loop):
    # one handle per iteration: 50k iterations through the whole engine
    remaining = [0]
    done = [None]

    def step(arg):
        remaining[0] -= 1
        if remaining[0] > 0:
            loop.call_soon(step, arg)
        else:
            done[0].set_result(None)

    def run(n):
        remaining[0] = n
        done[0] = loop.create_future()
        loop.call_soon(step, Obj())
        loop.run_until_complete(done[0])

    run(5_000)
    start = Mark()
    run(50_000)
    assert_flat(start, "call_soon chain")


def test_timers_50k_created_and_cancelled_memory_flat(loop):
    batch, warm, rounds = 5_000, 2, 10

    def one_round():
        handles = [loop.call_later(3600 + i * 1e-3, noop, i) for i in range(batch)]
        one_iteration(loop)  # the timers reach the engine's heap
        for h in handles:
            h.cancel()
        # cancelled before they reach the engine
        for i in range(batch // 10):
            loop.call_later(7200, noop, i).cancel()
        del handles
        one_iteration(loop)

    assert_rounds_flat(one_round, warm, rounds - warm, "timers created and cancelled")


def test_timers_fired_memory_flat(loop):
    batch, warm, rounds = 5_000, 2, 10
    fired = []

    async def one_round():
        fut = loop.create_future()
        count = [0]

        def cb(i):
            count[0] += 1
            if count[0] == batch:
                fut.set_result(None)

        for i in range(batch):
            loop.call_later((i % 7) * 1e-4, cb, i)
        await fut
        fired.append(count[0])

    assert_rounds_flat(
        lambda: loop.run_until_complete(one_round()), warm, rounds - warm, "timers fired"
    )
    assert fired == [batch] * rounds


async def echo_once(reader, writer):
    data = await reader.read(100)
    writer.write(data)
    await writer.drain()
    writer.close()  # the server closes first: no client port stays in TIME_WAIT
    await writer.wait_closed()


async def connect_many(port, n, concurrency):
    async def client(i):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping %d" % i)
        got = await reader.read()
        writer.close()
        await writer.wait_closed()
        assert got == b"ping %d" % i

    for first in range(0, n, concurrency):
        await asyncio.gather(*(client(i) for i in range(first, min(n, first + concurrency))))


def test_connections_500_memory_and_fds(loop):
    fds0 = open_fds()

    async def main():
        server = await asyncio.start_server(echo_once, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        await connect_many(port, 100, 10)  # warm-up
        start = Mark()
        fds_open = open_fds()
        await connect_many(port, 400, 20)
        # every connection is closed on both sides; only the server's socket remains
        assert open_fds() == fds_open
        server.close()
        await server.wait_closed()
        return start

    start = loop.run_until_complete(main())
    assert_flat(start, "500 connections")
    assert open_fds() == fds0


def test_loop_cycles_with_server_release_fds(loop_factory):
    def cycle():
        lp = loop_factory()
        try:

            async def main():
                server = await asyncio.start_server(echo_once, "127.0.0.1", 0)
                port = server.sockets[0].getsockname()[1]
                await connect_many(port, 5, 5)
                lp.call_later(3600, noop)  # a pending timer left at close
                lp.call_soon(noop)
                server.close()
                await server.wait_closed()

            lp.run_until_complete(main())
            lp.run_until_complete(lp.shutdown_asyncgens())
        finally:
            lp.close()

    cycle()  # the first loop may start the Go runtime and asyncio's caches
    fds0 = open_fds()
    for _ in range(5):
        cycle()
    start = Mark()
    for i in range(45):
        cycle()
        assert open_fds() == fds0, f"descriptors left open after cycle {i}"
    assert_flat(start, "loop cycles")


def test_unclosed_loop_collected_releases_fds(loop_factory):
    lp = loop_factory()
    lp.close()  # warm-up: the first loop may open what later loops share
    del lp
    collect()
    fds0 = open_fds()
    for _ in range(20):
        lp = loop_factory()
        lp.call_soon(noop)
        lp.call_later(3600, noop)
        lp.run_until_complete(asyncio.sleep(0))
        del lp
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # unclosed loop
            collect()
    assert open_fds() == fds0


def test_no_descriptor_opened_after_the_first_loop(loop_name):
    """What a loop library opens once per process is open by the time its
    first loop has closed: later loops, however much memory they churn,
    leave no descriptor behind. zloopgo's Go runtime used to open its
    poller (an epoll descriptor and an eventfd) the first time its
    scavenger gave memory back, hundreds of loops into issue 39's soak; a
    loop with 100,000 timers makes the scavenger run at once. In a fresh
    interpreter, because in this one an earlier test has already made it
    run."""
    proc = run_script(
        loop_name,
        """
        def noop():
            pass

        def descriptors():
            links = set()
            for fd in os.listdir("/proc/self/fd"):
                try:
                    links.add((int(fd), os.readlink(f"/proc/self/fd/{fd}")))
                except OSError:  # the listing's own, closed by now
                    pass
            return links

        factory().close()
        before = descriptors()
        for _ in range(3):
            lp = factory()
            timers = [lp.call_later(3600 + i * 1e-3, noop) for i in range(100_000)]
            lp.call_soon(lp.stop)
            lp.run_forever()  # the timers reach the scheduler
            for timer in timers:
                timer.cancel()
            lp.call_soon(lp.stop)
            lp.run_forever()
            lp.close()
            del timers
        print("gained", sorted(descriptors() - before))
        """,
    )
    check(proc, "gained []")


def test_add_remove_reader_churn_memory_flat(loop):
    r, w = socket.socketpair()
    try:

        def one_round():
            for _ in range(2_000):
                loop.add_reader(r, noop, Obj())
                loop.add_writer(w, noop, Obj())
                loop.remove_reader(r)
                loop.remove_writer(w)
            one_iteration(loop)

        assert_rounds_flat(one_round, 2, 10, "add_reader/remove_reader")
    finally:
        r.close()
        w.close()


# ---- lifetimes: what a handle holds is released -----------------------

SCHEDULE = ["call_soon", "call_soon_threadsafe", "call_soon_other_thread", "call_later", "call_at"]


def schedule(loop, how, callback, *args, context=None):
    if how == "call_soon":
        return loop.call_soon(callback, *args, context=context)
    if how == "call_soon_threadsafe":
        return loop.call_soon_threadsafe(callback, *args, context=context)
    if how == "call_soon_other_thread":
        out = []
        t = threading.Thread(
            target=lambda: out.append(loop.call_soon_threadsafe(callback, *args, context=context))
        )
        t.start()
        t.join(10)
        return out[0]
    if how == "call_later":
        return loop.call_later(0.001, callback, *args, context=context)
    return loop.call_at(loop.time() + 0.001, callback, *args, context=context)


def scheduled_with_refs(loop, how):
    """Schedules a callable object with two arguments in a context that
    holds a third object; returns the handle and weakrefs to all four."""
    callback, arg, kwarg_like, value = Obj(), Obj(), Obj(), Obj()
    var = contextvars.ContextVar("leak_var")
    ctx = contextvars.copy_context()
    ctx.run(var.set, value)
    h = schedule(loop, how, callback, arg, kwarg_like, context=ctx)
    refs = [weakref.ref(o) for o in (callback, arg, kwarg_like, value)]
    return h, refs


def alive(refs):
    return [i for i, r in enumerate(refs) if r() is not None]


@pytest.mark.parametrize("how", SCHEDULE)
def test_released_after_run(loop, how):
    h, refs = scheduled_with_refs(loop, how)
    del h
    assert alive(refs) == [0, 1, 2, 3]
    loop.run_until_complete(asyncio.sleep(0.01))
    # reference counting alone: no collection needed
    assert alive(refs) == []


@pytest.mark.parametrize("how", SCHEDULE)
def test_cancel_releases_callback_and_args_at_once(loop, how):
    h, refs = scheduled_with_refs(loop, how)
    h.cancel()
    # asyncio's Handle.cancel() drops the callback and its arguments; the
    # context goes with the handle
    assert alive(refs[:3]) == []
    del h
    one_iteration(loop)
    assert alive(refs) == []


@pytest.mark.parametrize("how", SCHEDULE)
def test_close_releases_pending(loop, how):
    h, refs = scheduled_with_refs(loop, how)
    del h
    loop.close()
    assert alive(refs) == []


@pytest.mark.parametrize("how", ["call_soon", "call_later"])
def test_released_after_callback_raised(loop, how):
    seen = []
    loop.set_exception_handler(lambda lp, ctx: seen.append(type(ctx["exception"]).__name__))

    class Failing(Obj):
        def __call__(self, *args):
            raise ValueError("boom")

    cb, arg = Failing(), Obj()
    refs = [weakref.ref(cb), weakref.ref(arg)]
    schedule(loop, how, cb, arg)
    del cb, arg
    loop.run_until_complete(asyncio.sleep(0.01))
    assert seen == ["ValueError"]
    # the exception's traceback held the handle's frame; it is gone with the context
    collect()
    assert alive(refs) == []


def test_cancelled_while_running_released_after_run(loop):
    # a callback that cancels its own handle: the callback object stays
    # alive while it runs, then goes
    box = {}

    class SelfCancel(Obj):
        def __call__(self, arg):
            box["h"].cancel()
            box["seen"] = arg is not None

    cb, arg = SelfCancel(), Obj()
    refs = [weakref.ref(cb), weakref.ref(arg)]
    box["h"] = loop.call_soon(cb, arg)
    del cb, arg
    one_iteration(loop)
    assert box["seen"]
    del box["h"]
    assert alive(refs) == []


def test_reader_released_after_remove_and_close(loop):
    r1, w1 = socket.socketpair()
    r2, w2 = socket.socketpair()
    try:
        cbs = [Obj() for _ in range(4)]
        refs = [weakref.ref(o) for o in cbs]
        loop.add_reader(r1, cbs[0], cbs[1])
        loop.add_reader(r2, cbs[2], cbs[3])
        del cbs
        w1.send(b"x")
        loop.run_until_complete(asyncio.sleep(0.01))  # it ran: still registered
        assert alive(refs) == [0, 1, 2, 3]
        loop.remove_reader(r1)
        assert alive(refs) == [2, 3]
        loop.close()  # close releases the one still registered
        assert alive(refs) == []
    finally:
        for s in (r1, w1, r2, w2):
            s.close()


class TrackedProtocol(asyncio.Protocol):
    instances: ClassVar[weakref.WeakSet] = weakref.WeakSet()

    def __init__(self, on_lost=None):
        self.on_lost = on_lost
        self.transport = None
        TrackedProtocol.instances.add(self)

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)
        self.transport.close()

    def connection_lost(self, exc):
        if self.on_lost is not None and not self.on_lost.done():
            self.on_lost.set_result(None)


def test_protocols_and_transports_released_after_close(loop):
    TrackedProtocol.instances = weakref.WeakSet()

    async def main():
        server = await loop.create_server(TrackedProtocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transports = []
        for _ in range(20):
            lost = loop.create_future()
            tr, pr = await loop.create_connection(
                lambda lost=lost: TrackedProtocol(lost), "127.0.0.1", port
            )
            tr.write(b"hello")
            await lost  # the server echoed and closed; the client saw EOF
            transports.append(weakref.ref(tr))
            del tr, pr
        server.close()
        await server.wait_closed()
        await asyncio.sleep(0)
        return transports

    transports = loop.run_until_complete(main())
    one_iteration(loop)
    # reference counting alone releases the protocols (asyncio breaks the
    # transport <-> protocol cycle in connection_lost); a transport sits in
    # a cycle of its own on asyncio too, so it needs a collection
    assert len(TrackedProtocol.instances) == 0
    collect()
    assert [t for t in transports if t() is not None] == []


def test_finished_loop_object_released(loop_factory):
    lp = loop_factory()
    holder = Obj()
    lp.call_soon(holder)
    lp.call_later(3600, holder)
    lp.run_until_complete(asyncio.sleep(0))
    lp.close()
    refs = [weakref.ref(lp), weakref.ref(holder)]
    del lp, holder
    collect()
    assert alive(refs) == []
