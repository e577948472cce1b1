"""Generated programs over loop.sock_recv and loop.sock_recvfrom, run on
asyncio and on zloopgo, compared observation by observation. zloopgo
receives into a buffer the loop keeps when the socket is a plain
socket.socket and n is an int from SCRATCH_FROM to SCRATCH_LIMIT (in
asyncio's steps in Python, zloopgo/_sockmethods.py, and in the adapter's,
capi/sockops.c, which also take every smaller n from a non-blocking one;
tests/test_sock_ops_diff.py generates programs for those); these
programs walk both sides of each of those limits:

- sockets: a Unix stream pair, a TCP loopback pair (its peer can reset the
  connection: ECONNRESET), a UDP pair (sock_recv and, from 3.11,
  sock_recvfrom; datagrams larger than n are cut), and a socket.socket
  subclass whose recv is its own;
- n: 1, small, 64 KiB, SCRATCH_FROM and one byte less, SCRATCH_LIMIT and
  one byte more, 0, negative, a float, True, a str;
- receives that find data at once and receives that wait for it (the
  reader callback), two waiting on one socket, a waiting one cancelled,
  the peer closed or reset while one waits;
- debug mode (a third of the programs), where a blocking socket is
  refused.

After each step the program runs the loop SETTLE iterations. Observed:
what each send took, every receive's outcome (data by length and digest,
the sender's address by role, the exception's type, errno and text) or
that it still waits, the subclass's own recv calls, and the exception
handler's calls. Both loops must see the same for each of
ZL_SOCK_RECV_PROGRAMS generated programs per socket kind (seeded; 60 by
default).
"""

import asyncio
import hashlib
import os
import random
import socket
import struct
import sys

import pytest
from helpers import FACTORIES, assert_same_observations

import zloopgo
from zloopgo import _sockmethods

PROGRAMS = int(os.environ.get("ZL_SOCK_RECV_PROGRAMS", "60"))
STEPS = 14
SETTLE = 6
FROM, LIMIT = _sockmethods.SCRATCH_FROM, _sockmethods.SCRATCH_LIMIT
SIZES = [1, 1000, 65536, FROM - 1, FROM, LIMIT, LIMIT + 1, 0, -1, 2.5, True, "x"]
SENDS = {
    "unix": [1, 1000, 65536, FROM, 200_000, LIMIT + 5],
    "tcp": [1, 1000, 65536, FROM, 200_000],
    "udp": [0, 1, 1000, FROM - 1 if FROM - 1 <= 65507 else 65507, 65507],
    "subclass": [1, 1000, 200_000],
}
KINDS = ["unix", "tcp", "udp", "subclass"]
RECVFROM = sys.version_info >= (3, 11)


class OwnRecv(socket.socket):
    """A socket whose recv is its own: it records each call."""

    calls = None

    def recv(self, n, *flags):
        self.calls.append(("own recv", n if type(n) is int else repr(n)))
        return super().recv(n, *flags)


def describe(exc):
    return (type(exc).__name__, getattr(exc, "errno", None), str(exc))


def pair(kind):
    """(our socket, the peer) - both non-blocking."""
    if kind in ("unix", "subclass"):
        a, b = socket.socketpair()
        if kind == "subclass":
            own = OwnRecv(a.family, a.type, fileno=a.detach())
            a = own
    elif kind == "tcp":
        with socket.create_server(("127.0.0.1", 0)) as listener:
            b = socket.create_connection(listener.getsockname())
            a, _ = listener.accept()
    else:
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        a.connect(b.getsockname())
        b.connect(a.getsockname())
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def make_program(rng, kind, debug):
    steps = []
    for _ in range(STEPS):
        r = rng.random()
        if r < 0.35:
            steps.append(("send", rng.choice(SENDS[kind])))
        elif r < 0.7:
            op = "recvfrom" if RECVFROM and kind == "udp" and rng.random() < 0.5 else "recv"
            steps.append((op, rng.choice(SIZES)))
        elif r < 0.8:
            steps.append(("cancel",))
        elif r < 0.86 and debug:
            steps.append(("blocking_recv", rng.choice(SIZES[:7])))
        elif r < 0.92:
            steps.append(("close_peer",))
        elif kind == "tcp":
            steps.append(("reset_peer",))
    return steps


