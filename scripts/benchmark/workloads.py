"""The workloads. Each runs in a fresh worker process, on one loop, and
returns (seconds, counter, checks, extra): the time of the measured part
only, a counter that must equal the workload's expected value, boolean
checks that must all hold, and extra figures (e.g. RSS).

Every contender runs the same Python code; only the loop differs.
"""

import asyncio
import collections
import itertools
import operator
import os
import resource
import shutil
import socket
import sys
import threading
import time

_count = 0

# What the measured part cost the whole process (every thread): filled by
# _stop(), read by the worker after the workload returns.
METER = {}
_ru0 = None
_t0 = 0.0


def _perf_control(command):
    """Tells a `perf record --control fifo:CTL,ACK` watching this process
    (ZL_BENCH_PERF_CTL=CTL,ACK, set by probes.timesplit) to enable or
    disable its events, and waits for its ack: perf then samples only the
    measured part. Does nothing without the variable."""
    fifos = os.environ.get("ZL_BENCH_PERF_CTL")
    if not fifos:
        return
    ctl, ack = fifos.split(",")
    with open(ctl, "w") as f:
        f.write(command + "\n")
    with open(ack) as f:
        f.readline()


def _start():
    """Starts the clock of the measured part (and its rusage reading)."""
    global _ru0, _t0
    _perf_control("enable")
    _ru0 = resource.getrusage(resource.RUSAGE_SELF)
    _t0 = time.perf_counter()


def _stop():
    """Stops the clock; returns the seconds since _start() and records the
    context switches and CPU time the process spent in between."""
    dt = time.perf_counter() - _t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    METER.update(
        nvcsw=ru.ru_nvcsw - _ru0.ru_nvcsw,
        nivcsw=ru.ru_nivcsw - _ru0.ru_nivcsw,
        cpu_seconds=(ru.ru_utime - _ru0.ru_utime) + (ru.ru_stime - _ru0.ru_stime),
    )
    _perf_control("disable")
    return dt


def _cb():
    global _count
    _count += 1


def _cb2(a, b):
    global _count
    _count += a - b  # a=2, b=1: proves both arguments arrived, in order


def _batched_call_soon(loop, n, batch, args):
    """A driver callback schedules `batch` callbacks, then itself, until n
    callbacks have been scheduled; the loop runs them all."""
    global _count
    _count = 0
    left = n
    call_soon = loop.call_soon

    def driver():
        nonlocal left
        k = min(batch, left)
        left -= k
        if args:
            for _ in range(k):
                call_soon(_cb2, 2, 1)
        else:
            for _ in range(k):
                call_soon(_cb)
        if left:
            call_soon(driver)
        else:
            call_soon(loop.stop)

    loop.call_soon(driver)
    _start()
    loop.run_forever()
    dt = _stop()
    return dt, _count, {}, {}


def call_soon(loop, n):
    return _batched_call_soon(loop, n, 10_000, False)


def call_soon_args(loop, n):
    return _batched_call_soon(loop, n, 10_000, True)


