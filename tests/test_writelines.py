"""transport.writelines(): asyncio's (3.12+) buffers every chunk and sends
them with one sendmsg at once; zloopgo's native one (capi/transport.c)
sends them the same way without a Python frame when nothing is buffered,
and leaves the rest to asyncio's steps. What must hold on both loops:
the bytes reach the peer whole and in order before writelines returns
when the socket takes them; what the socket does not take is buffered
(get_write_buffer_size, pause_writing past the high-water mark) and sent
later; a send error is fatal as asyncio's; its checks and messages.

It knows the transport only through asyncio's surface; the last test
counts Python frames on zloopgo alone."""

import asyncio
import logging
import socket
import sys
from asyncio import selector_events

import zloopgo

CHUNK = 256 * 1024
# asyncio's writelines buffers views and sends with sendmsg from 3.12; before,
# it joins the chunks and writes them
GATHERS = sys.version_info >= (3, 12)
# whether it then asks _maybe_pause_protocol (3.14+ and 3.13's later patch
# releases, 3.13.15; 3.12 and 3.13.0 leave a buffer past the high-water
# mark unpaused; write, which 3.11's calls, asks it)
PAUSES = not GATHERS or (
    "_maybe_pause_protocol" in selector_events._SelectorSocketTransport.writelines.__code__.co_names
)


class Recording(asyncio.Protocol):
    def __init__(self):
        self.events = []
        self.lost = asyncio.get_running_loop().create_future()

    def pause_writing(self):
        self.events.append("pause")

    def resume_writing(self):
        self.events.append("resume")

    def connection_lost(self, exc):
        self.events.append(("lost", type(exc).__name__ if exc else None))
        self.lost.set_result(None)


async def _connect(loop, sndbuf=None):
    ours, peer = socket.socketpair()
    if sndbuf is not None:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    ours.setblocking(False)
    transport, protocol = await loop.create_connection(Recording, sock=ours)
    return transport, protocol, ours, peer


def _read_all(peer, n):
    peer.setblocking(True)
    got = bytearray()
    while len(got) < n:
        got += peer.recv(1 << 20)
    return bytes(got)


def test_writelines_sends_at_once(loop):
    async def main():
        transport, protocol, _, peer = await _connect(loop)
        transport.writelines([b"ab", bytearray(b"cd"), b"e" * 1000])
        transport.writelines((b"f", b"g"))
        transport.writelines([])
        # the bytes are in the kernel when writelines returns
        peer.setblocking(False)
        got = peer.recv(4096)
        size = transport.get_write_buffer_size()
        transport.close()
        await protocol.lost
        peer.close()
        return got, size, protocol.events

    got, size, events = loop.run_until_complete(main())
    assert got == b"abcd" + b"e" * 1000 + b"fg"
    assert size == 0 and events == [("lost", None)]


def test_what_the_socket_does_not_take_is_buffered_and_sent_later(loop):
    async def main():
        transport, protocol, _, peer = await _connect(loop, sndbuf=4096)
        chunks = [bytes([65 + i]) * CHUNK for i in range(3)]
        transport.writelines(chunks)
        buffered = transport.get_write_buffer_size()
        events_after_write = list(protocol.events)
        got = await loop.run_in_executor(None, _read_all, peer, 3 * CHUNK)
        for _ in range(100):
            if not transport.get_write_buffer_size():
                break
            await asyncio.sleep(0.01)
        transport.close()
        await protocol.lost
        peer.close()
        return b"".join(chunks), got, buffered, events_after_write, protocol.events

    sent, got, buffered, events_after_write, events = loop.run_until_complete(main())
    assert got == sent
    assert 0 < buffered < 3 * CHUNK
    if PAUSES:
        assert events_after_write == ["pause"]
        assert events == ["pause", "resume", ("lost", None)]
    else:
        assert events_after_write == [] and events == [("lost", None)]


def test_a_send_that_would_block_buffers_everything(loop):
    async def main():
        transport, protocol, ours, peer = await _connect(loop, sndbuf=4096)
        filled = 0
        try:
            while True:  # the kernel's buffer full, asyncio's empty
                filled += ours.send(b"x" * 65536)
        except BlockingIOError:
            pass
        transport.writelines([b"one", bytearray(b"two")])
        buffered = transport.get_write_buffer_size()
        got = await loop.run_in_executor(None, _read_all, peer, filled + 6)
        transport.close()
        await protocol.lost
        peer.close()
        return got[filled:], buffered, protocol.events

    tail, buffered, events = loop.run_until_complete(main())
    assert tail == b"onetwo" and buffered == 6
    assert events == [("lost", None)]


def test_a_send_error_is_fatal_as_asyncios(loop):
    async def main():
        transport, protocol, _, peer = await _connect(loop)
        peer.close()
        transport.writelines([b"to", b"nobody"])
        closing = transport.is_closing()
        await protocol.lost
        return closing, protocol.events

    closing, events = loop.run_until_complete(main())
    assert closing is True
    assert events == [("lost", "BrokenPipeError")]


