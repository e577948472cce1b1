"""The native socket read's handling of what asyncio reads for every
packet (capi/transport.c): max_size (one-digit ints read from the object,
larger ones converted, anything else - 0, negative, too large for recv,
not an int, a lookup that raises - handed to asyncio's own read, so that
recv's result or error and asyncio's message are what the program sees),
_conn_lost (0, small and large counts, False), and _read_ready_cb (the
transport's own read method is called directly only when it is bound to
the same transport; anything else is called). Every test runs on asyncio
and on zloopgo; tests/transport_diff generates programs that set
max_size among its other operations."""

import asyncio
import socket
from unittest import mock

import pytest


def _connected(loop, protocol_factory):
    """A client transport (with its protocol) and the server's socket."""
    a, b = socket.socketpair()

    async def connect():
        return await loop.create_connection(protocol_factory, sock=a)

    transport, protocol = loop.run_until_complete(connect())
    return transport, protocol, b


class Collect(asyncio.Protocol):
    def __init__(self):
        self.chunks = []
        self.got = None

    def data_received(self, data):
        self.chunks.append(bytes(data))
        if self.got is not None and sum(map(len, self.chunks)) >= self.got[1]:
            self.got[0].set_result(None)


def _receive(loop, protocol, peer, data):
    protocol.got = (loop.create_future(), len(data))
    peer.sendall(data)
    loop.run_until_complete(asyncio.wait_for(protocol.got[0], 5))
    return b"".join(protocol.chunks)


def test_a_replaced_read_callback_is_called(loop):
    transport, protocol, peer = _connected(loop, Collect)
    seen = []
    original = transport._read_ready_cb

    def spy():
        seen.append(1)
        return original()

    transport._read_ready_cb = spy
    try:
        assert _receive(loop, protocol, peer, b"hello") == b"hello"
        assert seen
    finally:
        transport.close()
        peer.close()
        loop.run_until_complete(asyncio.sleep(0))


def test_a_read_callback_bound_to_another_transport_reads_that_one(loop):
    """Both sides of the direct call's condition: a native read method bound
    to a different transport is called bound to it, as asyncio would."""
    t1, p1, peer1 = _connected(loop, Collect)
    t2, p2, peer2 = _connected(loop, Collect)
    t1._read_ready_cb = t2._read_ready__data_received
    try:
        peer1.sendall(b"for one")
        loop.run_until_complete(asyncio.sleep(0.02))
        # t1's readiness ran t2's read, which found nothing on t2's socket
        assert p1.chunks == [] and p2.chunks == []
        assert _receive(loop, p2, peer2, b"for two") == b"for two"
        assert p1.chunks == []
    finally:
        for t, peer in ((t1, peer1), (t2, peer2)):
            t.close()
            peer.close()
        loop.run_until_complete(asyncio.sleep(0))


@pytest.mark.parametrize("max_size", [3, 2**30, True, 2**62, 2**70, -1, "x", 3.0])
def test_max_size_small_large_and_unusual(loop, max_size):
    """One-digit ints are read without PyLong_AsLong, larger ones with it:
    reads of at most max_size bytes either way. True, an int too large for
    recv, a negative one, a str or a float take asyncio's own read: recv's
    conversion (True reads one byte) or a fatal read error with recv's
    exception, on both loops. 2**62 fits a C long but no buffer of that
    size can be had: recv's MemoryError, a fatal read error too."""
    transport, protocol, peer = _connected(loop, Collect)
    transport.max_size = max_size
    data = bytes(range(200)) * 5
    try:
        if max_size is True or (type(max_size) is int and 0 < max_size < 2**62):
            assert _receive(loop, protocol, peer, data) == data
            assert max(map(len, protocol.chunks)) <= max_size
            return
        with mock.patch.object(loop, "call_exception_handler") as handler:
            peer.sendall(data)
            loop.run_until_complete(asyncio.sleep(0.05))
        assert transport.is_closing() and protocol.chunks == []
        context = handler.call_args[0][0]
        assert context["message"] == "Fatal read error on socket transport"
        expected = {int: (OverflowError, ValueError, MemoryError), str: TypeError, float: TypeError}
        assert isinstance(context["exception"], expected[type(max_size)])
    finally:
        transport.close()
        peer.close()
        loop.run_until_complete(asyncio.sleep(0))