def call_later_cancel(loop, n):
    """n x (call_later(10, cb); cancel()), then one more loop iteration.
    Every 1000th handle is kept and checked afterwards; cb must never run."""
    fired = 0

    def cb():
        nonlocal fired
        fired += 1

    done = 0
    kept = []
    chunk = 1000

    def driver():
        nonlocal done
        call_later = loop.call_later
        for _ in range(n // chunk):
            for _ in range(chunk - 1):
                h = call_later(10, cb)
                h.cancel()
            h = call_later(10, cb)
            h.cancel()
            kept.append(h)
            done += chunk
        for _ in range(n % chunk):
            call_later(10, cb).cancel()
            done += 1
        loop.call_soon(loop.stop)  # the one iteration after the cancels

    loop.call_soon(driver)
    _start()
    loop.run_forever()
    dt = _stop()
    checks = {
        "callback_never_ran": fired == 0,
        "sampled_handles_cancelled": all(h.cancelled() for h in kept),
    }
    return dt, done, checks, {"sampled_handles": len(kept)}


def sleep0(loop, n):
    """One task awaiting asyncio.sleep(0) n times (n loop iterations)."""

    async def main():
        done = 0
        for _ in range(n):
            await asyncio.sleep(0)
            done += 1
        return done

    coro = main()
    _start()
    done = loop.run_until_complete(coro)
    dt = _stop()
    return dt, done, {}, {}


def tasks(loop, n, batch=5000):
    """n tasks, each awaiting sleep(0) once, created and gathered in batches."""
    global _count
    _count = 0

    async def child():
        global _count
        await asyncio.sleep(0)
        _count += 1

    async def main():
        create_task = loop.create_task
        left = n
        while left:
            k = min(batch, left)
            left -= k
            await asyncio.gather(*[create_task(child()) for _ in range(k)])

    coro = main()
    _start()
    loop.run_until_complete(coro)
    dt = _stop()
    return dt, _count, {}, {}


def threadsafe(loop, n):
    """One producer thread calls call_soon_threadsafe(cb) n times; the loop
    runs the callbacks and stops when it has counted n."""
    count = 0

    def cb():
        nonlocal count
        count += 1
        if count == n:
            loop.stop()

    def producer():
        cst = loop.call_soon_threadsafe
        for _ in range(n):
            cst(cb)

    thread = threading.Thread(target=producer, daemon=True)
    loop.call_soon(thread.start)
    if n == 0:  # a run of none: no callback will stop the loop
        loop.call_soon(loop.stop)
    _start()
    loop.run_forever()
    dt = _stop()
    thread.join(10)
    return dt, count, {"producer_finished": not thread.is_alive()}, {}


def _maxrss_bytes():
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def rss(loop, n):
    """n call_soon callbacks scheduled at once (from one callback), then
    run. The figure is the growth of peak RSS (ru_maxrss) over the
    baseline taken after the loop was created and ran one iteration."""
    global _count
    _count = 0
    loop.call_soon(loop.stop)
    loop.run_forever()  # the loop's lazy set-up happens before the baseline
    before = _maxrss_bytes()

    def driver():
        call_soon = loop.call_soon
        for _ in range(n):
            call_soon(_cb)
        call_soon(loop.stop)

    loop.call_soon(driver)
    _start()
    loop.run_forever()
    dt = _stop()
    after = _maxrss_bytes()
    delta_mib = (after - before) / (1 << 20)
    return dt, _count, {}, {"rss_delta_mib": delta_mib, "rss_before_mib": before / (1 << 20)}


def _empty():
    pass


def floor(loop, n):
    """The physical floor: a C loop (itertools.starmap drained by a
    zero-length deque) calling an empty Python function with no arguments.
    No event loop is involved. The counter is the number of items the C
    loop consumed from the repeat iterator (one call each)."""
    rep = itertools.repeat((), n)
    _start()
    collections.deque(itertools.starmap(_empty, rep), 0)
    dt = _stop()
    return dt, n - operator.length_hint(rep), {}, {}


# ---- network -----------------------------------------------------------------
#
# Client and server are both in the worker process, on the loop under test,
# connected over 127.0.0.1 (an ephemeral port). Only the measured exchange
# is timed: listening, connecting and closing are not. Every socket of
# every contender gets TCP_NODELAY (as asyncio's and uvloop's transports set
# it anyway; a check records that it is on); buffer sizes are left at the
# kernel's defaults and recorded in extra.

HOST = "127.0.0.1"
RTT_SIZE = 1024
# 256 distinct 1 KiB messages: an echo that is stale, short or from another
# message does not compare equal.
_MSGS = [bytes([i]) * RTT_SIZE for i in range(256)]


def _same_settings(transport, seen):
    """TCP_NODELAY on, for every contender; records what the socket has."""
    sock = transport.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    seen.append(
        (
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0,
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        )
    )


def _settings_result(seen, want):
    checks = {"both_ends_tcp_nodelay": len(seen) == want and all(s[0] for s in seen)}
    extra = {"sndbuf": [s[1] for s in seen], "rcvbuf": [s[2] for s in seen]}
    return checks, extra


def _port(server):
    return server.sockets[0].getsockname()[1]


def stream_rtt(loop, n):
    """n round trips of 1 KiB through asyncio streams: the client writes,
    drains, readexactly()s the echo; the server (start_server)
    readexactly()s, writes, drains. Counter: echoes equal to what was sent."""
    seen = []

    async def handle(reader, writer):
        _same_settings(writer.transport, seen)
        try:
            while True:
                data = await reader.readexactly(RTT_SIZE)
                writer.write(data)
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    async def main():
        server = await asyncio.start_server(handle, HOST, 0)
        reader, writer = await asyncio.open_connection(HOST, _port(server))
        _same_settings(writer.transport, seen)
        dt, good = await _stream_client(reader, writer, n)
        server.close()
        await server.wait_closed()
        return dt, good

    dt, good = loop.run_until_complete(main())
    checks, extra = _settings_result(seen, 2)
    return dt, good, checks, extra


class _EchoServer(asyncio.Protocol):
    def __init__(self, seen):
        self.seen = seen

    def connection_made(self, transport):
        self.transport = transport
        _same_settings(transport, self.seen)

    def data_received(self, data):
        self.transport.write(data)


class _Requester(asyncio.Protocol):
    """Sends request i, waits for the whole reply (`reply_len` bytes),
    compares it with what `expect(i)` says, sends request i + 1; n times."""

    def __init__(self, n, request, reply_len, expect, seen, done):
        self.n = n
        self.request = request
        self.reply_len = reply_len
        self.expect = expect
        self.seen = seen
        self.done = done
        self.i = 0
        self.good = 0
        self.buf = bytearray()

    def connection_made(self, transport):
        self.transport = transport
        _same_settings(transport, self.seen)

    def start(self):
        if self.n == 0:  # a run of none: set up and tear down only
            self.done.set_result(None)
            return
        self.transport.write(self.request(0))

    def data_received(self, data):
        buf = self.buf
        buf += data
        if len(buf) < self.reply_len:
            return
        if buf == self.expect(self.i):
            self.good += 1
        buf.clear()
        self.i += 1
        if self.i == self.n:
            self.done.set_result(None)
        else:
            self.transport.write(self.request(self.i))

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"lost after {self.i} replies: {exc!r}"))


