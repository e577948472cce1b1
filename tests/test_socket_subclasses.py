"""A socket.socket subclass handed to a transport keeps its own methods:
asyncio's transports call the socket's recv, send, recvfrom and sendto,
so one that counts or transforms its bytes sees every one. zloopgo's own
transports make those system calls natively, so they take only a plain
socket.socket, and a subclass gets asyncio's transport (zloopgo/_loop.py,
_socket_transport_class). Dual-run: the same calls are seen on both loops.
"""

import asyncio
import socket

from helpers import Recorder


class Counting(socket.socket):
    """Records each of its own calls of the methods a transport makes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def recv(self, n, *flags):
        self.calls.append("recv")
        return super().recv(n, *flags)

    def recv_into(self, buf, *args):
        self.calls.append("recv_into")
        return super().recv_into(buf, *args)

    def send(self, data, *flags):
        self.calls.append("send")
        return super().send(data, *flags)

    def recvfrom(self, n, *flags):
        self.calls.append("recvfrom")
        return super().recvfrom(n, *flags)

    def sendto(self, data, *args):
        self.calls.append("sendto")
        return super().sendto(data, *args)


def counting(sock):
    """sock as a Counting socket (sock is detached)."""
    own = Counting(sock.family, sock.type, fileno=sock.detach())
    own.setblocking(False)
    return own


def test_a_stream_transport_calls_a_socket_subclass_recv_and_send(loop):
    async def main():
        a, peer = socket.socketpair()
        ours = counting(a)
        transport, recorder = await loop.create_connection(Recorder, sock=ours)
        transport.write(b"ping")
        peer.setblocking(False)
        for _ in range(5):
            await asyncio.sleep(0)
        got_by_peer = peer.recv(100)
        peer.send(b"pong")
        for _ in range(5):
            await asyncio.sleep(0)
        transport.close()
        peer.close()
        await asyncio.sleep(0)
        return got_by_peer, recorder.got, ours.calls

    got_by_peer, received, calls = loop.run_until_complete(main())
    assert got_by_peer == b"ping"
    assert received == [b"pong"]
    assert calls == ["send", "recv"]


def test_a_datagram_transport_calls_a_socket_subclass_recvfrom_and_sendto(loop):
    async def main():
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        a.bind(("127.0.0.1", 0))
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind(("127.0.0.1", 0))
        peer.setblocking(False)
        ours = counting(a)
        got = []

        class Protocol(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                got.append(data)

        transport, _ = await loop.create_datagram_endpoint(Protocol, sock=ours)
        transport.sendto(b"ping", peer.getsockname())
        for _ in range(5):
            await asyncio.sleep(0)
        got_by_peer, _ = peer.recvfrom(100)
        peer.sendto(b"pong", ours.getsockname())
        for _ in range(5):
            await asyncio.sleep(0)
        transport.close()
        peer.close()
        await asyncio.sleep(0)
        return got_by_peer, got, ours.calls

    got_by_peer, received, calls = loop.run_until_complete(main())
    assert got_by_peer == b"ping"
    assert received == [b"pong"]
    assert calls == ["sendto", "recvfrom"]