def outcome(task, roles):
    if not task.done():
        return "waiting"
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    if exc is not None:
        return describe(exc)
    result = task.result()
    if isinstance(result, tuple):
        data, address = result
        return (len(data), hashlib.sha256(data).hexdigest()[:8], roles.get(address, "?"))
    return (len(result), hashlib.sha256(result).hexdigest()[:8])


async def run_program(loop, kind, steps):
    log = []
    loop.set_exception_handler(
        lambda _loop, ctx: log.append(("handler", ctx["message"], repr(ctx.get("exception"))))
    )
    ours, peer = pair(kind)
    if kind == "subclass":
        ours.calls = log
    roles = {peer.getsockname(): "peer"} if kind == "udp" else {}
    tasks = []
    peer_open = True
    for index, step in enumerate(steps):
        op = step[0]
        result = None
        if op == "send":
            if peer_open:
                try:
                    result = peer.send(bytes([index + 1]) * step[1])
                except OSError as exc:
                    result = describe(exc)
        elif op == "recv":
            tasks.append(loop.create_task(loop.sock_recv(ours, step[1])))
        elif op == "recvfrom":
            tasks.append(loop.create_task(loop.sock_recvfrom(ours, step[1])))
        elif op == "cancel":
            waiting = [t for t in tasks if not t.done()]
            if waiting:
                waiting[0].cancel()
        elif op == "blocking_recv":
            ours.setblocking(True)
            try:
                await loop.sock_recv(ours, step[1])
                result = "returned"
            except ValueError as exc:
                result = describe(exc)
            finally:
                ours.setblocking(False)
        elif op == "close_peer":
            if peer_open:
                peer.close()
                peer_open = False
        elif op == "reset_peer" and peer_open:
            # a zero linger: the close sends a reset
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            peer.close()
            peer_open = False
        for _ in range(SETTLE):
            await asyncio.sleep(0)
        log.append((step, result, tuple(outcome(t, roles) for t in tasks)))
    for t in tasks:
        t.cancel()
    for _ in range(SETTLE):
        await asyncio.sleep(0)
    ours.close()
    if peer_open:
        peer.close()
    return log


def observe(loop_name, kind, steps, debug):
    loop = FACTORIES[loop_name]()
    loop.set_debug(debug)
    try:
        return loop.run_until_complete(run_program(loop, kind, steps))
    finally:
        loop.close()


@pytest.mark.parametrize("kind", KINDS)
def test_generated_sock_recv_programs_observe_what_asyncio_observes(kind):
    rng = random.Random(repr(("sock_recv", kind)))
    for n in range(PROGRAMS):
        debug = n % 3 == 0
        steps = make_program(rng, kind, debug)
        assert_same_observations(f"program {n} ({kind})", steps, observe, kind, steps, debug)


class DerivedLoop(zloopgo.Loop):
    """A class derived from zloopgo's loop: sock_recv takes asyncio's steps
    in Python (zloopgo/_sockmethods.py), not the adapter's."""


def test_receives_from_scratch_from_on_take_the_scratch_buffer(monkeypatch):
    # The programs above prove nothing about the Python steps' scratch path
    # if it never ran: count the receives that reach recv_into. (The
    # adapter's own steps, for zloopgo.Loop itself, are
    # tests/test_sock_ops_diff.py's.)
    calls = []
    monkeypatch.setattr(
        _sockmethods,
        "scratch_view",
        lambda loop, n, view=_sockmethods.scratch_view: (
            calls.append(n),
            view(loop, n),
        )[1],
    )
    loop = DerivedLoop()
    try:

        async def main():
            a, b = socket.socketpair()
            a.setblocking(False)
            b.send(b"x" * 10)
            got = [await loop.sock_recv(a, FROM - 1)]
            b.send(b"y" * 10)
            got.append(await loop.sock_recv(a, FROM))
            waiting = loop.create_task(loop.sock_recv(a, LIMIT))
            await asyncio.sleep(0)
            b.send(b"z" * 10)
            got.append(await waiting)
            b.send(b"w" * 10)
            got.append(await loop.sock_recv(a, LIMIT + 1))
            a.close()
            b.close()
            return got

        got = loop.run_until_complete(main())
    finally:
        loop.close()
    assert got == [b"x" * 10, b"y" * 10, b"z" * 10, b"w" * 10]
    # the immediate one, then the waiting one's first try (the adapter's
    # _sock_recv makes its second)
    assert calls == [FROM, LIMIT]