async def _request_reply(loop, n, server_factory, request, reply_len, expect, seen):
    """One Protocol client against one Protocol server on `loop`; returns
    (seconds for the n exchanges, good replies)."""
    server = await loop.create_server(server_factory, HOST, 0)
    done = loop.create_future()
    transport, client = await loop.create_connection(
        lambda: _Requester(n, request, reply_len, expect, seen, done), HOST, _port(server)
    )
    _start()
    client.start()
    await done
    dt = _stop()
    transport.close()
    server.close()
    await server.wait_closed()
    return dt, client.good


def proto_echo(loop, n):
    """n round trips of 1 KiB between a Protocol client and a Protocol echo
    server (data_received -> write). Counter: echoes equal to what was sent."""
    seen = []
    msgs = _MSGS
    coro = _request_reply(
        loop,
        n,
        lambda: _EchoServer(seen),
        lambda i: msgs[i & 255],
        RTT_SIZE,
        lambda i: msgs[i & 255],
        seen,
    )
    dt, good = loop.run_until_complete(coro)
    checks, extra = _settings_result(seen, 2)
    return dt, good, checks, extra


REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: zloopgo-bench\r\n".ljust(98) + b"\r\n"
HEADER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n"
    b"Server: zloopgo-bench\r\n"
).ljust(196) + b"\r\n\r\n"
BODY = bytes(range(256)) * 4
RESPONSE = HEADER + BODY
assert len(REQUEST) == 100 and len(HEADER) == 200 and len(BODY) == 1024


