"""Bytes written to a transport reach the peer in exactly the order of the
write()/writelines() calls, with asyncio's flow control, and reach the
peer when asyncio's do: each write() is its own send (capi/transport.c,
"writes"). Dual-run: every test runs on stock asyncio and on zloopgo.

The property test drives random programs of writes (sizes around every
threshold the code has, bytes/bytearray/memoryview, writelines, within one
callback and across several, with and without waiting for resume_writing;
exact bytes and a subclass of bytes, which the native write reads two ways)
through small socket buffers to a peer that reads slowly, over a Unix
socketpair, TCP and TLS, and checks the received stream and the
pause/resume protocol. The regression tests are reduced from the
downstream failures that found the reordering (issue 8).
"""

import asyncio
import os
import random
import socket
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HIGH_WATER_DEFAULT = 64 * 1024  # asyncio's default high-water mark


class BytesSubclass(bytes):
    """Not exact bytes: the native write hands it to asyncio's own write,
    where it reads exact bytes' storage directly (capi/transport.c,
    transport_write)."""


KINDS = [bytes, BytesSubclass, bytearray, memoryview]
# Every limit the write path has, and one either side of it: asyncio's
# default high-water mark (64 KiB), page and socket-buffer sizes, 1 MiB.
THRESHOLDS = sorted(
    {0, 1, 2, 100, 4095, 4096, 4097, 65535, 65536, 65537, 100_000, 200_000, 1 << 20}
)
HIGH_WATERS = [None, 0, 1, 4096, 65535, 65536, 65537, 200_000]

BLOB = random.Random(8).randbytes(3 << 20)


def payload(offset, size):
    """`size` bytes of the test stream starting at `offset` (no period that
    a write size could align with, so any reordering shows)."""
    offset %= len(BLOB) - size
    return BLOB[offset : offset + size]


class FlowRecorder(asyncio.Protocol):
    """Records pause_writing/resume_writing with the buffer size at each."""

    def __init__(self):
        self.transport = None
        self.flow = []
        self.paused = False
        self.resumed = None
        self.lost = None

    def connection_made(self, transport):
        self.transport = transport

    def pause_writing(self):
        assert not self.paused, "pause_writing twice"
        self.paused = True
        self.flow.append(("pause", self.transport.get_write_buffer_size()))

    def resume_writing(self):
        assert self.paused, "resume_writing without pause_writing"
        self.paused = False
        self.flow.append(("resume", self.transport.get_write_buffer_size()))
        if self.resumed is not None and not self.resumed.done():
            self.resumed.set_result(None)

    def connection_lost(self, exc):
        self.lost = exc
        if self.resumed is not None and not self.resumed.done():
            self.resumed.set_result(None)

    async def wait_resumed(self):
        if self.paused:
            self.resumed = asyncio.get_running_loop().create_future()
            await self.resumed


class SlowPeer(threading.Thread):
    """Reads everything from a blocking socket until EOF, in small reads
    with pauses now and then."""

    def __init__(self, sock, slow=True):
        super().__init__(daemon=True)
        self.sock = sock
        self.slow = slow
        self.chunks = []
        self.error = None

    def run(self):
        rng = random.Random(1)
        try:
            while True:
                b = self.sock.recv(rng.choice([512, 4096, 65536]))
                if not b:
                    break
                self.chunks.append(b)
                if self.slow and rng.random() < 0.05:
                    time.sleep(0.001)
        except OSError as exc:  # pragma: no cover - reported by the test
            self.error = exc

    def data(self, timeout=30):
        self.join(timeout)
        assert not self.is_alive(), "the peer did not see EOF"
        assert self.error is None, self.error
        return b"".join(self.chunks)


def small_buffers(*socks, size=4096):
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


async def open_transport(loop, over, tls_contexts=None):
    """A transport on the loop under test with a FlowRecorder, and a
    SlowPeer reading the other end. `over`: unix, tcp or tls."""
    if over == "unix":
        ours, theirs = socket.socketpair()
    else:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            ours = socket.create_connection(listener.getsockname())
            theirs, _ = listener.accept()
    if over == "unix":
        small_buffers(ours, theirs)
    else:
        # TCP with a few KiB of window crawls (delayed ACKs, zero-window
        # probes): only the sending side is small, so sends are partial.
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    ours.setblocking(False)
    if over != "tls":
        peer = SlowPeer(theirs)
        peer.start()
        transport, protocol = await loop.connect_accepted_socket(FlowRecorder, ours)
        return transport, protocol, peer
    server_ctx, client_ctx = tls_contexts
    wrapped = {}

    def handshake():
        wrapped["sock"] = server_ctx.wrap_socket(theirs, server_side=True)

    t = threading.Thread(target=handshake, daemon=True)
    t.start()
    transport, protocol = await loop.create_connection(
        FlowRecorder, sock=ours, ssl=client_ctx, server_hostname="localhost"
    )
    await loop.run_in_executor(None, t.join, 10)
    peer = SlowPeer(wrapped["sock"])
    peer.start()
    return transport, protocol, peer


