"""TLS over the loop's own socket transport: asyncio.sslproto's SSLProtocol
is the state machine on both loops, and on zloopgo the socket under it is
zloopgo's SocketTransport (create_connection(ssl=), create_server(ssl=) and
start_tls alike). Each test runs on asyncio and on zloopgo and compares
what a program sees: the bytes echoed, write buffer sizes, is_closing(),
EOF and connection_lost. CPython's own TLS tests run through
tests/test_conformance.py."""

import asyncio
import contextlib
import ssl
import sys
from asyncio import base_events, sslproto

import pytest
from helpers import FACTORIES, assert_same_observations

import zloopgo
from zloopgo import _transports

# Two changes of 3.14 that 3.13 took in a patch release (3.13.0 has neither,
# 3.13.15 both), which zloopgo's TLS path does again (zloopgo/_tls.py,
# capi/tls.c) where asyncio's own code has them: that code tells here too.
# start_tls hands what a StreamReaderProtocol's reader already holds to
# the SSL protocol (gh-142352):
START_TLS_MOVES_BUFFER = (
    "StreamReaderProtocol" in base_events.BaseEventLoop.start_tls.__code__.co_names
)
# the TLS transport's is_closing() asks the socket transport too:
IS_CLOSING_ASKS_TRANSPORT = hasattr(sslproto.SSLProtocol, "_is_transport_closing")

# around the sizes where the code changes path: one byte, one TLS record
# (16 KiB) and either side of it, the 64 KiB read, a megabyte
SIZES = [1, 16383, 16384, 16385, 65535, 65536, 65537, 1 << 20]


def _socket_transport(writer):
    """The transport under the TLS one (asyncio's _SSLProtocolTransport)."""
    return writer.transport._ssl_protocol._transport


async def _echo_server(server_ctx):
    async def echo(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server_ctx)
    return server, server.sockets[0].getsockname()[1]


def test_tls_streams_echo_every_size(loop, tls_contexts):
    server_ctx, client_ctx = tls_contexts

    async def main():
        server, port = await _echo_server(server_ctx)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        got = []
        for size in SIZES:
            payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
            writer.write(payload)
            await writer.drain()
            got.append(await reader.readexactly(size) == payload)
        kind = type(_socket_transport(writer))
        writer.close()
        await writer.wait_closed()
        server.close()
        await server.wait_closed()
        return got, kind

    got, kind = loop.run_until_complete(main())
    assert got == [True] * len(SIZES)
    if isinstance(loop, zloopgo.Loop):
        assert kind is _transports.SocketTransport
    else:
        assert kind is not _transports.SocketTransport


class _Recorder(asyncio.Protocol):
    def __init__(self):
        self.events = []
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        self.events.append("made")

    def data_received(self, data):
        self.events.append(("data", len(data)))

    def eof_received(self):
        self.events.append("eof")

    def connection_lost(self, exc):
        self.events.append(("lost", type(exc).__name__))
        self.lost.set_result(None)