class _HTTPLikeServer(asyncio.Protocol):
    """Answers every whole 100-byte request with header (200 B) and body
    (1 KiB): in two transport.write calls, or in one (prebuilt) buffer."""

    def __init__(self, seen, two):
        self.seen = seen
        self.two = two
        self.pending = 0
        self.bad = 0

    def connection_made(self, transport):
        self.transport = transport
        _same_settings(transport, self.seen)

    def data_received(self, data):
        if data != REQUEST:  # a fragment or several requests: count bytes
            self.pending += len(data)
            if self.pending < len(REQUEST):
                return
            self.pending -= len(REQUEST)
        write = self.transport.write
        if self.two:
            write(HEADER)
            write(BODY)
        else:
            write(RESPONSE)


def _http_like(loop, n, two):
    seen = []
    coro = _request_reply(
        loop,
        n,
        lambda: _HTTPLikeServer(seen, two),
        lambda i: REQUEST,
        len(RESPONSE),
        lambda i: RESPONSE,
        seen,
    )
    dt, good = loop.run_until_complete(coro)
    checks, extra = _settings_result(seen, 2)
    return dt, good, checks, extra


def two_writes(loop, n):
    """n HTTP-like exchanges: 100-byte request, response written as header
    (200 B) + body (1 KiB) in two transport.write calls."""
    return _http_like(loop, n, True)


def one_write(loop, n):
    """The same exchanges with header + body in one transport.write."""
    return _http_like(loop, n, False)


BULK_CHUNK = 64 * 1024


class _BulkSender(asyncio.Protocol):
    """Writes `chunks` x 64 KiB as fast as flow control lets it: stops on
    pause_writing, goes on at resume_writing."""

    def __init__(self, chunks, seen):
        self.left = chunks
        self.seen = seen
        self.paused = False
        self.pauses = 0
        self.chunk = b"\xa5" * BULK_CHUNK

    def connection_made(self, transport):
        self.transport = transport
        _same_settings(transport, self.seen)

    def pause_writing(self):
        self.paused = True
        self.pauses += 1

    def resume_writing(self):
        self.paused = False
        self.pump()

    def pump(self):
        write = self.transport.write
        chunk = self.chunk
        while self.left and not self.paused:
            self.left -= 1
            write(chunk)


class _BulkCounter(asyncio.Protocol):
    def __init__(self, total, seen, done):
        self.total = total
        self.seen = seen
        self.done = done
        self.received = 0
        self.reads = 0

    def connection_made(self, transport):
        _same_settings(transport, self.seen)
        if self.total == 0:  # a run of none: the connection is all there is
            self.done.set_result(None)

    def data_received(self, data):
        self.received += len(data)
        self.reads += 1
        if self.received >= self.total and not self.done.done():
            self.done.set_result(None)


def bulk(loop, mib):
    """`mib` MiB in 64 KiB transport.write calls from a Protocol client to a
    Protocol server that counts the bytes; the client respects flow control
    (pause_writing / resume_writing, default water marks). Timed: from the
    first write until the server has counted every byte. Counter: bytes the
    server received."""
    return _bulk(loop, mib)


def tls_bulk(loop, mib):
    """bulk over TLS: the server from create_server(ssl=...), the client
    from create_connection(ssl=..., server_hostname='localhost'); the
    flow control the client sees is the TLS transport's. The handshake is
    not timed. Check (beside bulk's): the connection used TLS."""
    return _bulk(loop, mib, _tls_contexts())