def test_max_size_zero_reads_as_end_of_file(loop):
    """recv(0) returns b"": asyncio takes it as the peer's EOF."""
    eof = []

    class Eof(Collect):
        def eof_received(self):
            eof.append(True)

    transport, protocol, peer = _connected(loop, Eof)
    transport.max_size = 0
    try:
        peer.sendall(b"data")
        loop.run_until_complete(asyncio.sleep(0.05))
        assert eof == [True] and protocol.chunks == [] and transport.is_closing()
    finally:
        transport.close()
        peer.close()
        loop.run_until_complete(asyncio.sleep(0))


def test_a_max_size_lookup_that_fails_is_a_fatal_read_error(loop):
    transport, protocol, peer = _connected(loop, Collect)
    cls = type(transport)

    class Failing(cls):
        __slots__ = ()

        @property
        def max_size(self):
            raise LookupError("no size")

    transport.__class__ = Failing
    try:
        with mock.patch.object(loop, "call_exception_handler") as handler:
            peer.sendall(b"data")
            loop.run_until_complete(asyncio.sleep(0.05))
        context = handler.call_args[0][0]
        assert context["message"] == "Fatal read error on socket transport"
        assert isinstance(context["exception"], LookupError)
        assert transport.is_closing() and protocol.chunks == []
    finally:
        transport.__class__ = cls
        transport.close()
        peer.close()
        loop.run_until_complete(asyncio.sleep(0))


@pytest.mark.parametrize("lost", [0, 1, 2**40, False])
def test_conn_lost_small_and_large_ints(loop, lost):
    """_conn_lost as asyncio counts it (0, then 1, 2, ...) and ints that are
    not one digit: write() after the connection is lost logs and drops the
    bytes when it is truthy, sends them when it is 0."""
    transport, _, peer = _connected(loop, Collect)
    peer.setblocking(False)
    transport._conn_lost = lost
    try:
        with mock.patch("asyncio.selector_events.logger") as log:
            transport.write(b"x")
        loop.run_until_complete(asyncio.sleep(0.01))
        try:
            got = peer.recv(10)
        except BlockingIOError:
            got = b""
        assert got == (b"" if lost else b"x")
        assert log.warning.called == (lost >= 5)  # asyncio warns from the 5th write on
    finally:
        transport._conn_lost = 0
        transport.close()
        peer.close()
        loop.run_until_complete(asyncio.sleep(0))


class Buffered(asyncio.BufferedProtocol):
    """Keeps what buffer_updated reports; switch_to, when set, is the
    protocol get_buffer makes the transport's before handing its buffer."""

    def __init__(self):
        self.buf = bytearray(64)
        self.got = []
        self.switch_to = None
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        if self.switch_to is not None:
            self.transport.set_protocol(self.switch_to)
        return self.buf

    def buffer_updated(self, nbytes):
        self.got.append(bytes(self.buf[:nbytes]))


@pytest.mark.parametrize(
    "protocol_factory, method, message",
    [
        (
            Collect,
            "_read_ready__data_received",
            "Fatal error: protocol.data_received() call failed.",
        ),
        (Buffered, "_read_ready__get_buffer", "Fatal error: protocol.get_buffer() call failed."),
    ],
)
def test_a_protocol_attribute_that_is_gone_is_that_steps_fatal_error(
    loop, protocol_factory, method, message
):
    """asyncio reads self._protocol inside the try around the protocol's
    call: an attribute that is gone goes to _fatal_error with that call's
    message, not out of the read (found by the hostile generator, natives
    seed 38, on an object made without __init__)."""
    transport, protocol, peer = _connected(loop, protocol_factory)
    transport.pause_reading()
    peer.sendall(b"pending")
    loop.run_until_complete(asyncio.sleep(0.02))
    fatal = []
    transport._fatal_error = lambda exc, message: fatal.append((type(exc), message))
    del transport._protocol
    try:
        assert getattr(transport, method)() is None
        assert fatal == [(AttributeError, message)]
    finally:
        transport._protocol = protocol
        del transport._fatal_error
        transport.close()
        peer.close()
        loop.run_until_complete(asyncio.sleep(0))


def test_buffer_updated_goes_to_the_protocol_get_buffer_set(loop):
    """asyncio reads self._protocol again after recv_into: a get_buffer
    that sets another protocol has that one's buffer_updated called."""
    transport, first, peer = _connected(loop, Buffered)
    second = Buffered()
    second.buf = first.buf  # the buffer first's get_buffer hands over
    first.switch_to = second
    try:
        peer.sendall(b"switched")
        loop.run_until_complete(asyncio.sleep(0.05))
        assert first.got == [] and second.got == [b"switched"]
        assert transport.get_protocol() is second
    finally:
        transport.close()
        peer.close()
        loop.run_until_complete(asyncio.sleep(0))
