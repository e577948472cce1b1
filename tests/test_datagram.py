"""Datagram transports receive what asyncio's receive: the same bytes of
every size (empty, small, the largest UDP datagram), truncation at
max_size whatever max_size is set to (smaller, larger than the default,
0), the same error_received for an ICMP error, data that later datagrams
do not change, over UDP and Unix datagram sockets. zloopgo receives into
a per-loop receive buffer (zloopgo/_datagram.py); these pin that nothing
a program sees changes. Dual-run."""

import asyncio
import os
import socket
import tempfile

import pytest


class Collect(asyncio.DatagramProtocol):
    def __init__(self):
        self.got = []
        self.errors = []
        self.arrived = asyncio.Event()

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.got.append((type(data), data, addr))
        self.arrived.set()

    def error_received(self, exc):
        self.errors.append(type(exc))
        self.arrived.set()


async def receive(loop, payloads, max_size=None, family=socket.AF_INET):
    """Sends each payload from a plain socket to a datagram endpoint (its
    max_size set first if given); returns what the protocol received."""
    tmp = None
    if family == socket.AF_UNIX:
        tmp = tempfile.mkdtemp()
        path = os.path.join(tmp, "s")
        transport, proto = await loop.create_datagram_endpoint(
            Collect, local_addr=path, family=family
        )
        sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sender.bind(os.path.join(tmp, "sender"))
        target = path
    else:
        transport, proto = await loop.create_datagram_endpoint(Collect, local_addr=("127.0.0.1", 0))
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sender.bind(("127.0.0.1", 0))
        target = transport.get_extra_info("sockname")
    if max_size is not None:
        transport.max_size = max_size
    try:
        for payload in payloads:
            proto.arrived.clear()
            sender.sendto(payload, target)
            await asyncio.wait_for(proto.arrived.wait(), 5)
        sender_addr = sender.getsockname()
    finally:
        sender.close()
        transport.close()
        if tmp:
            for name in os.listdir(tmp):
                os.unlink(os.path.join(tmp, name))
            os.rmdir(tmp)
    return [(kind, data, addr == sender_addr) for kind, data, addr in proto.got]


PAYLOADS = [b"", b"a", bytes(range(256)) * 4, os.urandom(65507), b"after the big one"]


def test_every_size_arrives_whole_and_later_datagrams_leave_it_alone(loop):
    got = loop.run_until_complete(receive(loop, PAYLOADS))
    assert got == [(bytes, p, True) for p in PAYLOADS]


@pytest.mark.parametrize("max_size", [1, 100, 1023, 1024, 1025, 300 * 1024, 0, True, 1 << 30])
def test_max_size_truncates_as_asyncio(loop, max_size):
    payloads = [b"x" * 1024, b"y" * 2000, b"z"]
    got = loop.run_until_complete(receive(loop, payloads, max_size))
    assert got == [(bytes, p[:max_size], True) for p in payloads]


def test_unix_datagrams(loop):
    payloads = [b"one", b"", b"three" * 1000]
    got = loop.run_until_complete(receive(loop, payloads, family=socket.AF_UNIX))
    assert got == [(bytes, p, True) for p in payloads]


def test_an_icmp_error_reaches_error_received(loop):
    async def main():
        closed = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        closed.bind(("127.0.0.1", 0))
        addr = closed.getsockname()
        closed.close()  # nothing listens there now: the kernel answers with ICMP
        transport, proto = await loop.create_datagram_endpoint(Collect, remote_addr=addr)
        transport.sendto(b"anyone?")
        await asyncio.wait_for(proto.arrived.wait(), 5)
        transport.close()
        return proto.errors, proto.got

    assert loop.run_until_complete(main()) == ([ConnectionRefusedError], [])