def _writelines_after_the_loss(lp, errors):
    """writelines() six times on a transport whose connection was lost
    (a send error made it fatal, connection_lost ran): what each call
    did, the buffer left, asyncio's warnings, the exception handler's
    messages (errors, filled by lp's handler)."""
    warnings = []

    class Warnings(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())

    async def main():
        transport, protocol, _, peer = await _connect(lp)
        peer.close()
        transport.writelines([b"to", b"nobody"])
        await protocol.lost
        outcomes = []
        for _ in range(6):
            try:
                transport.writelines([b"late", b"r"])
                outcomes.append("returned")
            except Exception as exc:  # noqa: BLE001 - compared between the loops
                outcomes.append(f"{type(exc).__name__}: {exc}")
        return outcomes, transport.get_write_buffer_size(), protocol.events

    handler = Warnings(logging.WARNING)
    asyncio.log.logger.addHandler(handler)
    try:
        outcomes, buffered, events = lp.run_until_complete(main())
    finally:
        asyncio.log.logger.removeHandler(handler)
    return outcomes, buffered, events, warnings, [c["message"] for c in errors]


def test_writelines_after_the_connection_was_lost_is_asyncios(loop, loop_errors):
    # asyncio's answer changed within 3.13's patch releases: 3.13.15
    # counts the call as a write to a lost connection (a warning past a
    # threshold), as write() does; 3.13.0 buffers the chunks and tries
    # them. zloopgo's native writelines hands a lost connection to
    # asyncio's, so a stock asyncio loop, run the same way, says what
    # this Python's does.
    got = _writelines_after_the_loss(loop, loop_errors)
    reference = asyncio.SelectorEventLoop()
    reference_errors = []
    reference.set_exception_handler(lambda _lp, context: reference_errors.append(context))
    try:
        want = _writelines_after_the_loss(reference, reference_errors)
    finally:
        reference.close()
    assert got == want
    outcomes, buffered, events, warnings, _ = got
    assert events == [("lost", "BrokenPipeError")]
    if "_conn_lost" in selector_events._SelectorSocketTransport.writelines.__code__.co_names:
        # 3.13.15, 3.14+: nothing buffered, the fifth and sixth lost writes warned of
        assert (outcomes, buffered) == (["returned"] * 6, 0)
        assert warnings == ["socket.send() raised exception."] * 2


def test_checks_and_messages_are_asyncios(loop):
    async def main():
        transport, protocol, _, peer = await _connect(loop)
        outcomes = []
        # the bad chunk first: 3.15 buffers the chunks before it and keeps them
        for bad in (["text", b"a"], [5, b"a"]):
            try:
                transport.writelines(bad)
                outcomes.append("accepted")
            except TypeError as exc:
                outcomes.append(str(exc))
        transport.writelines(iter([b"from ", b"an iterator"]))
        transport.writelines([b"", b"!"])
        peer.setblocking(False)
        got = peer.recv(4096)
        transport.write_eof()
        try:
            transport.writelines([b"late"])
        except RuntimeError as exc:
            outcomes.append(str(exc))
        transport.close()
        await protocol.lost
        peer.close()
        return got, outcomes

    got, outcomes = loop.run_until_complete(main())
    assert got == b"from an iterator!"
    assert outcomes[:2] == [_type_error_of(["text", b"a"]), _type_error_of([5, b"a"])]
    # 3.10 and 3.11 write what writelines joined
    method = "writelines" if GATHERS else "write"
    assert outcomes[2:] == [f"Cannot call {method}() after write_eof()"]


def _type_error_of(chunks):
    """What asyncio's writelines raises for chunks that are not bytes-like:
    memoryview()'s words from 3.12 (it buffers views), join's before."""
    try:
        if GATHERS:
            [memoryview(data) for data in chunks]
        else:
            b"".join(chunks)
    except TypeError as exc:
        return str(exc)
    raise AssertionError(f"{chunks!r} is bytes-like")


def test_zloopgo_writelines_sends_without_a_python_frame():
    loop = zloopgo.new_event_loop()
    frames = []

    def profiler(frame, event, arg):
        if event == "call":
            frames.append(frame.f_code.co_name)

    async def main():
        transport, protocol, _, peer = await _connect(loop)
        sys.setprofile(profiler)
        try:
            transport.writelines([b"GET ", b"key", b"\r\n"])
        finally:
            sys.setprofile(None)
        peer.setblocking(False)
        got = peer.recv(4096)
        transport.close()
        await protocol.lost
        peer.close()
        return got

    try:
        assert loop.run_until_complete(main()) == b"GET key\r\n"
    finally:
        loop.close()
    if GATHERS:
        assert frames == []
    else:  # 3.10, 3.11: asyncio's own, which joins and writes
        assert frames == ["writelines"]
