"""Reads of 64 KiB and more go straight into their final bytes object on
zloopgo (capi/transport.c, LARGE_READ); smaller ones are copied out of a
the loop's receive buffer. Dual-run: whatever path a read takes, the protocol
gets the bytes in order, exactly sized, and a bytes object it may keep.
The zloopgo-only test checks that both paths are really taken."""

import asyncio
import fcntl
import os
import socket
import struct
import termios

from helpers import accepted_pair

# More than one large read's worth, in a pattern that shows any misplaced,
# repeated or stale byte.
BULK = bytes(range(256)) * (6 * 1024)  # 1.5 MiB


async def _drain_until(got, total):
    for _ in range(10000):
        if sum(len(d) for d in got if d is not None) >= total:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"only {sum(len(d) for d in got if d)} of {total} bytes arrived")


def _waiting(sock):
    """The bytes waiting to be read from sock (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def _send_all(peer, data):
    peer.setblocking(True)
    peer.sendall(data)


def test_large_then_small_reads_deliver_every_byte_in_order(loop):
    async def main():
        transport, got, peer = await accepted_pair(loop)
        # Large reads first (the peer writes faster than one read takes),
        # then small ones, then large again: both paths, and both switches.
        await loop.run_in_executor(None, _send_all, peer, BULK)
        await _drain_until(got, len(BULK))
        small = b"0123456789" * 7
        for i in range(5):
            peer.send(small)
            await _drain_until(got, len(BULK) + (i + 1) * len(small))
        await loop.run_in_executor(None, _send_all, peer, BULK)
        await _drain_until(got, 2 * len(BULK) + 5 * len(small))
        peer.shutdown(socket.SHUT_WR)
        for _ in range(1000):
            if got and got[-1] is None:
                break
            await asyncio.sleep(0.001)
        transport.close()
        peer.close()
        return got

    got = loop.run_until_complete(main())
    assert got[-1] is None, "eof_received was not called"
    chunks = got[:-1]
    assert all(type(c) is bytes and len(c) > 0 for c in chunks)
    small = b"0123456789" * 7
    assert b"".join(chunks) == BULK + small * 5 + BULK


def test_a_read_never_exceeds_max_size(loop):
    async def main():
        transport, got, peer = await accepted_pair(loop)
        transport.max_size = 100 * 1024
        await loop.run_in_executor(None, _send_all, peer, BULK)
        await _drain_until(got, len(BULK))
        transport.close()
        peer.close()
        return got

    got = loop.run_until_complete(main())
    assert max(len(c) for c in got) <= 100 * 1024
    assert b"".join(got) == BULK


def test_received_bytes_stay_valid_after_later_reads(loop):
    # A read straight into its final object must not reuse an object the
    # protocol still holds, nor write into one after handing it over.
    async def main():
        transport, got, peer = await accepted_pair(loop)
        first = os.urandom(300 * 1024)
        await loop.run_in_executor(None, _send_all, peer, first)
        await _drain_until(got, len(first))
        kept = list(got)
        snapshot = [bytes(c) for c in kept]
        await loop.run_in_executor(None, _send_all, peer, bytes(len(first)))
        await _drain_until(got, 2 * len(first))
        transport.close()
        peer.close()
        return kept, snapshot

    kept, snapshot = loop.run_until_complete(main())
    assert kept == snapshot


def test_zloopgo_switches_between_the_receive_buffer_and_direct_reads():
    # The transport notes, before data_received runs, whether this read was
    # large: the next read then goes straight into its final object.
    import zloopgo

    loop = zloopgo.new_event_loop()
    try:

        async def main():
            ours, peer = socket.socketpair()
            ours.setblocking(False)
            reads = []

            class Proto(asyncio.Protocol):
                def connection_made(self, transport):
                    self.transport = transport
                    reads.append((None, transport._zl_state.large_reads))

                def data_received(self, data):
                    reads.append((data, self.transport._zl_state.large_reads))

            transport, _ = await loop.connect_accepted_socket(Proto, ours)
            for payload in (BULK, b"tiny", BULK, b"tiny"):
                total = sum(len(d) for d, _ in reads if d)
                if len(payload) > 4096:
                    # reading paused until 128 KiB wait in the socket, so that
                    # the next read is large however the threads are scheduled
                    transport.pause_reading()
                    sent = loop.run_in_executor(None, _send_all, peer, payload)
                    while not sent.done() and _waiting(ours) < 128 * 1024:
                        await asyncio.sleep(0.001)
                    transport.resume_reading()
                    await sent
                else:
                    peer.send(payload)
                while sum(len(d) for d, _ in reads if d) < total + len(payload):
                    await asyncio.sleep(0.001)
            transport.close()
            peer.close()
            return reads

        reads = loop.run_until_complete(main())
    finally:
        loop.close()
    assert reads[0] == (None, False)
    data = [d for d, _ in reads[1:]]
    assert b"".join(data) == BULK + b"tiny" + BULK + b"tiny"
    assert max(len(d) for d in data) >= 64 * 1024, "no read was large: the test proves nothing"
    for d, large in reads[1:]:
        assert large is (len(d) >= 64 * 1024), (len(d), large)
    assert reads[-1][1] is False


def test_is_closing_follows_close_and_abort(loop):
    async def main():
        seen = []
        for finish in ("close", "abort"):
            transport, _, peer = await accepted_pair(loop)
            seen.append(transport.is_closing())
            getattr(transport, finish)()
            seen.append(transport.is_closing())
            await asyncio.sleep(0)
            seen.append(transport.is_closing())
            peer.close()
        return seen

    assert loop.run_until_complete(main()) == [False, True, True] * 2
