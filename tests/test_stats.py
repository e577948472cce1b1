"""zloopgo.stats() and reset_stats(): each counter follows a workload whose
counts are known (callbacks, transport reads and writes by kind, timers,
descriptors, lookups), reset_stats() restarts the totals and leaves the
gauges, and the calls refuse what they cannot read (another loop type, a
closed loop, a running loop from another thread). stats() is zloopgo's
own: stock asyncio has no counters to dual-run against."""

import asyncio
import itertools
import socket
import threading

import pytest
from helpers import accepted_pair, run_once, zloop

import zloopgo

TOTALS = {
    "iterations",
    "callbacks",
    "poll_ns",
    "idle_ns",
    "busy_ns",
    "waits",
    "waits_blocking",
    "waits_skipped",
    "waits_full",
    "events",
    "timers_fired",
    "yields",
    "lookups_started",
    "lookups_done",
    "callbacks_timed",
    "callback_ns",
    "slow_callbacks",
    "wakeups",
    "looks_ahead",
    "looks_ahead_ready",
    "looks_ahead_left",
    "watches_native",
    "peeks",
    "peeks_found",
}
GAUGES = {"ready", "timers", "descriptors", "lookups_in_flight"}
TRANSPORT_COUNTS = {"reads", "read_bytes", "writes", "write_bytes", "writes_buffered"}


def test_the_dict_has_every_documented_figure():
    with zloop() as loop:
        s = zloopgo.stats(loop)
    assert set(s) == TOTALS | GAUGES | {
        "transports",
        "go",
        "slow_callback_detection",
        "clock_native",
    }
    assert set(s["transports"]) == {"tcp", "unix", "other"}
    for counts in s["transports"].values():
        assert set(counts) == TRANSPORT_COUNTS
    assert set(s["go"]) == {
        "goroutines",
        "gc_cycles",
        "heap_bytes",
        "memory_bytes",
        "gomaxprocs",
        "cgo_calls",
        "threads",
    }
    assert all(isinstance(s[k], int) for k in TOTALS | GAUGES)
    assert s["go"]["goroutines"] > 0 and s["go"]["heap_bytes"] > 0 and s["go"]["gomaxprocs"] >= 1


def test_callbacks_and_iterations_count_one_batch():
    with zloop() as loop:
        zloopgo.reset_stats(loop)
        for _ in range(7):
            loop.call_soon(lambda: None)
        assert zloopgo.stats(loop)["ready"] == 7
        run_once(loop)
        s = zloopgo.stats(loop)
    assert s["callbacks"] == 7
    assert s["iterations"] == 1
    assert s["ready"] == 0
    # nothing watched and callbacks ready: the wait is skipped or made with a zero timeout
    assert s["waits"] + s["waits_skipped"] == 1 and s["waits_blocking"] == 0
    assert s["idle_ns"] == 0 and s["poll_ns"] >= 0


def test_a_blocking_wait_is_idle_time_and_its_timer_fires():
    with zloop() as loop:
        zloopgo.reset_stats(loop)
        loop.run_until_complete(asyncio.sleep(0.01))
        s = zloopgo.stats(loop)
    assert s["timers_fired"] == 1
    assert s["waits_blocking"] >= 1
    assert 0 < s["idle_ns"] <= s["poll_ns"]


def test_reset_stats_restarts_totals_and_keeps_gauges():
    with zloop() as loop:
        for _ in range(3):
            loop.call_soon(lambda: None)
        run_once(loop)
        handles = [loop.call_later(100, print) for _ in range(2)]
        loop.call_soon(print)
        zloopgo.reset_stats(loop)
        s = zloopgo.stats(loop)
        assert {k: s[k] for k in TOTALS} == dict.fromkeys(TOTALS, 0)
        assert all(not any(c.values()) for c in s["transports"].values())
        assert s["ready"] == 1 and s["timers"] == 2
        for h in handles:
            h.cancel()


def test_timers_gauge_follows_scheduling_and_cancelling():
    with zloop() as loop:
        base = zloopgo.stats(loop)["timers"]
        handles = [loop.call_later(100 + i, print) for i in range(3)]
        assert zloopgo.stats(loop)["timers"] == base + 3
        run_once(loop)  # the engine takes them into its heap
        assert zloopgo.stats(loop)["timers"] == base + 3
        handles[0].cancel()
        assert zloopgo.stats(loop)["timers"] == base + 2
        run_once(loop)  # swept
        assert zloopgo.stats(loop)["timers"] == base + 2
        for h in handles[1:]:
            h.cancel()
        run_once(loop)
        assert zloopgo.stats(loop)["timers"] == base


