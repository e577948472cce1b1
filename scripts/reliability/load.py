"""Load figures at full size, for asyncio, uvloop (when importable) and
zloopgo, each (loop, workload) in a fresh interpreter:

- echo: 10k concurrent echo connections held for ~10 s. The measured
  process runs the echo server on the loop under test; the 10k clients run
  on a loop of the same kind in a helper process (one process would need
  20k descriptors, over the usual hard RLIMIT_NOFILE of 20000). Every
  client sends a message about once a second for the whole hold and checks
  the echo byte for byte.
- write: 1 GiB written through one connection to a peer that stops reading
  (for 1 s at the start and 1 s half-way), with asyncio's flow control:
  pause_writing must come, the write buffer stays bounded, and the peer
  checks the count and the CRC-32 of what it received.
- flood: 5000 connection attempts in bursts against a server listening
  with backlog=5, half of them closed with a reset; then 20 ordinary
  requests must be served.

Prints a Markdown table: held connections, bytes verified, peak RSS
(VmHWM of the measured process) in MiB, duration, errors (exception-handler
calls, failed checks, exceptions out of the loop). Exits 1 on any error.

    python scripts/reliability/load.py [--loops asyncio,uvloop,zloopgo]
        [--conns 10000] [--hold 10] [--gib 1] [--flood 5000] [--json out.json]

Everything binds to 127.0.0.1.
"""

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
import zlib

from loops import factory

MiB = 1 << 20
ALL_LOOPS = ("asyncio", "uvloop", "zloopgo")
WORKLOADS = ("echo", "write", "flood")


# ---- helpers (child side) ---------------------------------------------------


def new_loop(name):
    return factory(name)()


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def raise_nofile(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


class Errors:
    """Exception-handler calls and failed checks of one run."""

    def __init__(self, loop):
        self.count = 0
        self.samples = []
        loop.set_exception_handler(self.handler)

    def handler(self, _loop, context):
        self.add(context.get("message", "") + " " + repr(context.get("exception")))

    def add(self, what):
        self.count += 1
        if len(self.samples) < 5:
            self.samples.append(what)


def message(i, n):
    head = f"{i}:{n}|".encode()
    return head * (1 + (i + n) % 16)


# ---- echo: 10k held connections ---------------------------------------------------


class EchoServer(asyncio.Protocol):
    current = 0
    peak = 0
    echoed = 0

    def connection_made(self, transport):
        self.transport = transport
        EchoServer.current += 1
        EchoServer.peak = max(EchoServer.peak, EchoServer.current)

    def data_received(self, data):
        EchoServer.echoed += len(data)
        self.transport.write(data)

    def connection_lost(self, exc):
        EchoServer.current -= 1


def child_echo(loop_name, args):
    raise_nofile(args.conns + 200)
    loop = new_loop(loop_name)
    errors = Errors(loop)

    listener = socket.create_server(("127.0.0.1", 0), backlog=4096)
    port = listener.getsockname()[1]
    helper = subprocess.Popen(
        [sys.executable, __file__, "--echo-clients", loop_name, str(port), str(args.conns)]
        + [str(args.hold)],
        stdout=subprocess.PIPE,
        text=True,
    )

    async def main():
        server = await loop.create_server(EchoServer, sock=listener, backlog=4096)
        out, _ = await loop.run_in_executor(
            None, lambda: helper.communicate(timeout=args.hold + 120)
        )
        server.close()
        await server.wait_closed()
        return helper.returncode, out

    t0 = time.monotonic()
    code, out = loop.run_until_complete(main())
    duration = time.monotonic() - t0
    loop.close()
    try:
        clients = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        clients = {"held": 0, "verified": 0, "errors": 1, "samples": [f"helper exit {code}"]}
    for sample in clients["samples"]:
        errors.add("client: " + sample)
    errors.count += clients["errors"] - len(clients["samples"])
    held = min(EchoServer.peak, clients["held"])
    if held < args.conns:
        errors.add(f"held {held} of {args.conns}")
    return {
        "held": held,
        "verified": clients["verified"],
        "peak_rss": status_kib("VmHWM") / 1024,
        "duration": duration,
        "errors": errors.count,
        "samples": errors.samples,
        "notes": f"server peak {EchoServer.peak} conns, {EchoServer.echoed:,} bytes echoed"
        f", clients' peak RSS {clients.get('peak_rss', 0):.0f} MiB",
    }


def echo_clients(loop_name, port, n, hold):
    """The helper process: n connections, all open at once, each sending a
    message about once a second for `hold` seconds and checking the echo."""
    raise_nofile(n + 200)
    loop = new_loop(loop_name)
    errors = Errors(loop)
    state = {"open": 0, "verified": 0, "held": 0, "stop_at": float("inf")}

    async def client(i, all_open):
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 60)
        except (OSError, asyncio.TimeoutError) as exc:
            errors.add(f"connect {i}: {exc!r}")
            return
        state["open"] += 1
        try:
            await all_open.wait()
            await asyncio.sleep((i % 1000) / 1000)  # spread the rounds over a second
            rounds = 0
            while loop.time() < state["stop_at"]:
                data = message(i, rounds)
                writer.write(data)
                got = await asyncio.wait_for(reader.readexactly(len(data)), 30)
                if got != data:
                    errors.add(f"conn {i} round {rounds}: wrong echo")
                    return
                state["verified"] += len(data)
                rounds += 1
                await asyncio.sleep(1.0)
            state["held"] += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            errors.add(f"conn {i}: {exc!r}")
        finally:
            writer.close()

    async def main():
        all_open = asyncio.Event()
        tasks = []
        deadline = loop.time() + 120
        for start in range(0, n, 500):
            batch = min(500, n - start)
            tasks += [
                asyncio.ensure_future(client(i, all_open)) for i in range(start, start + batch)
            ]
            while state["open"] < start + batch and loop.time() < deadline:
                if all(t.done() for t in tasks[-batch:]):
                    break
                await asyncio.sleep(0.01)
        state["stop_at"] = loop.time() + hold
        all_open.set()
        await asyncio.gather(*tasks)

    loop.run_until_complete(main())
    loop.close()
    print(
        json.dumps(
            {
                "held": state["held"],
                "verified": state["verified"],
                "errors": errors.count,
                "samples": errors.samples,
                "peak_rss": status_kib("VmHWM") / 1024,
            }
        )
    )