def _bulk(loop, mib, tls=None):
    server_ssl = {"ssl": tls[0]} if tls else {}
    client_ssl = {"ssl": tls[1], "server_hostname": "localhost"} if tls else {}
    seen = []
    total = mib << 20
    chunks = total // BULK_CHUNK
    counters = []

    def server_factory():
        counters.append(_BulkCounter(total, seen, done))
        return counters[-1]

    async def main():
        server = await loop.create_server(server_factory, HOST, 0, **server_ssl)
        transport, sender = await loop.create_connection(
            lambda: _BulkSender(chunks, seen), HOST, _port(server), **client_ssl
        )
        _start()
        sender.pump()
        await done
        dt = _stop()
        transport.close()
        server.close()
        await server.wait_closed()
        return dt, sender

    done = loop.create_future()
    dt, sender = loop.run_until_complete(main())
    received = sum(c.received for c in counters)
    checks, extra = _settings_result(seen, 2)
    checks["one_connection"] = len(counters) == 1
    checks["sender_wrote_all"] = sender.left == 0
    extra.update(pauses=sender.pauses, server_reads=sum(c.reads for c in counters))
    if tls:
        checks["tls"] = sender.transport.get_extra_info("ssl_object") is not None
    return dt, received, checks, extra


def _getaddrinfo_serial(loop, n, host, socktype):
    """n x await loop.getaddrinfo(host, 80, type=socktype), one after
    another. Counter: calls completed. Check: the last result equals
    socket.getaddrinfo's for the same arguments (compared once, untimed)."""
    ref = socket.getaddrinfo(host, 80, type=socktype)

    async def main():
        getaddrinfo = loop.getaddrinfo
        res = None
        done = 0
        _start()
        for _ in range(n):
            res = await getaddrinfo(host, 80, type=socktype)
            done += 1
        return _stop(), done, res

    dt, done, res = loop.run_until_complete(main())
    # with none done there is no answer to compare
    same = n == 0 or res == ref
    return dt, done, {"same_as_socket_getaddrinfo": same}, {"result": repr(res)}


def getaddrinfo_numeric(loop, n):
    """n x await loop.getaddrinfo('127.0.0.1', 80, type=SOCK_STREAM)."""
    return _getaddrinfo_serial(loop, n, HOST, socket.SOCK_STREAM)


# ---- seed 000's table ----------------------------------------------------------
#
# The three workloads of the seed's four-loop comparison, with its sizes:
# times are of the whole workload (ms), and the figure beside each is the
# process's peak RSS (ru_maxrss, interpreter and libraries included).


def seed_callbacks(loop, n):
    """n callbacks scheduled as one batch (one callback calls call_soon n
    times), then run; timed from the batch's start to the last callback."""
    global _count
    _count = 0

    def driver():
        call_soon = loop.call_soon
        for _ in range(n):
            call_soon(_cb)
        call_soon(loop.stop)

    loop.call_soon(driver)
    _start()
    loop.run_forever()
    dt = _stop()
    return dt, _count, {}, {}


def seed_tasks(loop, n):
    """n tiny tasks, each awaiting asyncio.sleep(0) once, created and
    gathered 5,000 at a time (the seed's task batch size)."""
    return tasks(loop, n, 5000)


async def _echo_read_write(reader, writer):
    """The seed's echo handler: read(65536), write, drain, until EOF."""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def _stream_client(reader, writer, n):
    """n round trips of 1 KiB: write, drain, readexactly(1024); returns
    (seconds, echoes equal to what was sent)."""
    msgs = _MSGS
    good = 0
    _start()
    for i in range(n):
        msg = msgs[i & 255]
        writer.write(msg)
        await writer.drain()
        if await reader.readexactly(RTT_SIZE) == msg:
            good += 1
    dt = _stop()
    writer.close()
    await writer.wait_closed()
    return dt, good