def test_tls_protocol_sees_the_same_callbacks(loop, tls_contexts):
    """A server that sends 3 records then closes: the client protocol's
    callbacks, the transport's state after close() and its buffer size."""
    server_ctx, client_ctx = tls_contexts

    async def main():
        async def send_and_close(reader, writer):
            for size in (10, 20000, 70000):
                writer.write(b"y" * size)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(send_and_close, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        transport, proto = await asyncio.get_running_loop().create_connection(
            _Recorder, "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        await proto.lost
        received = sum(e[1] for e in proto.events if isinstance(e, tuple) and e[0] == "data")
        events = [e for e in proto.events if not (isinstance(e, tuple) and e[0] == "data")]
        state = (transport.is_closing(), _buffer_size_after_close(transport))
        server.close()
        await server.wait_closed()
        return received, events, state

    received, events, state = loop.run_until_complete(main())
    assert received == 90010
    if sys.version_info >= (3, 11):
        assert events == ["made", "eof", ("lost", "NoneType")]
    else:
        # 3.10's sslproto answers the peer's close_notify by shutting down
        # itself: connection_lost without eof_received
        assert events == ["made", ("lost", "NoneType")]
    if sys.version_info >= (3, 11):
        assert state == (True, 0)
    else:
        # 3.10's TLS transport is closing only once its own close() ran
        assert state == (False, "AttributeError")


def _buffer_size_after_close(transport):
    """3.11's sslproto answers 0 once the connection is lost; 3.10's older
    one asks the socket transport it has dropped by then (None)."""
    try:
        return transport.get_write_buffer_size()
    except AttributeError as exc:
        assert "'NoneType' object has no attribute 'get_write_buffer_size'" in str(exc)
        return "AttributeError"


async def _start_tls(writer, ctx, server_side=False, **kwargs):
    """The stream's upgrade: StreamWriter.start_tls from 3.11; on 3.10,
    which has no such method, loop.start_tls under the stream's protocol
    (the reader goes on getting the data; writes go to the TLS transport,
    which it returns). 3.11's infers server_side from the stream."""
    if sys.version_info >= (3, 11):
        await writer.start_tls(ctx, **kwargs)
        return writer
    assert not hasattr(writer, "start_tls")
    transport = writer.transport
    return await asyncio.get_running_loop().start_tls(
        transport, transport.get_protocol(), ctx, server_side=server_side, **kwargs
    )


def test_start_tls_upgrades_the_loops_own_transport(loop, tls_contexts):
    server_ctx, client_ctx = tls_contexts

    async def main():
        async def upgrade(reader, writer):
            assert await reader.readline() == b"STARTTLS\n"
            # the go-ahead and start_tls's pause_reading happen in one step
            # (its drain does not wait while the buffer is below the limit):
            # the client's hello cannot be read as plain bytes
            writer.write(b"GO\n")
            tls = await _start_tls(writer, server_ctx, server_side=True)
            data = await reader.readexactly(5)
            tls.write(data.upper())
            if tls is writer:
                await writer.drain()
            tls.close()

        server = await asyncio.start_server(upgrade, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        plain = type(writer.transport)
        writer.write(b"STARTTLS\n")
        assert await reader.readline() == b"GO\n"
        tls = await _start_tls(writer, client_ctx, server_hostname="localhost")
        tls.write(b"hello")
        reply = await reader.readexactly(5)
        eof = await reader.read()
        tls.close()
        if tls is writer:
            await writer.wait_closed()
        server.close()
        await server.wait_closed()
        return plain, reply, eof

    plain, reply, eof = loop.run_until_complete(main())
    assert (reply, eof) == (b"HELLO", b"")
    assert (plain is _transports.SocketTransport) == isinstance(loop, zloopgo.Loop)


def test_tls_handshake_failure_raises_the_same_error(loop, tls_contexts):
    """A client that trusts nobody: the same ssl error on both loops, and
    the server's handler never runs."""
    server_ctx, _ = tls_contexts

    async def main():
        handled = []

        async def handler(reader, writer):
            handled.append(1)
            writer.close()

        server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        untrusting = ssl.create_default_context()
        with pytest.raises(ssl.SSLCertVerificationError) as info:
            await asyncio.open_connection(
                "127.0.0.1", port, ssl=untrusting, server_hostname="localhost"
            )
        server.close()
        await server.wait_closed()
        return info.value.verify_code, handled

    verify_code, handled = loop.run_until_complete(main())
    assert verify_code != 0
    assert handled == []


class _FlowRecorder(asyncio.Protocol):
    def __init__(self):
        self.events = []

    def pause_writing(self):
        self.events.append("pause")

    def resume_writing(self):
        self.events.append("resume")

    def data_received(self, data):
        self.events.append(("data", len(data)))


def _marks_observations(loop_name, tls_contexts, high, low):
    """What a client sees writing over TLS with write-buffer marks of any
    number type: the native marks compare exact ints that fit a C long
    themselves and leave floats and larger ints to Python's comparison."""
    server_ctx, client_ctx = tls_contexts

    async def main():
        server, port = await _echo_server(server_ctx)
        transport, proto = await asyncio.get_running_loop().create_connection(
            _FlowRecorder, "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        seen = []
        try:
            transport.set_write_buffer_limits(high=high, low=low)
        except Exception as exc:  # noqa: BLE001 - a refusal is an observation
            seen.append(("refused", type(exc).__name__, str(exc)))
        seen.append(("limits", transport.get_write_buffer_limits()))
        for size in (1, 1000, 20000):
            transport.write(b"z" * size)
            seen.append(("wrote", size, transport.get_write_buffer_size(), list(proto.events)))
            for _ in range(20):
                await asyncio.sleep(0)
            seen.append(("after", size, transport.get_write_buffer_size(), list(proto.events)))
        transport.close()
        server.close()
        await server.wait_closed()
        return seen

    loop = FACTORIES[loop_name]()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize(
    "high, low",
    [
        (0, 0),
        (0.0, None),
        (1.5, 0.5),
        (1 << 70, 1 << 69),
        (-(1 << 70), None),
        (10**4, 10**4 + 1),
        # past one digit (2**30) but within a C long: converted, not read
        (1 << 40, (1 << 30) - 1),
        ((1 << 30) - 1, 1 << 30),
    ],
)
def test_tls_write_marks_of_any_number_type_behave_as_asyncios(tls_contexts, high, low):
    assert_same_observations(
        f"marks {high!r}, {low!r}", [], _marks_observations, tls_contexts, high, low
    )


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 has no StreamWriter.start_tls")
def test_start_tls_takes_the_hello_the_stream_already_holds(loop, tls_contexts):
    # The client's hello follows its STARTTLS line at once, so the server's
    # StreamReader holds it when the server upgrades. Where asyncio hands
    # those bytes to the SSL protocol the handshake completes; elsewhere
    # they stay in the reader (and the handshake would wait for them).
    server_ctx, client_ctx = tls_contexts

    async def main():
        seen = {}

        async def upgrade(reader, writer):
            assert await reader.readline() == b"STARTTLS\n"
            for _ in range(1000):  # the hello's bytes, read by the transport
                if reader._buffer:
                    break
                await asyncio.sleep(0.001)
            seen["held"] = len(reader._buffer) > 0
            upgrading = asyncio.ensure_future(writer.start_tls(server_ctx))
            for _ in range(3):  # its drain, then loop.start_tls up to the handshake's wait
                await asyncio.sleep(0)
            seen["left in the reader"] = len(reader._buffer)
            if not START_TLS_MOVES_BUFFER:
                upgrading.cancel()  # closes the transport: the client's handshake fails
                with contextlib.suppress(asyncio.CancelledError):
                    await upgrading
                return
            await upgrading
            data = await reader.readexactly(5)
            writer.write(data.upper())
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(upgrade, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"STARTTLS\n")
        try:
            await writer.start_tls(client_ctx, server_hostname="localhost")
        except (ConnectionError, ssl.SSLError) as exc:
            seen["client"] = "handshake failed"
            assert not START_TLS_MOVES_BUFFER, exc
        else:
            writer.write(b"hello")
            seen["client"] = await reader.readexactly(5)
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()
        server.close()
        await server.wait_closed()
        return seen

    seen = loop.run_until_complete(main())
    assert seen["held"]
    if START_TLS_MOVES_BUFFER:
        assert seen == {"held": True, "left in the reader": 0, "client": b"HELLO"}
    else:
        assert seen["left in the reader"] > 0 and seen["client"] == "handshake failed"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's SSL transport is another one")
def test_tls_transport_is_closing_once_its_socket_transport_is(loop, tls_contexts):
    # Where asyncio's _SSLProtocolTransport.is_closing() asks the socket
    # transport too, closing that one makes the TLS transport closing at
    # once (zloopgo's native is_closing asks it likewise); elsewhere only
    # its own close() or the lost connection do.
    server_ctx, client_ctx = tls_contexts

    async def main():
        server, port = await _echo_server(server_ctx)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        tls = writer.transport
        before = tls.is_closing()
        _socket_transport(writer).close()
        at_once = tls.is_closing()
        assert await reader.read() == b""
        after = tls.is_closing()
        writer.close()
        server.close()
        await server.wait_closed()
        return before, at_once, after

    assert loop.run_until_complete(main()) == (False, IS_CLOSING_ASKS_TRANSPORT, True)
