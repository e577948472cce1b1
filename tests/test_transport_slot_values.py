"""What the native socket write and read do with each value of the
attributes asyncio looks at first (capi/transport.c): write() reads
_eof, _empty_waiter, _sock, _loop, _conn_lost and _buffer, a read
_conn_lost, _sock and _loop. The native paths read them in one go only
when each holds the usual value (_eof False, _empty_waiter None,
_conn_lost an exact 0), and one by one, in asyncio's order, otherwise:
these tests set every other kind of value (truthy and falsy ones of
other types, an int subclass, objects whose __bool__ runs loop code) and
compare what the program sees with asyncio's: the exception and its
message, what the peer receives, what the protocol is handed, the count
in _conn_lost. Every test runs on asyncio and on zloopgo, with the
collector running at every allocation.

It does not look at sends that block or at buffered data
(tests/test_write_order.py, tests/transport_diff); tests/
test_read_path_values.py has max_size and the read callback."""

import asyncio
import socket

import pytest


class Flag:
    """A truth value with a __bool__ of its own."""

    def __init__(self, value):
        self.value = value

    def __bool__(self):
        return self.value


class IntZero(int):
    """0, but not an exact int."""


def _connected(loop):
    """A client transport, its protocol (which keeps what it is handed) and
    the peer's socket, non-blocking."""
    a, b = socket.socketpair()
    b.setblocking(False)

    class Keep(asyncio.Protocol):
        def __init__(self):
            self.chunks = []

        def data_received(self, data):
            self.chunks.append(bytes(data))

    async def connect():
        return await loop.create_connection(Keep, sock=a)

    transport, protocol = loop.run_until_complete(connect())
    return transport, protocol, b


def _peer_got(loop, peer):
    loop.run_until_complete(asyncio.sleep(0.01))
    try:
        return peer.recv(100)
    except BlockingIOError:
        return b""


def _close(loop, transport, peer):
    transport.close()
    peer.close()
    loop.run_until_complete(asyncio.sleep(0))


def _write(transport, data=b"x"):
    try:
        transport.write(data)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome
        return (type(e).__name__, str(e))
    return None


EOF_VALUES = [False, True, 0, 1, None, "", "x", IntZero(0), Flag(False), Flag(True)]


@pytest.mark.parametrize("eof", EOF_VALUES, ids=repr)
def test_write_after_eof_values(loop, collect_often, eof):
    """`if self._eof:` raises before anything else is looked at."""
    transport, _, peer = _connected(loop)
    transport._eof = eof
    try:
        outcome = _write(transport)
        got = _peer_got(loop, peer)
        if eof:
            assert outcome == ("RuntimeError", "Cannot call write() after write_eof()")
            assert got == b""
        else:
            assert outcome is None
            assert got == b"x"
    finally:
        transport._eof = False
        _close(loop, transport, peer)


@pytest.mark.parametrize("waiter", [None, 0, False, "", "future"], ids=repr)
def test_write_while_sendfile_values(loop, collect_often, waiter):
    """`if self._empty_waiter is not None:` a sendfile is in progress,
    whatever the value's truth."""
    transport, _, peer = _connected(loop)
    transport._empty_waiter = loop.create_future() if waiter == "future" else waiter
    try:
        outcome = _write(transport)
        got = _peer_got(loop, peer)
        if waiter is None:
            assert (outcome, got) == (None, b"x")
        else:
            assert outcome == ("RuntimeError", "unable to write; sendfile is in progress")
            assert got == b""
    finally:
        transport._empty_waiter = None
        _close(loop, transport, peer)


LOST_VALUES = [0, 1, True, False, IntZero(0), IntZero(3), 2**40, Flag(False), Flag(True)]


# (a truthy _conn_lost that is not a number fails asyncio's count: left out)
@pytest.mark.parametrize("lost", LOST_VALUES[:-1], ids=repr)
def test_write_with_conn_lost_values(loop, collect_often, lost):
    """A truthy _conn_lost drops the bytes and counts the write; a falsy
    one sends them."""
    transport, _, peer = _connected(loop)
    transport._conn_lost = lost
    try:
        assert _write(transport) is None
        got = _peer_got(loop, peer)
        if lost:
            assert got == b""
            assert transport._conn_lost == lost + 1
        else:
            assert got == b"x"
            assert transport._conn_lost is lost
    finally:
        transport._conn_lost = 0
        _close(loop, transport, peer)


@pytest.mark.parametrize("lost", LOST_VALUES, ids=repr)
def test_read_with_conn_lost_values(loop, collect_often, lost):
    """A truthy _conn_lost leaves what the peer sent unread; a falsy one
    hands it to the protocol."""
    transport, protocol, peer = _connected(loop)
    transport._conn_lost = lost
    try:
        peer.send(b"hello")
        loop.run_until_complete(asyncio.sleep(0.01))
        assert protocol.chunks == ([] if lost else [b"hello"])
    finally:
        transport._conn_lost = 0
        _close(loop, transport, peer)


def test_an_eof_whose_truth_closes_the_transport(loop, collect_often):
    """_eof's __bool__ closes the transport and says False: the write goes
    on to find the connection lost, and drops its bytes; the peer sees
    the end of the stream."""
    transport, _, peer = _connected(loop)

    class Closes:
        def __bool__(self):
            transport.close()
            return False

    transport._eof = Closes()
    try:
        assert _write(transport) is None
        loop.run_until_complete(asyncio.sleep(0.01))
        assert transport.is_closing()
        assert peer.recv(100) == b""  # end of stream, nothing before it
    finally:
        transport._eof = False
        _close(loop, transport, peer)


def test_a_waiter_set_by_eofs_truth_is_seen(loop, collect_often):
    """_eof's __bool__ puts a sendfile's waiter in place: asyncio reads
    _empty_waiter after _eof, so the write is refused."""
    transport, _, peer = _connected(loop)

    class SetsWaiter:
        def __bool__(self):
            transport._empty_waiter = loop.create_future()
            return False

    transport._eof = SetsWaiter()
    try:
        outcome = _write(transport)
        assert outcome == ("RuntimeError", "unable to write; sendfile is in progress")
        assert _peer_got(loop, peer) == b""
    finally:
        transport._eof = False
        transport._empty_waiter = None
        _close(loop, transport, peer)
