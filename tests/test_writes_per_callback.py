"""Several writes made by one callback (capi/transport.c, "writes": each
is its own send); these dual-run tests pin down that nothing a program
can see differs from asyncio: order, content, and what write_eof,
writelines, close and abort see afterwards.
tests/test_write_order.py covers order under every size and flow control."""

import asyncio
import socket

import pytest
from helpers import accepted_pair, read_until_eof


def test_writes_in_one_callback_arrive_in_order(loop):
    async def main():
        transport, _, peer = await accepted_pair(loop)
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(bytearray(b"body-1,"))
        transport.write(memoryview(b"body-2,"))
        transport.writelines([b"line-1,", b"line-2"])
        transport.write_eof()
        await asyncio.sleep(0)
        data = await loop.run_in_executor(None, read_until_eof, peer)
        transport.close()
        peer.close()
        return data

    assert loop.run_until_complete(main()) == b"HTTP/1.1 200 OK\r\n\r\nbody-1,body-2,line-1,line-2"


@pytest.mark.parametrize("finish", ["close", "abort_after_yield", "write_eof"])
def test_data_written_before_closing_reaches_the_peer(loop, finish):
    async def main():
        transport, _, peer = await accepted_pair(loop)
        transport.write(b"a" * 1000)
        transport.write(b"b" * 1000)
        if finish == "close":
            transport.close()
        elif finish == "write_eof":
            transport.write_eof()
        else:
            await asyncio.sleep(0)  # the callback returned: the data left
            transport.abort()
        data = await loop.run_in_executor(None, read_until_eof, peer)
        transport.close()
        peer.close()
        await asyncio.sleep(0)
        return data

    assert loop.run_until_complete(main()) == b"a" * 1000 + b"b" * 1000


def test_mutating_a_bytearray_after_write_does_not_change_what_is_sent(loop):
    async def main():
        transport, _, peer = await accepted_pair(loop)
        buf = bytearray(b"original")
        transport.write(buf)
        buf[:] = b"changed!"
        transport.write_eof()
        data = await loop.run_in_executor(None, read_until_eof, peer)
        transport.close()
        peer.close()
        return data

    assert loop.run_until_complete(main()) == b"original"


def test_many_and_large_writes_in_one_callback(loop):
    # More chunks and bytes than one coalesced send holds: the rest is sent
    # or buffered in order, flow control included.
    chunks = [bytes([65 + i % 26]) * (100 + i * 37) for i in range(300)]
    chunks.append(b"z" * 300_000)

    async def main():
        transport, _, peer = await accepted_pair(loop)
        for c in chunks:
            transport.write(c)
        transport.write_eof()
        data = await loop.run_in_executor(None, read_until_eof, peer)
        transport.close()
        peer.close()
        return data

    assert loop.run_until_complete(main()) == b"".join(chunks)


def test_write_buffer_size_after_write_is_zero_as_after_a_full_send(loop):
    async def main():
        transport, _, peer = await accepted_pair(loop)
        transport.write(b"x" * 100)
        size = transport.get_write_buffer_size()
        await asyncio.sleep(0)
        got = await loop.run_in_executor(None, peer.recv, 100)
        transport.close()
        peer.close()
        return size, got

    assert loop.run_until_complete(main()) == (0, b"x" * 100)


def test_order_kept_when_held_writes_only_partly_leave(loop):
    # Small socket buffers: sending the held writes to make room for the
    # next one leaves part of them buffered; the next write must queue
    # behind that part, not overtake it.
    async def main():
        ours, peer = socket.socketpair()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        ours.setblocking(False)
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        first, second = b"A" * 60_000, b"B" * 60_000
        transport.write(first)
        transport.write(second)
        transport.write(b"C" * 10)
        transport.write_eof()
        data = await loop.run_in_executor(None, read_until_eof, peer)
        transport.close()
        peer.close()
        return data

    assert loop.run_until_complete(main()) == b"A" * 60_000 + b"B" * 60_000 + b"C" * 10


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_a_partly_sent_large_write_keeps_its_tail_in_place(loop, kind):
    # Bigger than the socket takes at once: the kernel gets a prefix, the
    # rest is buffered from the offset where the send stopped.
    payload = bytes(range(251)) * 4200  # ~1 MiB, a period no buffer size divides

    async def main():
        transport, _, peer = await accepted_pair(loop)
        transport.write(kind(payload))
        partly_buffered = transport.get_write_buffer_size() > 0
        transport.write_eof()
        data = await loop.run_in_executor(None, read_until_eof, peer)
        transport.close()
        peer.close()
        return partly_buffered, data

    partly_buffered, data = loop.run_until_complete(main())
    assert partly_buffered, "the socket took the whole write: the test proves nothing"
    assert data == payload
