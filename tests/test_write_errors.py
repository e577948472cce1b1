"""What a write shows at once, on both loops: a protocol that writes and
then raises still gets its bytes to the peer; a write to a reset peer is
seen by is_closing(), _conn_lost and the next drain() before the
callback returns; a float high-water mark is accepted; Python code run
by a failing send (a logging handler) may write to other transports.
Each of these failed on zloopgo while it held a callback's writes until
the callback returned (issue 19, rows 1, 3, 4 and 6). Dual-run; the one
that crashed runs in a subprocess with a timeout."""

import asyncio
import logging
import socket
import struct

import pytest
from helpers import SCRIPT_FACTORIES, accepted_pair, check, read_until_eof, run_script


def _reset(peer):
    """Close the peer with a reset (SO_LINGER 0) instead of a FIN."""
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()


def _tcp_pair():
    """A connected loopback TCP pair (ours non-blocking, the peer blocking)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        ours = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
    ours.setblocking(False)
    return ours, peer


class _WritesThenRaises(asyncio.Protocol):
    """Answers its first data with an error message, then raises."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(b"error: bad request\n")
        raise ValueError("bad request")


class _BufferedWritesThenRaises(asyncio.BufferedProtocol):
    def __init__(self, where):
        self.where = where
        self.buf = bytearray(1024)

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        if self.where == "get_buffer":
            self.transport.write(b"error: bad request\n")
            raise ValueError("bad request")
        return self.buf

    def buffer_updated(self, nbytes):
        self.transport.write(b"error: bad request\n")
        raise ValueError("bad request")