def seed_tcp(loop, n):
    """n TCP round trips of 1 KiB through asyncio streams: an
    asyncio.start_server echo handler (read(65536), write, drain) and one
    client on the same loop (write, drain, readexactly(1024)), each echo
    compared with what was sent."""
    seen = []

    async def handle(reader, writer):
        _same_settings(writer.transport, seen)
        await _echo_read_write(reader, writer)

    async def main():
        server = await asyncio.start_server(handle, HOST, 0)
        reader, writer = await asyncio.open_connection(HOST, _port(server))
        _same_settings(writer.transport, seen)
        result = await _stream_client(reader, writer, n)
        server.close()
        await server.wait_closed()
        return result

    dt, good = loop.run_until_complete(main())
    checks, extra = _settings_result(seen, 2 if n else len(seen))
    return dt, good, checks, extra


# ---- the rest of seed 001's span: processes, UDP, TLS, names --------------------


def spawn(loop, n):
    """n x create_subprocess_exec of `true`, each awaited to its exit, one
    after another. Counter: children that exited with status 0."""
    true = shutil.which("true") or "/bin/true"

    async def main():
        ok = 0
        _start()
        for _ in range(n):
            proc = await asyncio.create_subprocess_exec(true)
            if await proc.wait() == 0:
                ok += 1
        return _stop(), ok

    dt, ok = loop.run_until_complete(main())
    return dt, ok, {}, {"program": true}


_PIPE_BLOCK = bytes(range(256)) * 4096  # 1 MiB
_PIPE_CHILD = (
    "import os, sys\n"
    "block = memoryview(bytes(range(256)) * 4096)\n"
    "write = os.write\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    view = block\n"
    "    while view:\n"
    "        view = view[write(1, view):]\n"
)


def pipe_bulk(loop, mib):
    """A child process (python -S) writes `mib` MiB in 1 MiB os.write calls
    to its stdout, a pipe; the loop reads it through the subprocess
    StreamReader, read(256 KiB) until EOF. Timed from the first chunk read
    to EOF (the child's start-up is not). Counter: bytes read. Checks: the
    last 64 bytes are the pattern's, the child exited with 0. Extra: the
    parent's minor page faults and CPU time over the timed reads."""

    async def main():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-S", "-c", _PIPE_CHILD, str(mib), stdout=asyncio.subprocess.PIPE
        )
        read = proc.stdout.read
        first = await read(1 << 18)
        total = len(first)
        tail = first[-64:]
        before = resource.getrusage(resource.RUSAGE_SELF)
        _start()
        while True:
            data = await read(1 << 18)
            if not data:
                break
            total += len(data)
            tail = data[-64:]
        dt = _stop()
        after = resource.getrusage(resource.RUSAGE_SELF)
        rc = await proc.wait()
        return dt, total, tail, rc, before, after

    dt, total, tail, rc, before, after = loop.run_until_complete(main())
    # with no MiB asked for, the child writes nothing and the tail is empty
    tail_ok = tail == (_PIPE_BLOCK[-64:] if mib else b"")
    checks = {"tail_matches_pattern": tail_ok, "child_exit_0": rc == 0}
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    extra = {"minor_faults": after.ru_minflt - before.ru_minflt, "cpu_ms": round(cpu * 1000, 1)}
    return dt, total, checks, extra