# ---- write: 1 GiB to a peer that stops reading -------------------------------------


def child_write(loop_name, args):
    total = int(args.gib * 1024) * MiB
    chunk = os.urandom(MiB)
    loop = new_loop(loop_name)
    errors = Errors(loop)

    class Peer(asyncio.Protocol):
        def __init__(self):
            self.received = 0
            self.crc = 0
            self.done = loop.create_future()

        def connection_made(self, transport):
            self.transport = transport
            transport.pause_reading()  # stops reading at once
            loop.call_later(1.0, transport.resume_reading)

        def data_received(self, data):
            before = self.received
            self.received += len(data)
            self.crc = zlib.crc32(data, self.crc)
            if before < total // 2 <= self.received:  # and again half-way
                self.transport.pause_reading()
                loop.call_later(1.0, self.transport.resume_reading)
            if self.received >= total and not self.done.done():
                self.done.set_result(None)

        def connection_lost(self, exc):
            if not self.done.done():
                self.done.set_exception(ConnectionError(f"peer lost: {exc!r}"))

    class Writer(asyncio.Protocol):
        def __init__(self):
            self.paused = 0
            self.can_write = asyncio.Event()
            self.can_write.set()
            self.lost = False

        def pause_writing(self):
            self.paused += 1
            self.can_write.clear()

        def resume_writing(self):
            self.can_write.set()

        def connection_lost(self, exc):
            self.lost = True
            self.can_write.set()

    async def main():
        peers = []
        server = await loop.create_server(lambda: peers.append(Peer()) or peers[-1], "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        tr, w = await loop.create_connection(Writer, "127.0.0.1", port)
        while not peers:
            await asyncio.sleep(0.001)
        _low, high = tr.get_write_buffer_limits()
        sent = crc = max_buffer = 0
        while sent < total:
            await asyncio.wait_for(w.can_write.wait(), 30)
            if w.lost:
                errors.add("writer lost its connection")
                break
            tr.write(chunk)
            crc = zlib.crc32(chunk, crc)
            sent += len(chunk)
            max_buffer = max(max_buffer, tr.get_write_buffer_size())
        await asyncio.wait_for(peers[0].done, 60)
        tr.close()
        server.close()
        await server.wait_closed()
        return peers[0], w, crc, max_buffer, high

    t0 = time.monotonic()
    peer, w, crc, max_buffer, high = loop.run_until_complete(main())
    duration = time.monotonic() - t0
    loop.close()
    ok = peer.received == total and peer.crc == crc
    if not ok:
        errors.add(f"peer received {peer.received} bytes, crc match {peer.crc == crc}")
    if not w.paused:
        errors.add("pause_writing never called")
    if max_buffer > 2 * high + len(chunk):
        errors.add(f"write buffer reached {max_buffer} (high water {high})")
    return {
        "held": 1,
        "verified": peer.received if ok else 0,
        "peak_rss": status_kib("VmHWM") / 1024,
        "duration": duration,
        "errors": errors.count,
        "samples": errors.samples,
        "notes": f"pause_writing x{w.paused}, max buffer {max_buffer / MiB:.2f} MiB "
        f"(high water {high / 1024:.0f} KiB, chunk 1 MiB)",
    }


# ---- flood: connection attempts against backlog=5 ---------------------------------


def child_flood(loop_name, args):
    n = args.flood
    raise_nofile(n + 500)
    loop = new_loop(loop_name)
    errors = Errors(loop)
    linger0 = b"\x01\x00\x00\x00\x00\x00\x00\x00"
    stats = {"accepted": 0}

    class Server(asyncio.Protocol):
        def connection_made(self, transport):
            stats["accepted"] += 1
            self.transport = transport

        def data_received(self, data):
            self.transport.write(data)

    async def request(port, i):
        data = message(i, 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(data)
            return await reader.readexactly(len(data)) == data
        finally:
            writer.close()

    async def main():
        server = await loop.create_server(Server, "127.0.0.1", 0, backlog=5)
        port = server.sockets[0].getsockname()[1]
        socks = []
        for i in range(n):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)
            if i % 100 == 99:
                await asyncio.sleep(0)
                # the oldest ones go: half reset, half closed
                for j, old in enumerate(socks[:-200]):
                    if j % 2:
                        old.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger0)
                    old.close()
                del socks[:-200]
        await asyncio.sleep(0.5)
        for s in socks:
            s.close()
        verified = 0
        for i in range(20):
            try:
                if await asyncio.wait_for(request(port, i), 10):
                    verified += len(message(i, 0))
                else:
                    errors.add(f"request {i}: wrong echo")
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
                errors.add(f"request {i} after the flood: {exc!r}")
        await asyncio.sleep(0.2)
        server.close()
        await server.wait_closed()
        return verified

    t0 = time.monotonic()
    verified = loop.run_until_complete(main())
    duration = time.monotonic() - t0
    loop.close()
    return {
        "held": 0,
        "verified": verified,
        "peak_rss": status_kib("VmHWM") / 1024,
        "duration": duration,
        "errors": errors.count,
        "samples": errors.samples,
        "notes": f"{n} attempts, {stats['accepted']} accepted, 20 requests after",
    }