def test_descriptors_gauge_follows_add_and_remove_reader():
    a, b = socket.socketpair()
    with a, b, zloop() as loop:
        base = zloopgo.stats(loop)["descriptors"]
        loop.add_reader(a, print)
        run_once(loop)
        assert zloopgo.stats(loop)["descriptors"] == base + 1
        loop.remove_reader(a)
        run_once(loop)
        assert zloopgo.stats(loop)["descriptors"] == base


def test_unix_transport_reads_and_writes_are_counted_by_kind():
    with zloop() as loop:

        async def main():
            transport, got, peer = await accepted_pair(loop)
            with peer:
                zloopgo.reset_stats(loop)
                for size in (100, 20, 3):
                    transport.write(b"w" * size)
                received = b""
                while len(received) < 123:
                    received += peer.recv(1000)
                peer.sendall(b"r" * 50)
                while sum(map(len, got)) < 50:
                    await asyncio.sleep(0.001)
                s = zloopgo.stats(loop)
                transport.close()
            return s

        s = loop.run_until_complete(main())
    unix = s["transports"]["unix"]
    assert unix["writes"] == 3 and unix["write_bytes"] == 123 and unix["writes_buffered"] == 0
    assert unix["read_bytes"] == 50 and unix["reads"] >= 1
    assert not any(s["transports"]["tcp"].values()) and not any(s["transports"]["other"].values())


def test_tcp_stream_round_trip_counts_as_tcp():
    with zloop() as loop:

        async def main():
            async def echo(reader, writer):
                writer.write(await reader.readexactly(10))
                await writer.drain()
                writer.close()

            server = await asyncio.start_server(echo, "127.0.0.1", 0)
            reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname())
            zloopgo.reset_stats(loop)
            writer.write(b"0123456789")
            assert await reader.readexactly(10) == b"0123456789"
            assert await reader.read() == b""
            s = zloopgo.stats(loop)
            writer.close()
            server.close()
            await server.wait_closed()
            return s

        s = loop.run_until_complete(main())
    tcp = s["transports"]["tcp"]
    # the client's write and the echo's; each side read 10 bytes, the client its EOF too
    assert tcp["writes"] == 2 and tcp["write_bytes"] == 20
    assert tcp["read_bytes"] == 20 and tcp["reads"] >= 3
    assert not any(s["transports"]["unix"].values())


def test_a_partial_send_is_counted_as_buffered():
    with zloop() as loop:

        async def main():
            transport, _got, peer = await accepted_pair(loop)
            with peer:
                zloopgo.reset_stats(loop)
                big = b"b" * (8 << 20)  # more than a socketpair's buffers hold
                transport.write(big)
                transport.write(b"after")
                s = zloopgo.stats(loop)
                transport.abort()
            return s

        s = loop.run_until_complete(main())
    unix = s["transports"]["unix"]
    # the first send took part of it and left the rest; the second queued behind it
    assert unix["writes"] == 1 and 0 < unix["write_bytes"] < 8 << 20
    assert unix["writes_buffered"] == 2


def test_lookups_are_counted_and_a_numeric_host_is_not_a_lookup():
    with zloop() as loop:
        zloopgo.reset_stats(loop)
        loop.run_until_complete(loop.getaddrinfo("127.0.0.1", 80))
        s = zloopgo.stats(loop)
        assert s["lookups_started"] == 0 and s["lookups_done"] == 0

        async def lookup():
            task = asyncio.ensure_future(loop.getaddrinfo("127.1", 80))
            await asyncio.sleep(0)
            during = zloopgo.stats(loop)
            await task
            return during

        during = loop.run_until_complete(lookup())
        s = zloopgo.stats(loop)
    assert during["lookups_started"] == 1 and during["lookups_in_flight"] == 1
    assert s["lookups_started"] == 1 and s["lookups_done"] == 1
    assert s["lookups_in_flight"] == 0


def test_stats_defaults_to_the_running_loop():
    with zloop() as loop:

        async def main():
            return zloopgo.stats()["callbacks"], zloopgo.stats(loop)["callbacks"]

        mine, explicit = loop.run_until_complete(main())
    assert mine == explicit