def check_flow(flow, low, high, over):
    """pause/resume alternate, starting with pause; each pause came with
    more than `high` bytes buffered (asyncio's TLS layer: at least), each
    resume with at most `low`."""
    for i, (what, size) in enumerate(flow):
        assert what == ("pause" if i % 2 == 0 else "resume"), flow
        if what == "pause":
            assert size >= high if over == "tls" else size > high, flow
        else:
            assert size <= low, flow


async def run_program(loop, program, high, over, tls_contexts=None):
    """Runs `program` (a list of callbacks, each a list of writes) and
    returns (what the peer received, what was written)."""
    transport, protocol, peer = await open_transport(loop, over, tls_contexts)
    if high is not None:
        transport.set_write_buffer_limits(high=high)
    low, high = transport.get_write_buffer_limits()
    written = []
    offset = 0
    for writes, wait_for_resume in program:
        for op, query in writes:
            if op[0] == "write":
                _, size, kind = op
                chunk = payload(offset, size)
                transport.write(kind(chunk))
                written.append(chunk)
                offset += size
            else:
                chunks = [
                    payload(offset + sum(s for s, _ in op[1][:i]), s)
                    for i, (s, _) in enumerate(op[1])
                ]
                transport.writelines([kind(c) for c, (_, kind) in zip(chunks, op[1], strict=True)])
                written.extend(chunks)
                offset += sum(len(c) for c in chunks)
            # asyncio's write() of some bytes pauses as soon as more than
            # the high-water mark is buffered (an empty write returns first,
            # and its writelines() does not pause on 3.12+).
            if query and op[0] == "write" and op[1] and transport.get_write_buffer_size() > high:
                assert protocol.paused
        # the next callback: after resume_writing, or at once
        if wait_for_resume:
            await protocol.wait_resumed()
        else:
            await asyncio.sleep(0)
    transport.close()
    for _ in range(1000):
        if protocol.lost is not None or transport.get_write_buffer_size() == 0:
            break
        await asyncio.sleep(0.01)
    received = await loop.run_in_executor(None, peer.data)
    check_flow(protocol.flow, low, high, over)
    return received, b"".join(written)


sizes = st.one_of(st.sampled_from(THRESHOLDS), st.integers(0, 1 << 20))
# writelines() chunks are never empty: asyncio 3.13.0's writelines() then
# spins forever on the empty chunk left in its buffer (on any loop).
line_sizes = st.one_of(
    st.sampled_from([s for s in THRESHOLDS if 0 < s <= 65537]), st.integers(1, 70_000)
)
writes = st.lists(
    st.tuples(
        st.one_of(
            st.tuples(st.just("write"), sizes, st.sampled_from(KINDS)),
            st.tuples(
                st.just("lines"),
                st.lists(st.tuples(line_sizes, st.sampled_from(KINDS)), max_size=4),
            ),
        ),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)
programs = st.lists(st.tuples(writes, st.booleans()), min_size=1, max_size=4)


@pytest.mark.parametrize("over", ["unix", "tcp", "tls"])
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=programs, high=st.sampled_from(HIGH_WATERS))
def test_random_writes_arrive_in_order(loop_factory, tls_contexts, over, program, high):
    if over == "tls" and high is not None and high < 4096:
        # asyncio's TLS layer pauses at "buffered >= high": with a mark
        # this low it can stay paused after the last write on any loop.
        high = 4096
    loop = loop_factory()
    try:
        received, expected = loop.run_until_complete(
            asyncio.wait_for(run_program(loop, program, high, over, tls_contexts), 60)
        )
    finally:
        loop.close()
    if received != expected:
        first = next(
            (i for i, (a, b) in enumerate(zip(received, expected, strict=False)) if a != b),
            min(len(received), len(expected)),
        )
        pytest.fail(
            f"{len(received)} bytes received, {len(expected)} written; first difference at {first}"
        )


# ---- regression tests reduced from the downstream suites ----


