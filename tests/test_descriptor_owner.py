"""A transport's native reads and writes reach the socket the transport
holds at that moment, never the number it held before (issue 39, row 1).

asyncio calls self._sock's methods, so a socket closed under a transport
fails (EBADF, or AttributeError once the transport dropped it) and
nothing reaches whatever descriptor took its number. zloopgo's native
paths used the number kept in _sock_fd: a datagram transport that closed
itself after flushing its buffer sent the next datagram to another
socket's peer, and a stream transport wrote to and read from the socket
that took a closed one's number. Each test reuses the freed number on
purpose (os.dup2) and checks that nothing reaches it, on both loops."""

import asyncio
import os
import socket
import sys

import pytest
from helpers import FACTORIES


def take_number(number):
    """A connected socket pair whose first end is descriptor `number` (a
    number some socket just gave up): (taker, its peer)."""
    taker, peer = socket.socketpair()
    if taker.fileno() != number:
        os.dup2(taker.fileno(), number)
        taker.close()
        taker = socket.socket(fileno=number)
    return taker, peer


def waiting(sock):
    """What is waiting on sock, without waiting for more."""
    sock.setblocking(False)
    try:
        return sock.recv(1024)
    except BlockingIOError:
        return b""


class Datagrams(asyncio.DatagramProtocol):
    def __init__(self):
        self.events = []
        self.lost = asyncio.get_running_loop().create_future()

    def error_received(self, exc):
        self.events.append(("error_received", type(exc).__name__, getattr(exc, "errno", None)))

    def connection_lost(self, exc):
        self.lost.set_result(exc)


def test_a_datagram_transport_closed_after_flushing_sends_nothing_to_its_old_number(loop, tmp_path):
    async def main():
        # a named Unix datagram socket: its sender gets EAGAIN once the
        # receiver's queue is full, so the transport buffers
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.bind(str(tmp_path / "receiver"))
        receiver.setblocking(False)
        sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sender.connect(str(tmp_path / "receiver"))
        sender.setblocking(False)
        number = sender.fileno()
        transport, protocol = await loop.create_datagram_endpoint(Datagrams, sock=sender)
        for _ in range(100_000):
            if transport.get_write_buffer_size():
                break
            transport.sendto(b"x" * 512)
        assert transport.get_write_buffer_size()
        transport.close()  # deferred until the buffer is flushed
        while not protocol.lost.done():
            while True:
                try:
                    receiver.recv(4096)
                except BlockingIOError:
                    break
            await asyncio.sleep(0.005)
        # asyncio's state now: no socket, and the connection not counted lost
        state = (transport._sock, transport._conn_lost)
        taker, peer = take_number(number)
        try:
            transport.sendto(b"leak")
        except Exception as exc:  # noqa: BLE001 - the outcome is compared
            outcome = type(exc).__name__
        else:
            outcome = "returned"
        await asyncio.sleep(0.01)
        reached = waiting(peer)
        for s in (receiver, taker, peer):
            s.close()
        return state, outcome, reached, protocol.events

    state, outcome, reached, events = loop.run_until_complete(main())
    assert state == (None, 0)
    assert outcome == "AttributeError"
    assert reached == b""
    assert events == []


def test_a_udp_transport_whose_socket_was_closed_sends_nothing_to_its_old_number(loop):
    async def main():
        receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        receiver.bind(("127.0.0.1", 0))
        ours = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ours.connect(receiver.getsockname())
        ours.setblocking(False)
        transport, protocol = await loop.create_datagram_endpoint(Datagrams, sock=ours)
        number = ours.fileno()
        ours.close()  # the program closes the socket it handed over
        taker, peer = take_number(number)
        transport.sendto(b"leak")
        await asyncio.sleep(0.01)
        reached = waiting(peer)
        transport.abort()
        for s in (receiver, taker, peer):
            s.close()
        return reached, protocol.events

    reached, events = loop.run_until_complete(main())
    assert reached == b""
    assert events == [("error_received", "OSError", 9)]  # EBADF, from the closed socket


class Stream(asyncio.Protocol):
    def __init__(self):
        self.got = []
        self.lost = asyncio.get_running_loop().create_future()

    def data_received(self, data):
        self.got.append(data)

    def connection_lost(self, exc):
        self.lost.set_result(None if exc is None else (type(exc).__name__, exc.errno))


def test_a_stream_write_after_the_socket_was_closed_reaches_no_other_socket(loop):
    async def main():
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        transport, protocol = await loop.connect_accepted_socket(Stream, ours)
        number = ours.fileno()
        ours.close()  # the program closes the socket it handed over
        taker, peer = take_number(number)
        transport.write(b"leak")
        await asyncio.wait([protocol.lost], timeout=2)
        lost = protocol.lost.result() if protocol.lost.done() else "open"
        reached = waiting(peer)
        for s in (theirs, taker, peer):
            s.close()
        return reached, lost

    reached, lost = loop.run_until_complete(main())
    assert reached == b""
    assert lost == ("OSError", 9)  # EBADF: asyncio's fatal write error


class Buffered(asyncio.BufferedProtocol):
    def __init__(self):
        self.buffer = bytearray(64)
        self.got = []
        self.lost = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint):
        return self.buffer

    def buffer_updated(self, nbytes):
        self.got.append(bytes(self.buffer[:nbytes]))

    def connection_lost(self, exc):
        self.lost.set_result(None if exc is None else (type(exc).__name__, exc.errno))


