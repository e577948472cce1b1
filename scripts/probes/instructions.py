"""User-space instructions per operation, counted by callgrind: a witness
that does not drift with the load of a shared machine, for changes that
should cost nothing measurable in wall time.

    python -m probes.instructions [--loops zloopgo,uvloop] [--ops call_soon,stream_rtt]
    python -m probes.instructions --ops stream_rtt --functions 'RunOnce|send_now|zl_dispatch'

Each operation runs N and 2N times in a fresh interpreter under
`valgrind --tool=callgrind` (PYTHONHASHSEED=0); the difference of the two
totals divided by N is the cost of one operation, without start-up.
--functions REGEX instead prints, for each function whose name matches, its
own instructions per call and per operation (one run of 2N; calls counted
by callgrind): the cost of a change inside those functions, free of the
run-to-run variation in how many loop iterations an operation takes.
With --split, each count is also split by where the instructions ran:
the interpreter, _asyncio, zloopgo's C adapter, its Go engine and
runtime, a rival loop's module, libc, and other (other extensions, such
as a database driver's C), by the object and source file callgrind names
for each function, read from its output file (probes/callgrind_costs.py;
the kernel is not counted). zloopgo must be built with `GOFLAGS=-tags=valgrind` (the Go runtime then
describes its stacks to valgrind), and runs with GODEBUG=asyncpreemptoff=1
(callgrind aborts on the runtime's preemption signals). It knows the loops
by the name of their factory; nothing of their code.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

from benchmark.worker import FACTORIES as MAKERS

from .callgrind_costs import own_costs

# the benchmark worker's contenders, as the expression that makes a loop
FACTORIES = {name: f"__import__('{m}').{f}" for name, (m, f) in MAKERS.items()}

# The HTTP ops' keep-alive client, on the same loop as the server on
# `port`: n x GET /plaintext, each reply's head and 13-byte body read.
_HTTP_CLIENT = """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(n):
        writer.write(b"GET /plaintext HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n")
        head = await reader.readuntil(b"\\r\\n\\r\\n")
        assert head.startswith(b"HTTP/1.1 200") and b"content-length: 13" in head.lower(), head
        await reader.readexactly(13)
    writer.close()
"""

# op -> (N, the body run with `loop` and `n` defined)
OPS = {
    "call_soon": (
        20000,
        """
def cb():
    pass
for _ in range(n):
    loop.call_soon(cb)
loop.call_soon(loop.stop)
loop.run_forever()
""",
    ),
    "timer": (
        5000,
        """
async def main():
    for _ in range(n):
        loop.call_later(10, print).cancel()
        await asyncio.sleep(0)
loop.run_until_complete(main())
""",
    ),
    "sleep0": (
        10000,
        """
async def main():
    for _ in range(n):
        await asyncio.sleep(0)
loop.run_until_complete(main())
""",
    ),
    "threadsafe": (
        20000,
        """
def cb():
    pass
for _ in range(n):
    loop.call_soon_threadsafe(cb)
loop.call_soon(loop.stop)
loop.run_forever()
""",
    ),
    "task": (
        5000,
        """
async def child():
    await asyncio.sleep(0)
async def main():
    left = n
    while left:
        k = min(1000, left)
        left -= k
        await asyncio.gather(*[loop.create_task(child()) for _ in range(k)])
loop.run_until_complete(main())
""",
    ),
    "stream_rtt": (
        2000,
        """