def test_stats_refuses_what_it_cannot_read():
    with pytest.raises(RuntimeError, match="no running event loop"):
        zloopgo.stats()
    with pytest.raises(RuntimeError, match="no running event loop"):
        zloopgo.reset_stats()
    stock = asyncio.SelectorEventLoop()
    try:
        with pytest.raises(TypeError, match="needs a zloopgo loop, got"):
            zloopgo.stats(stock)
        with pytest.raises(TypeError, match="needs a zloopgo loop"):
            zloopgo.report_slow_callbacks(loop=stock)
    finally:
        stock.close()
    loop = zloopgo.new_event_loop()
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        zloopgo.stats(loop)
    with pytest.raises(RuntimeError, match="closed"):
        zloopgo.reset_stats(loop)


def test_a_running_loop_is_read_on_its_own_thread_only():
    with zloop() as loop:
        errors = []

        def from_thread():
            for call in (zloopgo.stats, zloopgo.reset_stats, zloopgo.report_slow_callbacks):
                try:
                    call(loop=loop)
                except RuntimeError as exc:
                    errors.append(str(exc))
            loop.call_soon_threadsafe(loop.stop)

        loop.call_soon(threading.Thread(target=from_thread).start)
        loop.run_forever()
        # stopped: any thread may read it
        result = []
        t = threading.Thread(target=lambda: result.append(zloopgo.stats(loop)))
        t.start()
        t.join()
    assert len(errors) == 3 and all("loop's own thread" in e for e in errors)
    assert result and result[0]["callbacks"] >= 2


class TwoWrites(asyncio.Protocol):
    """Replies to b"2" with two writes (a header, a body), to b"1" with one."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(b"head")
        if data == b"2":
            self.transport.write(b"body")


def test_each_write_of_a_reply_is_one_send_counted():
    # Five replies of two writes and one of one, and the client's six: every
    # write() is its own send (none held back for the next), counted once.
    with zloop() as loop:

        async def main():
            server = await loop.create_server(TwoWrites, "127.0.0.1", 0)
            reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname())
            zloopgo.reset_stats(loop)
            for _ in range(5):
                writer.write(b"2")
                assert await reader.readexactly(8) == b"headbody"
            writer.write(b"1")
            assert await reader.readexactly(4) == b"head"
            s = zloopgo.stats(loop)
            writer.close()
            server.close()
            await server.wait_closed()
            return s

        s = loop.run_until_complete(main())
    assert s["transports"]["tcp"]["writes"] == 6 + 11
    assert s["transports"]["tcp"]["writes_buffered"] == 0


def test_the_benchmarks_trace_records_iterations_up_to_its_size():
    # _engine.trace_start / trace_take: scripts/benchmark/timeline.py's source
    from zloopgo import _engine

    with zloop() as loop:
        _engine.trace_start(loop, 3)
        for k in range(5):
            for _ in range(k + 1):
                loop.call_soon(int)
            run_once(loop)
        trace = _engine.trace_take(loop)
        assert _engine.trace_take(loop) == []  # taken: the trace stopped
        for bad in (-1, (1 << 20) + 1):
            with pytest.raises(ValueError, match=r"a trace holds 0 to 2\*\*20 iterations"):
                _engine.trace_start(loop, bad)
        for fine in (0, 1 << 20):
            _engine.trace_start(loop, fine)
            run_once(loop)
            assert len(_engine.trace_take(loop)) == min(fine, 1)
    assert len(trace) == 3
    previous_end = 0
    for wait_start, wait_end, end, events, timers, done, blocking, _ in trace:
        assert previous_end <= wait_start <= wait_end <= end
        assert (events, timers, done, blocking) == (0, 0, 0, 0)
        previous_end = end
    ran = [b[7] - a[7] for a, b in itertools.pairwise(trace)]
    assert ran == [2, 3]


def test_tls_is_counted_as_the_encrypted_bytes_of_its_tcp_transport(tls_contexts):
    # asyncio's SSLProtocol runs over zloopgo's socket transport: what it
    # counts is the TLS records, more than the application's bytes
    server_ctx, client_ctx = tls_contexts
    payload = b"p" * 1000
    with zloop() as loop:

        async def main():
            async def echo(reader, writer):
                writer.write(await reader.readexactly(len(payload)))
                await writer.drain()
                writer.close()

            server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server_ctx)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
            )
            zloopgo.reset_stats(loop)
            writer.write(payload)
            assert await reader.readexactly(len(payload)) == payload
            s = zloopgo.stats(loop)
            writer.close()
            server.close()
            await server.wait_closed()
            return s

        s = loop.run_until_complete(main())
    tcp = s["transports"]["tcp"]
    assert tcp["writes"] >= 2 and tcp["write_bytes"] > 2 * len(payload)
    assert tcp["reads"] >= 2 and tcp["read_bytes"] > 2 * len(payload)