@pytest.mark.parametrize("protocol_class", [Stream, Buffered])
def test_a_read_reported_for_a_socket_closed_meanwhile_reads_no_other_socket(loop, protocol_class):
    # Two transports readable in the same iteration: the first callback to
    # run closes the other's socket and puts a socket with bytes waiting
    # at its number. The other's read then fails on its closed socket
    # (asyncio: EBADF, a fatal read error); it must not read those bytes.
    async def main():
        pairs = [socket.socketpair() for _ in range(2)]
        transports, protocols = [], []
        for ours, _ in pairs:
            ours.setblocking(False)
            t, p = await loop.connect_accepted_socket(protocol_class, ours)
            transports.append(t)
            protocols.append(p)
        taken = []

        def first_to_run(me):
            other = 1 - me
            if taken:
                return
            ours = pairs[other][0]
            number = ours.fileno()
            ours.close()
            taker, peer = take_number(number)
            peer.sendall(b"secret")
            taken.extend([taker, peer])

        for i, p in enumerate(protocols):
            record = p.data_received if protocol_class is Stream else p.buffer_updated

            def hooked(arg, i=i, record=record):
                record(arg)
                first_to_run(i)

            if protocol_class is Stream:
                p.data_received = hooked
            else:
                p.buffer_updated = hooked
        for _, theirs in pairs:
            theirs.sendall(b"hello")
        # one connection is lost (its read fails), or nothing more happens
        await asyncio.wait([p.lost for p in protocols], timeout=2, return_when="FIRST_COMPLETED")
        await asyncio.sleep(0.01)
        got = [b"".join(p.got) for p in protocols]
        lost = [p.lost.result() if p.lost.done() else "open" for p in protocols]
        untouched = waiting(taken[0]) == b"secret"
        for t in transports:
            t.abort()
        for s in taken + [theirs for _, theirs in pairs]:
            s.close()
        return sorted(got), sorted(map(str, lost)), untouched

    got, lost, untouched = loop.run_until_complete(main())
    assert got == [b"", b"hello"]
    assert untouched
    assert "('OSError', 9)" in lost


# ---- a BufferedProtocol's buffer that recv_into cannot fill (issue 39, row 9)


class OwnLength(bytearray):
    """A bytearray whose len() is the program's: asyncio asks it first."""

    def __init__(self, events, size):
        super().__init__(size)
        self.events = events

    def __len__(self):
        self.events.append("len")
        return super().__len__()


class NoLength:
    def __len__(self):
        raise ValueError("no length")


def strided(events):
    return memoryview(bytearray(16))[::2]


BUFFERS = {
    "list": lambda events: [0] * 8,
    "bytes": lambda events: b"12345678",
    "read-only view": lambda events: memoryview(b"12345678"),
    "strided view": strided,
    "empty": lambda events: bytearray(),
    "len raises": lambda events: NoLength(),
    "own len": lambda events: OwnLength(events, 8),
    "bytearray": lambda events: bytearray(8),
    "view": lambda events: memoryview(bytearray(8)),
}

if sys.version_info >= (3, 12):  # a class of Python code exports a buffer (PEP 688)

    class OwnBuffer:
        def __init__(self, events, fail=False):
            self.events, self.fail, self.store = events, fail, bytearray(8)

        def __len__(self):
            return 8

        def __buffer__(self, flags):
            self.events.append("__buffer__")
            if self.fail:
                raise ValueError("no buffer")
            return memoryview(self.store)

    BUFFERS["own __buffer__"] = lambda events: OwnBuffer(events)
    BUFFERS["__buffer__ raises"] = lambda events: OwnBuffer(events, fail=True)


class Hands(asyncio.BufferedProtocol):
    """Hands the buffer `make` gives to every read and records what happens."""

    def __init__(self, make):
        self.make = make
        self.events = []
        self.lost = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint):
        self.events.append("get_buffer")
        return self.make(self.events)

    def buffer_updated(self, nbytes):
        self.events.append(("buffer_updated", nbytes))
        self.lost.done() or self.lost.set_result(None)

    def connection_lost(self, exc):
        self.events.append(("connection_lost", type(exc).__name__, str(exc)))
        self.lost.done() or self.lost.set_result(None)


def buffer_read(loop_name, kind):
    """What a BufferedProtocol handing a `kind` buffer sees on a fresh loop
    of `loop_name`: its calls, then what the exception handler got."""
    loop = FACTORIES[loop_name]()
    handled = []
    loop.set_exception_handler(lambda _, c: handled.append(c))

    async def main():
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        transport, protocol = await loop.connect_accepted_socket(lambda: Hands(BUFFERS[kind]), ours)
        theirs.sendall(b"hello")
        await asyncio.wait([protocol.lost], timeout=5)
        transport.abort()
        await asyncio.sleep(0)
        theirs.close()
        return protocol.events

    try:
        events = loop.run_until_complete(main())
    finally:
        loop.close()
    return events + [
        (c["message"], type(c["exception"]).__name__, str(c["exception"])) for c in handled
    ]


FAILS_IN = {  # where asyncio reports each buffer's failure
    "list": "Fatal read error on socket transport",
    "bytes": "Fatal read error on socket transport",
    "read-only view": "Fatal read error on socket transport",
    "strided view": "Fatal read error on socket transport",
    "__buffer__ raises": "Fatal read error on socket transport",
    "empty": "Fatal error: protocol.get_buffer() call failed.",
    "len raises": "Fatal error: protocol.get_buffer() call failed.",
}


@pytest.mark.parametrize("kind", sorted(BUFFERS))
def test_a_buffer_recv_into_cannot_fill_fails_as_on_asyncio(kind):
    want = buffer_read("asyncio", kind)
    if kind in FAILS_IN:
        assert want[-1][0] == FAILS_IN[kind], want
    else:
        assert ("buffer_updated", 5) in want, want
    assert buffer_read("zloopgo", kind) == want
