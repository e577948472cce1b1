"""The stream fast path (capi/streamfeed.c): bytes read for an asyncio
stream go into its StreamReader without StreamReaderProtocol.data_received
and StreamReader.feed_data running in Python. The same feed scripts are
driven through asyncio, through zloopgo's fast path and through zloopgo
with the fast path off, and everything a program can see must agree: what
each read returns or raises, what is left in the buffer, when reading is
paused and resumed, EOF, and the errors data_received would raise."""

import asyncio
import contextlib
import socket
import sys
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zloopgo
from zloopgo import _engine, _transports

MODES = ["asyncio", "zloopgo", "zloopgo-python-path"]


def _fast_path(on):
    if on:
        _engine.set_streams(
            asyncio.StreamReaderProtocol, asyncio.StreamReader, sys.flags.optimize == 0
        )
    else:
        _engine.set_streams(None, None, False)


@contextlib.contextmanager
def loop_for(mode):
    """A new loop of `mode`, closed afterwards; the fast path is off only
    inside the block for zloopgo-python-path."""
    loop = asyncio.SelectorEventLoop() if mode == "asyncio" else zloopgo.new_event_loop()
    _fast_path(mode != "zloopgo-python-path")
    try:
        yield loop
    finally:
        _fast_path(_transports.STREAM_FAST_PATH)  # as zloopgo's import left it
        loop.close()


async def settle():
    """A few iterations: what the peer sent has been read (or left in the
    kernel, if reading is paused)."""
    for _ in range(4):
        await asyncio.sleep(0)


async def describe(awaitable):
    try:
        # a read that blocks waits for data no step will send: any timeout
        # gives the same outcome
        return ("ok", await asyncio.wait_for(awaitable, 0.01))
    except asyncio.IncompleteReadError as e:
        return ("IncompleteReadError", e.partial, e.expected)
    except asyncio.LimitOverrunError as e:
        return ("LimitOverrunError", str(e), e.consumed)
    except (asyncio.TimeoutError, TimeoutError):
        return ("timeout",)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome
        return (type(e).__name__, str(e))


async def run_script(script, limit):
    """Runs a feed script on the running loop; returns the trace."""
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=ours, limit=limit)
    transport = writer.transport
    trace = []
    seq = 0
    eof = False
    for op in script:
        kind = op[0]
        if kind in ("send", "eof") and eof:
            continue  # the peer has shut its side
        if kind == "send":
            data = bytes((seq + i) % 251 for i in range(op[1]))
            seq += op[1]
            if op[2]:
                data = data.replace(b"\n", b"-") + b"\n"
            peer.sendall(data)
            await settle()
            result = None
        elif kind == "eof":
            peer.shutdown(socket.SHUT_WR)
            eof = True
            await settle()
            result = None
        elif kind == "read":
            result = await describe(reader.read(op[1]))
        elif kind == "readexactly":
            result = await describe(reader.readexactly(op[1]))
        elif kind == "readline":
            result = await describe(reader.readline())
        else:
            result = await describe(reader.readuntil(b"\n"))
        trace.append(
            (
                op,
                result,
                bytes(reader._buffer),
                reader._paused,
                transport.is_reading(),
                reader.at_eof(),
            )
        )
    writer.close()
    peer.close()
    await settle()
    return trace


ops = st.one_of(
    st.tuples(st.just("send"), st.integers(1, 3000), st.booleans()),
    st.tuples(st.just("eof")),
    st.tuples(st.just("read"), st.integers(-1, 3000)),
    st.tuples(st.just("readexactly"), st.integers(0, 3000)),
    st.tuples(st.just("readline")),
    st.tuples(st.just("readuntil")),
)


@settings(max_examples=60, deadline=None)
@given(script=st.lists(ops, max_size=10), limit=st.sampled_from([16, 100, 1024, 2**16]))
def test_feed_scripts_agree_on_every_path(script, limit):
    traces = {}
    for mode in MODES:
        with loop_for(mode) as loop:
            traces[mode] = loop.run_until_complete(run_script(script, limit))
    assert traces["zloopgo"] == traces["asyncio"]
    assert traces["zloopgo-python-path"] == traces["asyncio"]


def test_large_stream_pauses_and_resumes_as_asyncio():
    # 1 MiB through a reader with a small limit: pause_reading when more
    # than twice the limit is buffered, resume as it is consumed.
    async def main():
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=ours, limit=4096)
        calls = []
        transport = writer.transport
        real_pause, real_resume = transport.pause_reading, transport.resume_reading
        transport.pause_reading = lambda: (calls.append("pause"), real_pause())[1]
        transport.resume_reading = lambda: (calls.append("resume"), real_resume())[1]
        payload = bytes(range(256)) * 4096
        loop = asyncio.get_running_loop()
        send = loop.run_in_executor(None, peer.sendall, payload)
        got = bytearray()
        while len(got) < len(payload):
            got += await reader.read(3000)
        await send
        writer.close()
        peer.close()
        return bytes(got) == payload, calls.count("pause") > 0, calls

    for mode in MODES:
        with loop_for(mode) as loop:
            same, paused, calls = loop.run_until_complete(main())
        assert same, mode
        assert paused, (mode, calls)
        # strictly alternating, starting with a pause
        assert all(c == ("pause" if i % 2 == 0 else "resume") for i, c in enumerate(calls)), mode