class _UDPEcho(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.transport.sendto(data, addr)


class _UDPClient(asyncio.DatagramProtocol):
    """Sends datagram i, waits for its echo, compares, sends i + 1."""

    def __init__(self, n, done):
        self.n = n
        self.done = done
        self.i = 0
        self.good = 0

    def connection_made(self, transport):
        self.transport = transport

    def start(self):
        if self.n == 0:  # a run of none: set up and tear down only
            self.done.set_result(None)
            return
        self.transport.sendto(_MSGS[0])

    def datagram_received(self, data, addr):
        if data == _MSGS[self.i & 255]:
            self.good += 1
        self.i += 1
        if self.i >= self.n:
            if not self.done.done():
                self.done.set_result(None)
        else:
            self.transport.sendto(_MSGS[self.i & 255])

    def error_received(self, exc):
        if not self.done.done():
            self.done.set_exception(exc)


def udp_echo(loop, n):
    """n UDP round trips of 1 KiB datagrams between two datagram endpoints
    on the loop (127.0.0.1), one in flight. Counter: echoes equal to what
    was sent. A lost datagram makes the sample time out (a result)."""

    async def main():
        server, _ = await loop.create_datagram_endpoint(_UDPEcho, local_addr=(HOST, 0))
        addr = server.get_extra_info("sockname")
        done = loop.create_future()
        client_t, client = await loop.create_datagram_endpoint(
            lambda: _UDPClient(n, done), remote_addr=addr
        )
        _start()
        client.start()
        await done
        dt = _stop()
        client_t.close()
        server.close()
        return dt, client.good

    dt, good = loop.run_until_complete(main())
    return dt, good, {}, {}


def _tls_contexts():
    """A throwaway CA and a certificate for 'localhost', made by trustme at
    run time (never stored)."""
    import ssl

    import trustme

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    return server_ctx, client_ctx


def tls_rtt(loop, n):
    """n round trips of 1 KiB over TLS through asyncio streams (the seed's
    echo handler behind start_server(ssl=...), a client from
    open_connection(ssl=..., server_hostname='localhost') writing, draining,
    readexactly(1024)). The handshake is not timed. Counter: echoes equal
    to what was sent. Check: the connection used TLS."""
    server_ctx, client_ctx = _tls_contexts()

    async def main():
        server = await asyncio.start_server(_echo_read_write, HOST, 0, ssl=server_ctx)
        reader, writer = await asyncio.open_connection(
            HOST, _port(server), ssl=client_ctx, server_hostname="localhost"
        )
        version = writer.get_extra_info("ssl_object").version()
        result = await _stream_client(reader, writer, n)
        server.close()
        await server.wait_closed()
        return (*result, version)

    dt, good, version = loop.run_until_complete(main())
    return dt, good, {"tls": bool(version and version.startswith("TLS"))}, {"version": version}


# The name the lookup workloads resolve: "localhost", answered from
# /etc/hosts as most services' names on a host are. Tests set another
# (ZL_BENCH_LOOKUP_HOST=127.1) that needs no name service at all.
LOOKUP_HOST = os.environ.get("ZL_BENCH_LOOKUP_HOST", "localhost")


def getaddrinfo_localhost(loop, n):
    """n x await loop.getaddrinfo('localhost', 80), one after another."""
    return _getaddrinfo_serial(loop, n, LOOKUP_HOST, 0)


def getaddrinfo_gather(loop, n):
    """n x loop.getaddrinfo('localhost', 80) at once, awaited with gather.
    Counter: answers equal to socket.getaddrinfo('localhost', 80)."""
    ref = socket.getaddrinfo(LOOKUP_HOST, 80)

    async def main():
        getaddrinfo = loop.getaddrinfo
        _start()
        res = await asyncio.gather(*[getaddrinfo(LOOKUP_HOST, 80) for _ in range(n)])
        return _stop(), res

    dt, res = loop.run_until_complete(main())
    return dt, sum(1 for r in res if r == ref), {}, {}


class Workload:
    def __init__(
        self, name, func, size, title, metric="ns", needs_loop=True, unit=1, rounds=5, op="op"
    ):
        self.name = name
        self.func = func
        self.size = size
        self.title = title
        # "ns": ns per operation; "ms": ms for the whole workload (seed
        # 000's figure); "rss": MiB of peak RSS growth; "mibs": MiB/s, the
        # size being MiB (higher is better).
        self.metric = metric
        self.needs_loop = needs_loop
        self.unit = unit  # the counter counts size x unit (bulk: bytes per MiB)
        # Measured rounds in a default run, chosen from the CoV of full
        # runs (scripts/benchmark/README.md, "How many rounds").
        self.rounds = rounds
        self.op = op  # what one operation is, for per-operation diagnostics

    def expected(self, size):
        return size * self.unit


_ALL = [
    # seed 000's table (ms for the whole workload, with the peak RSS)
    Workload(
        "seed_callbacks", seed_callbacks, 1_000_000, "N callbacks scheduled as one batch", "ms"
    ),
    Workload(
        "seed_tasks", seed_tasks, 200_000, "N tasks awaiting sleep(0), batches of 5,000", "ms"
    ),
    Workload(
        "seed_tcp",
        seed_tcp,
        20_000,
        "N TCP round trips of 1 KiB, asyncio streams",
        "ms",
        op="round trip",
    ),
    # the span (seed 001): scheduler
    Workload("call_soon", call_soon, 500_000, "call_soon, no args (batches of 10k)"),
    Workload("call_soon_args", call_soon_args, 500_000, "call_soon, 2 args (batches of 10k)"),
    Workload(
        "call_later_cancel", call_later_cancel, 200_000, "call_later(10) + cancel, then 1 iter"
    ),
    Workload("sleep0", sleep0, 200_000, "1 task, sleep(0) x N (loop iterations)"),
    Workload("tasks", tasks, 200_000, "N tasks awaiting sleep(0), batches of 5000"),
    Workload("threadsafe", threadsafe, 100_000, "call_soon_threadsafe from 1 thread"),
    Workload("rss", rss, 1_000_000, "peak RSS growth, N call_soon at once", metric="rss"),
    # network
    Workload("stream_rtt", stream_rtt, 10_000, "1 KiB round trip, asyncio streams"),
    Workload("proto_echo", proto_echo, 10_000, "1 KiB round trip, Protocol echo"),
    Workload("bulk", bulk, 256, "MiB in 64 KiB writes, flow control (MiB/s)", "mibs", unit=1 << 20),
    Workload("udp_echo", udp_echo, 10_000, "1 KiB UDP datagram echo, one in flight"),
    Workload("tls_rtt", tls_rtt, 5_000, "1 KiB round trip over TLS, asyncio streams"),
    Workload(
        "tls_bulk",
        tls_bulk,
        64,
        "MiB over TLS in 64 KiB writes, flow control (MiB/s)",
        "mibs",
        unit=1 << 20,
    ),
    Workload("two_writes", two_writes, 10_000, "100 B request, reply in 2 writes (200 B + 1 KiB)"),
    Workload("one_write", one_write, 10_000, "100 B request, reply in 1 write (1224 B)"),
    # names
    Workload(
        "getaddrinfo_numeric", getaddrinfo_numeric, 10_000, "await getaddrinfo('127.0.0.1', 80)"
    ),
    Workload(
        "getaddrinfo_localhost",
        getaddrinfo_localhost,
        2_000,
        "await getaddrinfo('localhost', 80), one at a time",
    ),
    Workload(
        "getaddrinfo_gather",
        getaddrinfo_gather,
        2_000,
        "getaddrinfo('localhost', 80), N at once (gather), per call",
    ),
    # processes
    Workload("spawn", spawn, 200, "create_subprocess_exec(true) + wait, one at a time"),
    Workload(
        "pipe_bulk",
        pipe_bulk,
        256,
        "MiB from a child through a pipe, read(256 KiB) (MiB/s)",
        "mibs",
        unit=1 << 20,
    ),
]
WORKLOADS = {w.name: w for w in _ALL}

SEED = ["seed_callbacks", "seed_tasks", "seed_tcp"]
# The span's default list leaves out `tasks`, the same work as seed_tasks,
# and `rss`, the same 1M callbacks as seed_callbacks, whose peak RSS the
# seed tables report (their targets are read there); --workloads names them.
SPAN = [w.name for w in _ALL if w.name not in SEED and w.name not in ("tasks", "rss")]

FLOOR = Workload(
    "floor", floor, 2_000_000, "C loop calling an empty Python function", needs_loop=False
)