async def main():
    async def echo(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
    payload = b"x" * 1024
    for _ in range(n):
        writer.write(payload)
        await reader.readexactly(len(payload))
    writer.close()
    server.close()
loop.run_until_complete(main())
""",
    ),
    "sock_rtt": (
        2000,
        """
import socket
async def main():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    async def echo():
        while data := await loop.sock_recv(b, 1000000):
            await loop.sock_sendall(b, data)
    server = loop.create_task(echo())
    payload = b"x" * 1024
    for _ in range(n):
        await loop.sock_sendall(a, payload)
        await loop.sock_recv(a, 1000000)
    a.close()
    await server
    b.close()
loop.run_until_complete(main())
""",
    ),
    "udp_rtt": (
        2000,
        """
class Echo(asyncio.DatagramProtocol):
    def connection_made(self, t):
        self.t = t
    def datagram_received(self, data, addr):
        self.t.sendto(data, addr)
class Client(asyncio.DatagramProtocol):
    def __init__(self, done):
        self.left, self.done = n, done
    def connection_made(self, t):
        self.t = t
        t.sendto(b"x" * 1024)
    def datagram_received(self, data, addr):
        self.left -= 1
        if self.left:
            self.t.sendto(data)
        else:
            self.done.set_result(None)
async def main():
    server, _ = await loop.create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
    done = loop.create_future()
    client, _ = await loop.create_datagram_endpoint(
        lambda: Client(done), remote_addr=server.get_extra_info("sockname"))
    await done
    client.close()
    server.close()
loop.run_until_complete(main())
""",
    ),
    "tls_rtt": (
        1000,
        """
import os, ssl
certs = os.environ["ZL_INSTR_TLS"]  # written once by this tool: the same in both runs
server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
server_ctx.load_cert_chain(os.path.join(certs, "server.pem"))
client_ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
async def main():
    async def echo(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
    )
    payload = b"x" * 1024
    for _ in range(n):
        writer.write(payload)
        await writer.drain()
        await reader.readexactly(len(payload))
    writer.close()
    server.close()
loop.run_until_complete(main())
""",
    ),
    "two_write_reply": (
        2000,
        """
class Server(asyncio.Protocol):
    def connection_made(self, t):
        self.t = t
    def data_received(self, data):
        self.t.write(b"HTTP/1.1 200 OK\\r\\ncontent-length: 13\\r\\n\\r\\n")
        self.t.write(b"Hello, World!")
async def main():
    server = await loop.create_server(Server, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
    for _ in range(n):
        writer.write(b"GET / HTTP/1.1\\r\\n\\r\\n")
        await reader.readexactly(52)
    writer.close()
    server.close()
loop.run_until_complete(main())
""",
    ),
    "file_read": (
        4000,
        """
import os, tempfile, zloopgo
# a 64 KiB file in the page cache, read again from its start n times: the
# cached read zloopgo.open finishes on the loop thread (preadv2 RWF_NOWAIT)
path = os.path.join(tempfile.gettempdir(), "zl-instructions-64k")
with open(path, "wb") as f:
    f.write(b"z" * 65536)
async def main():
    async with zloopgo.open(path, "rb") as f:
        for _ in range(n):
            await f.seek(0)
            assert len(await f.read(65536)) == 65536
loop.run_until_complete(main())
""",
    ),
    "aiohttp_request": (
        500,
        """
from aiohttp import web
async def plaintext(request):
    return web.Response(body=b"Hello, World!", content_type="text/plain")
async def main():
    app = web.Application()
    app.add_routes([web.get("/plaintext", plaintext)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
"""
        + _HTTP_CLIENT
        + """
    await runner.cleanup()
loop.run_until_complete(main())
""",
    ),
    "uvicorn_request": (
        500,
        """
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState
from benchmark.httpapp import app
# what `uvicorn benchmark.httpapp:app --http httptools --no-access-log`
# serves each connection with (uvicorn's Server.startup), without its
# process: the protocol made on the loop under test
config = uvicorn.Config(app, http="httptools", lifespan="off", access_log=False)
config.load()
state = ServerState()
async def main():
    server = await loop.create_server(
        lambda: HttpToolsProtocol(config=config, server_state=state, app_state={}),
        "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
"""
        + _HTTP_CLIENT
        + """
    server.close()
loop.run_until_complete(main())
""",
    ),
}


# --split: where an operation's instructions run, by the object and
# source file callgrind names for each function
PARTS = ("python", "_asyncio", "adapter (C)", "engine (Go)", "another loop's", "libc", "other")


# A rival loop's objects: under its package's folder in site-packages
# (a driver's or a parser's C, such as asyncpg's, is "other")
RIVAL_PACKAGES = "/site-packages/({})/".format(
    "|".join(re.escape(m) for name, (m, _) in MAKERS.items() if name not in ("asyncio", "zloopgo"))
)


def part_of(function):
    """The part of PARTS that callgrind_annotate's function line names."""
    obj = function.rsplit("[", 1)[-1] if "[" in function else ""
    if "zloopgo" in obj:  # one .so holds the C adapter and the Go engine
        name = function.split("[", 1)[0]
        go = re.search(r"\.(go|s):|runtime\.|github\.com/|main\.|_cgo_|crosscall|cgocall", name)
        return "engine (Go)" if go else "adapter (C)"
    if "_asyncio" in obj:
        return "_asyncio"
    if re.search(RIVAL_PACKAGES, obj):  # a rival's extension module
        return "another loop's"
    if "site-packages" in obj:  # a driver's or a parser's extension
        return "other"
    if "libc.so" in obj or "ld-linux" in obj:
        return "libc"
    if "/python3" in obj or "libpython" in obj:  # after the extensions under lib/python3.X
        return "python"
    return "other"


def split(out):
    """Instructions per part of PARTS in the callgrind output file out."""
    with open(out) as f:
        costs = own_costs(f.read())
    parts = dict.fromkeys(PARTS, 0)
    for (obj, source, function), cost in costs.items():
        parts[part_of(f"{source}:{function} [{obj}]")] += cost
    return parts


def run_callgrind(loop, body, n, gc_off, out):
    """Runs body n times under callgrind, its output in the file out."""
    gc = "import gc; gc.disable()\n" if gc_off else ""
    code = f"import asyncio\n{gc}loop = {FACTORIES[loop]}()\nn = {n}\n{body}\nloop.close()\n"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-c",
            code,
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONHASHSEED": "0", "GODEBUG": "asyncpreemptoff=1"},
    )


def count(loop, body, n, gc_off, want_split=False):
    """The total instructions of body run n times (and, with want_split,
    their split into PARTS)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        run_callgrind(loop, body, n, gc_off, out)
        with open(out) as f:
            total = int(re.search(r"^summary: (\d+)", f.read(), re.MULTILINE).group(1))
        return total, split(out) if want_split else None


def self_costs(text):
    """{function: (own instructions, calls)} from callgrind's output format
    (name compression, a call's inclusive cost on the line after calls=)."""
    names, own, calls = {}, {}, {}
    current = callee = None
    call_cost_next = False

    def name(spec):
        m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
        if m is None:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names[m.group(1)]

    for line in text.splitlines():
        if line.startswith("fn="):
            current = name(line[3:])
        elif line.startswith("cfn="):
            callee = name(line[4:])
        elif line.startswith("calls="):
            calls[callee] = calls.get(callee, 0) + int(line[6:].split()[0])
            call_cost_next = True
        elif line[:1].isdigit() or line[:1] in ("+", "-", "*"):
            if call_cost_next:
                call_cost_next = False
                continue
            parts = line.split()
            if len(parts) >= 2:
                own[current] = own.get(current, 0) + int(parts[1])
    return {fn: (cost, calls.get(fn, 0)) for fn, cost in own.items()}


def print_functions(loop, op, body, n, gc_off, pattern):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        run_callgrind(loop, body, 2 * n, gc_off, out)
        with open(out) as f:
            costs = self_costs(f.read())
    matched = sorted(fn for fn in costs if re.search(pattern, fn))
    total = 0
    for fn in matched:
        cost, calls = costs[fn]
        total += cost
        per_call = f"{cost / calls:10,.1f}" if calls else f"{'?':>10}"
        print(f"{op:12} {loop:8} {fn[:60]:60} {per_call} per call {cost / (2 * n):10,.1f} per op")
    label = "(these functions)"
    print(f"{op:12} {loop:8} {label:60} {'':19} {total / (2 * n):10,.1f} per op")


def write_tls_files(where):
    """A test CA and a certificate for "localhost" (trustme), as files the
    TLS ops load: made here once, so that both runs of an op load the same
    ones instead of each generating keys, whose cost varies from run to run
    and would not cancel in the difference."""
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(os.path.join(where, "ca.pem"))
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(
        os.path.join(where, "server.pem")
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loops", default="zloopgo")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--gc-off", action="store_true", help="gc.disable() first, as seed 000")
    p.add_argument(
        "--split", action="store_true", help="also the instructions per part (Python, C, Go...)"
    )
    p.add_argument("--functions", metavar="REGEX", help="own instructions of these functions")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as certs:
        if any("ZL_INSTR_TLS" in OPS[op][1] for op in args.ops.split(",")):
            write_tls_files(certs)
            os.environ["ZL_INSTR_TLS"] = certs
        run_ops(args)


def run_ops(args):
    for op in args.ops.split(","):
        n, body = OPS[op]
        for loop in args.loops.split(","):
            if args.functions:
                print_functions(loop, op, body, n, args.gc_off, args.functions)
                continue
            twice, twice_parts = count(loop, body, 2 * n, args.gc_off, args.split)
            once, once_parts = count(loop, body, n, args.gc_off, args.split)
            per_op = (twice - once) / n
            line = f"{op:16} {loop:8} {per_op:10,.0f} instructions per operation"
            if args.split:
                line += "".join(
                    f"; {part} {(twice_parts[part] - once_parts[part]) / n:,.0f}"
                    for part in PARTS
                    if twice_parts[part] != once_parts[part]
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