class _EofWritesThenRaises(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def eof_received(self):
        self.transport.write(b"error: bad request\n")
        raise ValueError("bad request")


@pytest.mark.parametrize("where", ["data_received", "get_buffer", "buffer_updated", "eof_received"])
def test_bytes_written_before_a_protocol_raises_reach_the_peer(loop, loop_errors, where):
    async def main():
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        if where == "data_received":
            factory = _WritesThenRaises
        elif where == "eof_received":
            factory = _EofWritesThenRaises
        else:

            def factory():
                return _BufferedWritesThenRaises(where)

        transport, _ = await loop.connect_accepted_socket(factory, ours)
        if where == "eof_received":
            peer.shutdown(socket.SHUT_WR)
        else:
            peer.send(b"GET / HTTP/1.1\r\n\r\n")
        got = await loop.run_in_executor(None, read_until_eof, peer)
        transport.close()
        peer.close()
        return got

    assert loop.run_until_complete(main()) == b"error: bad request\n"
    assert [type(c.get("exception")) for c in loop_errors] == [ValueError]


def test_bytes_written_before_a_tls_protocol_raises_reach_the_peer(loop, loop_errors, tls_contexts):
    # SSLProtocol._fatal_error force-closes the socket transport under it:
    # the TLS record the protocol wrote first is on its way already.
    server_ctx, client_ctx = tls_contexts

    async def main():
        server = await loop.create_server(_WritesThenRaises, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        writer.write(b"GET / HTTP/1.1\r\n\r\n")
        try:
            got = await asyncio.wait_for(reader.read(100), 5)
        finally:
            writer.close()
            server.close()
        return got

    assert loop.run_until_complete(main()) == b"error: bad request\n"
    assert [type(c.get("exception")) for c in loop_errors] == [ValueError]


def test_a_write_to_a_reset_peer_is_seen_before_write_returns(loop):
    async def main():
        ours, peer = _tcp_pair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        transport.pause_reading()  # the reset is not found by a read first
        _reset(peer)
        await asyncio.sleep(0.01)
        seen = []

        def write_twice():
            transport.write(b"x")
            seen.append((transport.is_closing(), transport._conn_lost))
            transport.write(b"y")
            seen.append((transport.is_closing(), transport._conn_lost))

        loop.call_soon(write_twice)
        await asyncio.sleep(0.01)
        return seen

    assert loop.run_until_complete(main()) == [(True, 1), (True, 2)]


def test_drain_after_writing_to_a_reset_peer_raises_at_once(loop):
    async def main():
        ours, peer = _tcp_pair()
        _, writer = await asyncio.open_connection(sock=ours)
        writer.transport.pause_reading()
        _reset(peer)
        await asyncio.sleep(0.01)
        drains = 0
        try:
            for _ in range(200):
                writer.write(b"x" * 100)
                drains += 1
                await writer.drain()
        except ConnectionResetError:
            pass
        writer.close()
        return drains

    assert loop.run_until_complete(main()) == 1


@pytest.mark.parametrize("high", [65536.0, 10.5, 1e9])
def test_float_write_buffer_limits_are_accepted_inside_a_callback(loop, high):
    async def main():
        transport, _, peer = await accepted_pair(loop)
        transport.set_write_buffer_limits(high=high)
        done = loop.create_future()

        def write():
            transport.write(b"a" * 100)
            transport.write(b"b" * 100)
            done.set_result(transport.get_write_buffer_limits())

        loop.call_soon(write)
        limits = await done
        transport.close()
        got = await loop.run_in_executor(None, read_until_eof, peer)
        peer.close()
        return limits, got

    limits, got = loop.run_until_complete(main())
    assert limits == (high // 4, high)
    assert got == b"a" * 100 + b"b" * 100


@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_a_logging_handler_writing_during_a_failed_send(loop_name):
    # In debug mode asyncio logs a failed send through the 'asyncio'
    # logger; a handler that writes to another transport then runs inside
    # write(). zloopgo crashed (exit 139) when the failed send was one of
    # several held writes it sent when the callback returned.
    proc = run_script(
        loop_name,
        """
        import logging, struct

        async def main():
            loop = asyncio.get_running_loop()
            a, peer_a = socket.socketpair()
            b, peer_b = socket.socketpair()
            ta, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
            tb, _ = await loop.connect_accepted_socket(asyncio.Protocol, b)
            ta.pause_reading()
            peer_a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            peer_a.close()
            await asyncio.sleep(0.01)

            class WritesToB(logging.Handler):
                busy = False

                def emit(self, record):
                    if not WritesToB.busy:
                        WritesToB.busy = True
                        tb.write(b"log\\n")
                        WritesToB.busy = False

            logger = logging.getLogger("asyncio")
            logger.addHandler(WritesToB())
            logger.setLevel(logging.DEBUG)
            loop.set_debug(True)
            loop.slow_callback_duration = 100

            def cb():
                tb.write(b"x")
                ta.write(b"y")
                tb.write(b"z")

            loop.call_soon(cb)
            await asyncio.sleep(0.05)
            peer_b.settimeout(5)
            print("peer got", peer_b.recv(100))

        loop = factory()
        loop.run_until_complete(main())
        loop.close()
        """,
        timeout=30,
    )
    check(proc, "peer got b'xlog\\nz'")


class _Records(logging.Handler):
    """The 'asyncio' logger's records while it is installed."""

    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.mark.parametrize("where", ["read", "write"])
def test_the_debug_log_of_a_failed_read_or_send_carries_its_exception(loop, where):
    # asyncio's transport calls _fatal_error inside `except BaseException`:
    # in debug mode it logs with exc_info=True, which is that exception.
    # zloopgo's native read and write called it outside any except block,
    # so the record had no exception (found by tests/transport_diff).

    async def main():
        ours, peer = _tcp_pair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        if where == "write":
            transport.pause_reading()  # the reset is found by the send
        _reset(peer)
        await asyncio.sleep(0.05)
        if where == "write":
            transport.write(b"x")
        await asyncio.sleep(0.01)
        return transport.is_closing()

    logger = logging.getLogger("asyncio")
    records = _Records()
    saved = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)
    loop.set_debug(True)
    loop.slow_callback_duration = 100
    try:
        assert loop.run_until_complete(main()) is True
    finally:
        logger.removeHandler(records)
        logger.setLevel(saved)
    fatal = [r for r in records.records if "Fatal" in str(r.args)]
    assert [r.args[1] for r in fatal] == [f"Fatal {where} error on socket transport"]
    exc = fatal[0].exc_info[1] if fatal[0].exc_info else None
    assert isinstance(exc, (ConnectionResetError, BrokenPipeError))


def test_a_write_after_the_transport_closed_itself_reaches_no_other_socket(loop, loop_errors):
    # close() with bytes buffered: once they are sent the transport closes
    # its socket itself, and its descriptor number is free for the next
    # socket. Up to 3.13 that leaves _conn_lost 0 and asyncio's write fails
    # on the missing socket (an AttributeError from its _fatal_error, an
    # asyncio bug); zloopgo's native write sent to the descriptor number,
    # which may be another connection's by then (found by
    # tests/transport_diff).
    async def main():
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        lost = loop.create_future()

        class Watch(asyncio.Protocol):
            def connection_lost(self, exc):
                lost.set_result(exc)

        transport, _ = await loop.connect_accepted_socket(Watch, ours)
        fd = transport._sock_fd
        transport.write(b"a" * (1 << 20))
        assert transport.get_write_buffer_size() > 0
        transport.close()
        got = await loop.run_in_executor(None, read_until_eof, peer)
        assert await lost is None
        # the next sockets take the lowest free descriptor numbers: one of
        # them gets the transport's old one
        spare = []
        try:
            while not any(fd in (a.fileno(), b.fileno()) for a, b in spare):
                assert len(spare) < 100, f"descriptor {fd} was not reused"
                spare.append(socket.socketpair())
            a, b = spare[-1]
            victim_peer = b if a.fileno() == fd else a
            counted = transport._conn_lost  # 3.14.8+ and 3.15 count the close (gh-156512)
            try:
                transport.write(b"leak")
            except AttributeError as exc:
                raised = (type(exc), str(exc))
            else:
                raised = None
            victim_peer.setblocking(False)
            try:
                leaked = victim_peer.recv(100)
            except BlockingIOError:
                leaked = b""
        finally:
            for pair in spare:
                for s in pair:
                    s.close()
            peer.close()
        return len(got), counted, raised, leaked

    size, counted, raised, leaked = loop.run_until_complete(main())
    assert size == 1 << 20
    assert leaked == b""
    if counted:  # the write is counted as one to a lost connection
        assert raised is None
    else:
        assert raised == (
            AttributeError,
            "'NoneType' object has no attribute 'call_exception_handler'",
        )
    assert loop_errors == []


class _LenAnswers(bytearray):
    """A bytearray whose __len__ answers asyncio's `if not data`."""

    def __init__(self, data, length):
        super().__init__(data)
        self.length = length
        self.asked = 0

    def __len__(self):
        self.asked += 1
        return self.length


@pytest.mark.parametrize("length", [0, 1])
def test_a_subclass_len_answers_whether_there_is_data(loop, length):
    # asyncio's write returns at `if not data`, which a bytearray subclass
    # answers with its own __len__: one that says 0 sends nothing, even
    # with bytes in its buffer. zloopgo's native write read the buffer's
    # size (tests/hostile/found/write-of-a-subclass-ignores-len).
    ours, peer = socket.socketpair()
    transport, _ = loop.run_until_complete(loop.connect_accepted_socket(asyncio.Protocol, ours))
    data = _LenAnswers(b"abc", length)
    transport.write(data)
    transport.write(b"!")
    loop.run_until_complete(asyncio.sleep(0.01))
    transport.close()
    loop.run_until_complete(asyncio.sleep(0))
    got = read_until_eof(peer)
    peer.close()
    assert data.asked == 1
    assert got == (b"abc!" if length else b"!")