def _feed_after_eof(loop):
    contexts = []
    loop.set_exception_handler(lambda _l, ctx: contexts.append(ctx))

    async def main():
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=ours)
        reader.feed_eof()  # the application says EOF; the transport reads on
        peer.sendall(b"late")
        await settle()
        peer.close()
        writer.close()
        await settle()

    loop.run_until_complete(main())
    return [
        (c["message"], type(c.get("exception")).__name__, str(c.get("exception"))) for c in contexts
    ]


@pytest.mark.skipif(sys.flags.optimize, reason="feed_data's assert is compiled out under -O")
def test_data_after_feed_eof_is_a_fatal_error_as_in_asyncio():
    results = {}
    for mode in MODES:
        with loop_for(mode) as loop:
            results[mode] = _feed_after_eof(loop)
    assert results["asyncio"] == [
        (
            "Fatal error: protocol.data_received() call failed.",
            "AssertionError",
            "feed_data after feed_eof",
        )
    ]
    assert results["zloopgo"] == results["asyncio"]
    assert results["zloopgo-python-path"] == results["asyncio"]


def test_a_transport_that_cannot_pause_is_forgotten():
    class NoPause:
        def pause_reading(self):
            raise NotImplementedError

    async def main():
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=ours, limit=10)
        reader._transport = NoPause()
        peer.sendall(b"x" * 100)
        await settle()
        state = (reader._transport, bytes(reader._buffer), reader._paused)
        writer.close()
        peer.close()
        return state

    for mode in MODES:
        with loop_for(mode) as loop:
            assert loop.run_until_complete(main()) == (None, b"x" * 100, False), mode


def test_a_cancelled_read_leaves_the_data_for_the_next_one():
    async def main():
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=ours)
        with pytest.raises((asyncio.TimeoutError, TimeoutError)):
            await asyncio.wait_for(reader.read(10), 0.01)
        peer.sendall(b"after")
        await settle()
        got = await reader.read(10)
        writer.close()
        peer.close()
        return got

    for mode in MODES:
        with loop_for(mode) as loop:
            assert loop.run_until_complete(main()) == b"after", mode


# ---- the fast path gives way to anything that could tell ----


def _feed_data_calls(setup):
    """How many times StreamReader.feed_data ran in Python while 3 chunks
    arrived, with `setup(reader, protocol)` applied first."""
    loop = zloopgo.new_event_loop()
    calls = []

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "feed_data":
            calls.append(1)

    async def main():
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=ours)
        setup(reader, writer.transport.get_protocol())
        sys.setprofile(profiler)
        try:
            for chunk in (b"a", b"b", b"c"):
                peer.sendall(chunk)
                await settle()
        finally:
            sys.setprofile(None)
        got = await reader.read(10)
        writer.close()
        peer.close()
        return got

    try:
        got = loop.run_until_complete(main())
    finally:
        loop.close()
    return got, len(calls)


def test_exact_stdlib_streams_take_the_fast_path():
    # zloopgo's import turns it on for every Python whose stream code
    # capi/streamfeed.c was checked against (tests/test_asyncio_internals.py)
    assert _transports.STREAM_FAST_PATH, (
        f"the stream fast path is off on {sys.version.split()[0]}: check capi/streamfeed.c "
        "against this asyncio.streams and widen the gate in zloopgo/_transports.py"
    )
    assert _feed_data_calls(lambda reader, protocol: None) == (b"abc", 0)


def test_a_class_patched_feed_data_runs():
    with mock.patch.object(
        asyncio.StreamReader, "feed_data", autospec=True, side_effect=asyncio.StreamReader.feed_data
    ) as patched:
        got, _ = _feed_data_calls(lambda reader, protocol: None)
    assert got == b"abc"
    assert patched.call_count == 3


@pytest.mark.parametrize(
    ("owner", "method"), [("reader", "feed_data"), ("protocol", "data_received")]
)
def test_a_method_patched_on_the_instance_runs(owner, method):
    seen = []

    def setup(reader, protocol):
        target = reader if owner == "reader" else protocol
        real = getattr(target, method)
        setattr(target, method, lambda data: (seen.append(data), real(data))[1])

    got, _ = _feed_data_calls(setup)
    assert (got, seen) == (b"abc", [b"a", b"b", b"c"])


def test_a_subclassed_reader_takes_the_python_path():
    class Reader(asyncio.StreamReader):
        pass

    def setup(reader, protocol):
        reader.__class__ = Reader

    assert _feed_data_calls(setup) == (b"abc", 3)