@pytest.mark.parametrize(
    "sizes",
    [
        [56, 65537],  # uvicorn's HTTP/2 HEADERS then a large DATA frame
        [10, 10, 100_000],  # aiohttp: headers, then a spooled file body
        [1, 200_000, 3, 70_000],
        [56, 65536],
        [65536, 1],
        [HIGH_WATER_DEFAULT - 1, 1, 1],
    ],
)
@pytest.mark.parametrize("kind", KINDS)
def test_a_large_write_never_overtakes_smaller_ones_before_it(loop, sizes, kind):
    async def main():
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        peer = SlowPeer(theirs, slow=False)
        peer.start()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        chunks = [payload(i * 7919, s) for i, s in enumerate(sizes)]
        for c in chunks:
            transport.write(kind(c))
        transport.close()
        return await loop.run_in_executor(None, peer.data), b"".join(chunks)

    received, expected = loop.run_until_complete(main())
    assert received == expected


def test_headers_then_streamed_body_over_several_callbacks(loop):
    # aiohttp's streamed responses: a small header write, then body chunks
    # of mixed sizes from later callbacks, some over the hold limit.
    async def main():
        ours, theirs = socket.socketpair()
        small_buffers(ours, theirs)
        ours.setblocking(False)
        peer = SlowPeer(theirs)
        peer.start()
        transport, protocol = await loop.connect_accepted_socket(FlowRecorder, ours)
        written = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
        transport.write(written[0])
        for i, size in enumerate([10, 70_000, 5, 131_072, 3]):
            chunk = payload(i * 104_729, size)
            transport.writelines([b"%x\r\n" % size, chunk, b"\r\n"])
            written += [b"%x\r\n" % size, chunk, b"\r\n"]
            await protocol.wait_resumed()
        transport.write(b"0\r\n\r\n")
        written.append(b"0\r\n\r\n")
        transport.close()
        return await loop.run_in_executor(None, peer.data), b"".join(written)

    received, expected = loop.run_until_complete(main())
    assert received == expected


# ---- when written bytes reach the peer ----


def _peer_has(sock, n, timeout=2.0):
    """Whether `n` bytes can be read from a blocking socket within timeout."""
    sock.settimeout(timeout)
    got = b""
    try:
        while len(got) < n:
            b = sock.recv(n - len(got))
            if not b:
                break
            got += b
    except TimeoutError:
        pass
    return got


def test_bytes_leave_when_their_callback_returns_not_at_the_end_of_the_batch(loop):
    # Two callbacks of one batch: the first writes, the second blocks. The
    # peer has the bytes while the second still runs.
    async def main():
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        seen = {}
        loop.call_soon(transport.write, b"now")
        loop.call_soon(lambda: seen.setdefault("peer", _peer_has(theirs, 3, timeout=1.0)))
        await asyncio.sleep(0.05)
        transport.close()
        theirs.close()
        return seen["peer"]

    assert loop.run_until_complete(main()) == b"now"


@pytest.mark.parametrize("pattern", [(2, 1), (3, 1, 2, 1), (1, 2, 1, 1), (4, 2)])
def test_over_tcp_a_peer_reading_inside_the_callback_has_every_write(loop, pattern):
    # Callbacks that write `pattern[i]` times each, the last of them then
    # reading the peer before it returns: the peer has every byte written
    # so far, as on asyncio. The transport differential test found zloopgo
    # sending a write whose callback's predecessor wrote more with MSG_MORE,
    # which kept the segment from the peer until the callback returned.
    async def run():
        got = []
        server_transport = loop.create_future()

        class Keep(asyncio.Protocol):
            def connection_made(self, t):
                server_transport.set_result(t)

        server = await loop.create_server(Keep, "127.0.0.1", 0)
        peer = socket.create_connection(server.sockets[0].getsockname()[:2])
        t = await server_transport
        for i, writes in enumerate(pattern):
            done = loop.create_future()

            def callback(writes=writes, i=i, done=done):
                for k in range(writes):
                    t.write(b"%d" % ((i + k) % 10))
                # loopback delivers a send at once; a held segment waits
                # for its push, or for the kernel's cork timer (200 ms)
                got.append(len(_peer_has(peer, writes, timeout=0.05)))
                done.set_result(None)

            loop.call_soon(callback)
            await done
        peer.close()
        t.close()
        server.close()
        return got

    assert loop.run_until_complete(run()) == list(pattern)