CHILDREN = {"echo": child_echo, "write": child_write, "flood": child_flood}


# ---- parent -----------------------------------------------------------------------------


def available(loop_name):
    if loop_name == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            return False
    return True


def run_child(workload, loop_name, args):
    cmd = [
        sys.executable,
        __file__,
        "--child",
        workload,
        loop_name,
        "--conns",
        str(args.conns),
        "--hold",
        str(args.hold),
        "--gib",
        str(args.gib),
        "--flood",
        str(args.flood),
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=args.hold + 300, check=False
        )
    except subprocess.TimeoutExpired:
        return {"errors": 1, "samples": ["timed out"], "failed": True}
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr or "").strip().splitlines()[-3:]
        return {"errors": 1, "samples": [f"exit {proc.returncode}: {' | '.join(tail)}"]}
    if proc.returncode != 0:
        result["errors"] += 1
        result["samples"].append(f"exit {proc.returncode}")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", default=",".join(ALL_LOOPS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--conns", type=int, default=10_000)
    parser.add_argument("--hold", type=float, default=10.0)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--flood", type=int, default=5000)
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "LOOP"))
    parser.add_argument("--echo-clients", nargs=4, metavar=("LOOP", "PORT", "N", "HOLD"))
    args = parser.parse_args()

    if args.echo_clients:
        name, port, n, hold = args.echo_clients
        echo_clients(name, int(port), int(n), float(hold))
        return 0
    if args.child:
        workload, name = args.child
        print(json.dumps(CHILDREN[workload](name, args)))
        return 0

    rows = []
    for workload in args.workloads.split(","):
        for name in args.loops.split(","):
            if not available(name):
                print(f"({name} not importable: skipped)", file=sys.stderr)
                continue
            print(f"running {workload} on {name}...", file=sys.stderr, flush=True)
            result = run_child(workload, name, args)
            result.update(workload=workload, loop=name)
            rows.append(result)
            for sample in result.get("samples", []):
                print(f"  {workload}/{name} error: {sample}", file=sys.stderr)

    print(
        "| workload | loop | held connections | bytes verified | peak RSS MiB "
        "| duration s | errors | notes |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(
            f"| {r['workload']} | {r['loop']} | {r.get('held', 0):,} | {r.get('verified', 0):,} "
            f"| {r.get('peak_rss', 0):.1f} | {r.get('duration', 0):.2f} | {r['errors']} "
            f"| {r.get('notes', '')} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
