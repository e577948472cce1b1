"""User-space instructions per operation, counted by callgrind: a witness
that does not drift with the load of a shared machine, for changes that
should cost nothing measurable in wall time.

    python -m benchmark.instructions [--loops zloopgo,uvloop] [--ops call_soon,stream_rtt]
    python -m benchmark.instructions --ops stream_rtt --functions 'RunOnce|send_now|zl_dispatch'

Each operation runs N and 2N times in a fresh interpreter under
`valgrind --tool=callgrind` (PYTHONHASHSEED=0); the difference of the two
totals divided by N is the cost of one operation, without start-up.
--functions REGEX instead prints, for each function whose name matches, its
own instructions per call and per operation (one run of 2N; calls counted
by callgrind): the cost of a change inside those functions, free of the
run-to-run variation in how many loop iterations an operation takes.
zloopgo must be built with `GOFLAGS=-tags=valgrind` (the Go runtime then
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

FACTORIES = {
    "asyncio": "asyncio.SelectorEventLoop",
    **{
        name: f"__import__('{name}').new_event_loop"
        for name in ("zloopgo", "uvloop", "rsloop", "zuvloop", "rloop", "zloop", "blazio")
    },
}

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
    "tls_rtt": (
        1000,
        """
import ssl, trustme
ca = trustme.CA()
server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ca.issue_cert("localhost").configure_cert(server_ctx)
client_ctx = ssl.create_default_context()
ca.configure_trust(client_ctx)
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
}


def callgrind_text(loop, body, n, gc_off):
    """The callgrind output of one run of body with n operations."""
    gc = "import gc; gc.disable()\n" if gc_off else ""
    code = f"import asyncio\n{gc}loop = {FACTORIES[loop]}()\nn = {n}\n{body}\nloop.close()\n"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
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
        with open(out) as f:
            return f.read()


def count(loop, body, n, gc_off):
    text = callgrind_text(loop, body, n, gc_off)
    return int(re.search(r"^summary: (\d+)", text, re.MULTILINE).group(1))


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
    costs = self_costs(callgrind_text(loop, body, 2 * n, gc_off))
    matched = sorted(fn for fn in costs if re.search(pattern, fn))
    total = 0
    for fn in matched:
        cost, calls = costs[fn]
        total += cost
        per_call = f"{cost / calls:10,.1f}" if calls else f"{'?':>10}"
        print(f"{op:12} {loop:8} {fn[:60]:60} {per_call} per call {cost / (2 * n):10,.1f} per op")
    label = "(these functions)"
    print(f"{op:12} {loop:8} {label:60} {'':19} {total / (2 * n):10,.1f} per op")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loops", default="zloopgo")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--gc-off", action="store_true", help="gc.disable() first, as seed 000")
    p.add_argument("--functions", metavar="REGEX", help="own instructions of these functions")
    args = p.parse_args(argv)
    for op in args.ops.split(","):
        n, body = OPS[op]
        for loop in args.loops.split(","):
            if args.functions:
                print_functions(loop, op, body, n, args.gc_off, args.functions)
                continue
            twice, once = count(loop, body, 2 * n, args.gc_off), count(loop, body, n, args.gc_off)
            per_op = (twice - once) / n
            print(f"{op:16} {loop:8} {per_op:10,.0f} instructions per operation", flush=True)


if __name__ == "__main__":
    main()