@pytest.mark.parametrize("raises", [KeyboardInterrupt, SystemExit])
def test_bytes_leave_before_the_callbacks_exception_ends_the_run(loop, raises):
    ours, theirs = socket.socketpair()
    ours.setblocking(False)

    async def setup():
        return await loop.connect_accepted_socket(asyncio.Protocol, ours)

    transport, _ = loop.run_until_complete(setup())

    def write_then_raise():
        transport.write(b"before the exception")
        raise raises

    loop.call_soon(write_then_raise)
    with pytest.raises(raises):
        loop.run_forever()
    assert _peer_has(theirs, 20, timeout=1.0) == b"before the exception"
    transport.close()
    loop.run_until_complete(asyncio.sleep(0))
    theirs.close()


def test_the_exception_handler_sees_the_bytes_sent(loop, loop_errors):
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    seen = []

    async def main():
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)

        def write_then_fail():
            transport.write(b"sent")
            raise ValueError("boom")

        loop.set_exception_handler(lambda _loop, ctx: seen.append(_peer_has(theirs, 4, 1.0)))
        loop.call_soon(write_then_fail)
        await asyncio.sleep(0.05)
        transport.close()

    loop.run_until_complete(main())
    theirs.close()
    assert seen == [b"sent"]


def test_write_buffer_size_and_pause_inside_write_as_asyncio(loop):
    # A peer that does not read: the write that takes the buffer over the
    # high-water mark calls pause_writing() before it returns, and
    # get_write_buffer_size() counts what the kernel did not take.
    async def main():
        ours, theirs = socket.socketpair()
        small_buffers(ours, theirs)
        ours.setblocking(False)
        transport, protocol = await loop.connect_accepted_socket(FlowRecorder, ours)
        trace = []
        for i in range(12):
            transport.write(payload(i, 20_000))
            trace.append(protocol.paused)
        size = transport.get_write_buffer_size()
        transport.abort()
        theirs.close()
        return trace, size

    trace, size = loop.run_until_complete(main())
    # the socket takes a few KiB at most: 240,000 bytes minus that are left
    assert 200_000 < size <= 240_000
    first = trace.index(True)
    assert trace == [False] * first + [True] * (12 - first)
    assert first == 3, trace  # 80,000 written, more than 64 KiB left over


SCRIPT_EXIT = """
a, b = socket.socketpair()
a.setblocking(False)
async def main():
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
    loop.call_soon(transport.write, b"last words")
    loop.call_soon(os._exit, 0)
    await asyncio.sleep(1)
pid = os.fork()
if pid == 0:
    a.close()
    b.settimeout(5)
    got = b""
    while len(got) < 10:
        chunk = b.recv(10)
        if not chunk:
            break
        got += chunk
    os.write(1, got + b"\\n")
    os._exit(0)
b.close()
loop = factory()
loop.run_until_complete(main())
"""


def test_bytes_written_before_os_exit_in_the_next_callback_arrive(loop_name):
    # The reader is forked before any loop exists (fork-safe on zloopgo).
    from helpers import run_script

    proc = run_script(loop_name, SCRIPT_EXIT, timeout=30)
    assert proc.stdout.strip() == "last words", proc.stderr


SCRIPT_FORK = """
a, b = socket.socketpair()
a.setblocking(False)
b.setblocking(False)
loop = factory()
async def main():
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
    def write_then_fork():
        transport.write(b"before fork")
        pid = os.fork()
        if pid == 0:
            try:
                got = b.recv(100)
            except BlockingIOError:
                got = b"nothing"
            os.write(1, got + b"\\n")
            os._exit(0)
        os.waitpid(pid, 0)
    loop.call_soon(write_then_fork)
    await asyncio.sleep(0.05)
    transport.close()
loop.run_until_complete(main())
"""


def test_bytes_written_before_fork_are_in_the_kernel_in_the_child(loop_name):
    from helpers import run_script

    proc = run_script(loop_name, "import warnings; warnings.simplefilter('ignore')\n" + SCRIPT_FORK)
    assert proc.stdout.strip() == "before fork", proc.stderr


def test_no_writes_are_held_once_the_loop_is_idle(loop):
    # os.write to the descriptor behind the transport's back would come
    # before held bytes; after the callback returns nothing is held.
    async def main():
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        transport.write(b"first,")
        await asyncio.sleep(0)
        os.write(ours.fileno(), b"second")
        got = await loop.run_in_executor(None, _peer_has, theirs, 12)
        transport.close()
        theirs.close()
        return got

    assert loop.run_until_complete(main()) == b"first,second"
