"""Network smoke tests on stock asyncio and on zloopgo: streams and
protocols over TCP and Unix sockets, sock_* methods, getaddrinfo."""

import asyncio
import os
import socket
import sys

import pytest

TIMEOUT = 20


def run(loop, coro):
    return loop.run_until_complete(asyncio.wait_for(coro, TIMEOUT))


async def echo_handler(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
        await writer.wait_closed()


def test_streams_tcp_echo(loop):
    payload = bytes(range(256)) * 4  # 1 KiB

    async def main():
        server = await asyncio.start_server(echo_handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for i in range(100):
                msg = payload[i:] + payload[:i]
                writer.write(msg)
                await writer.drain()
                assert await reader.readexactly(len(msg)) == msg
            writer.write_eof()
            assert await reader.read() == b""
            writer.close()
            await writer.wait_closed()
        return port

    assert run(loop, main()) > 0


def test_streams_tcp_large_transfer(loop):
    # Enough data to fill the socket buffers: writers pause and resume.
    size = 8 * 1024 * 1024
    blob = os.urandom(1024) * (size // 1024)

    async def main():
        server = await asyncio.start_server(echo_handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)

            async def send():
                writer.write(blob)
                await writer.drain()
                writer.write_eof()

            sender = asyncio.create_task(send())
            received = await reader.read(-1)
            await sender
            writer.close()
            await writer.wait_closed()
            return received

    assert run(loop, main()) == blob


def test_streams_many_concurrent_clients(loop):
    async def client(port, n):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        msg = f"client {n}\n".encode()
        writer.write(msg)
        line = await reader.readline()
        writer.close()
        await writer.wait_closed()
        return line == msg

    async def main():
        server = await asyncio.start_server(echo_handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await asyncio.gather(*(client(port, n) for n in range(50)))

    assert run(loop, main()) == [True] * 50


class EchoServer(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)

    def eof_received(self):
        self.transport.close()


class EchoClient(asyncio.Protocol):
    def __init__(self, expected, done):
        self.expected = expected
        self.done = done
        self.buf = bytearray()
        self.events = []

    def connection_made(self, transport):
        self.events.append("made")
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        if len(self.buf) >= self.expected:
            self.transport.write_eof()

    def eof_received(self):
        self.events.append("eof")

    def connection_lost(self, exc):
        self.events.append("lost")
        self.done.set_result(exc)


def test_protocol_tcp_echo(loop):
    payload = b"x" * 1024 * 100

    async def main():
        lp = asyncio.get_running_loop()
        server = await lp.create_server(EchoServer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        done = lp.create_future()
        transport, proto = await lp.create_connection(
            lambda: EchoClient(len(payload), done), "127.0.0.1", port
        )
        assert transport.get_extra_info("peername") == ("127.0.0.1", port)
        transport.write(payload)
        exc = await done
        server.close()
        await server.wait_closed()
        return exc, proto

    exc, proto = run(loop, main())
    assert exc is None
    assert bytes(proto.buf) == b"x" * 1024 * 100
    assert proto.events[0] == "made" and proto.events[-1] == "lost"


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")
def test_unix_streams_echo(loop, tmp_path):
    path = str(tmp_path / "echo.sock")

    async def main():
        server = await asyncio.start_unix_server(echo_handler, path)
        async with server:
            reader, writer = await asyncio.open_unix_connection(path)
            for i in range(20):
                msg = f"line {i}\n".encode() * 10
                writer.write(msg)
                assert await reader.readexactly(len(msg)) == msg
            writer.close()
            await writer.wait_closed()
        return os.path.exists(path)

    # asyncio removes the socket file when the server closes (3.13+)
    exists_after = run(loop, main())
    assert exists_after is (sys.version_info < (3, 13))


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")
def test_unix_protocol_echo(loop, tmp_path):
    path = str(tmp_path / "proto.sock")

    async def main():
        lp = asyncio.get_running_loop()
        server = await lp.create_unix_server(EchoServer, path)
        done = lp.create_future()
        _, proto = await lp.create_unix_connection(lambda: EchoClient(5, done), path)
        proto.transport.write(b"hello")
        await done
        server.close()
        await server.wait_closed()
        return bytes(proto.buf)

    assert run(loop, main()) == b"hello"


def test_sock_methods_on_socketpair(loop):
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)

    async def main():
        lp = asyncio.get_running_loop()
        big = b"y" * (4 * 1024 * 1024)  # larger than the socket buffer

        async def reader():
            got = bytearray()
            while len(got) < len(big):
                chunk = await lp.sock_recv(b, 65536)
                assert chunk
                got += chunk
            return bytes(got)

        task = asyncio.create_task(reader())
        await lp.sock_sendall(a, big)
        assert await task == big

        buf = bytearray(16)
        await lp.sock_sendall(b, b"into")
        n = await lp.sock_recv_into(a, buf)
        assert bytes(buf[:n]) == b"into"

        # a receive waiting for data that arrives later
        later = asyncio.create_task(lp.sock_recv(a, 100))
        await asyncio.sleep(0.01)
        assert not later.done()
        await lp.sock_sendall(b, b"later")
        return await later

    try:
        assert run(loop, main()) == b"later"
    finally:
        a.close()
        b.close()


def test_sock_connect_accept(loop):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    client = socket.socket()
    client.setblocking(False)

    async def main():
        lp = asyncio.get_running_loop()
        accept = asyncio.create_task(lp.sock_accept(listener))
        await lp.sock_connect(client, listener.getsockname())
        conn, _ = await accept
        conn.setblocking(False)
        with conn:
            await lp.sock_sendall(client, b"ping")
            return await lp.sock_recv(conn, 10)

    try:
        assert run(loop, main()) == b"ping"
    finally:
        client.close()
        listener.close()


def test_sock_recv_cancelled_removes_reader(loop):
    a, b = socket.socketpair()
    a.setblocking(False)

    async def main():
        lp = asyncio.get_running_loop()
        task = asyncio.create_task(lp.sock_recv(a, 10))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the reader was removed: the socket can be watched afresh
        assert lp.remove_reader(a) is False
        b.send(b"after")
        return await lp.sock_recv(a, 10)

    try:
        assert run(loop, main()) == b"after"
    finally:
        a.close()
        b.close()


def test_getaddrinfo(loop):
    async def main():
        lp = asyncio.get_running_loop()
        return await lp.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)

    infos = run(loop, main())
    loop.run_until_complete(loop.shutdown_default_executor())
    assert infos
    family, type_, _, _, sockaddr = infos[0]
    assert family == socket.AF_INET
    assert type_ == socket.SOCK_STREAM
    assert sockaddr == ("127.0.0.1", 80)
    assert infos == socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)


def test_getnameinfo(loop):
    async def main():
        lp = asyncio.get_running_loop()
        return await lp.getnameinfo(
            ("127.0.0.1", 80), socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
        )

    assert run(loop, main()) == ("127.0.0.1", "80")
    loop.run_until_complete(loop.shutdown_default_executor())


def test_datagram_echo(loop):
    class Echo(asyncio.DatagramProtocol):
        def connection_made(self, transport):
            self.transport = transport

        def datagram_received(self, data, addr):
            self.transport.sendto(data.upper(), addr)

    class Client(asyncio.DatagramProtocol):
        def __init__(self, fut):
            self.fut = fut

        def datagram_received(self, data, addr):
            self.fut.set_result(data)

    async def main():
        lp = asyncio.get_running_loop()
        server, _ = await lp.create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
        addr = server.get_extra_info("sockname")
        fut = lp.create_future()
        client, _ = await lp.create_datagram_endpoint(lambda: Client(fut), remote_addr=addr)
        client.sendto(b"shout")
        try:
            return await fut
        finally:
            client.close()
            server.close()

    assert run(loop, main()) == b"SHOUT"


def test_connection_refused(loop):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now

    async def main():
        await asyncio.open_connection("127.0.0.1", port)

    with pytest.raises(ConnectionRefusedError):
        run(loop, main())
