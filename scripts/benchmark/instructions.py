"""User-space instructions per operation, counted by callgrind: a witness
that does not drift with the load of a shared machine, for changes that
should cost nothing measurable in wall time.

    python -m benchmark.instructions [--loops zloopgo,uvloop] [--ops call_soon,stream_rtt]

Each operation runs N and 2N times in a fresh interpreter under
`valgrind --tool=callgrind` (PYTHONHASHSEED=0); the difference of the two
totals divided by N is the cost of one operation, without start-up.
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


def count(loop, body, n, gc_off):
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
            text = f.read()
    return int(re.search(r"^summary: (\d+)", text, re.MULTILINE).group(1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loops", default="zloopgo")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--gc-off", action="store_true", help="gc.disable() first, as seed 000")
    args = p.parse_args(argv)
    for op in args.ops.split(","):
        n, body = OPS[op]
        for loop in args.loops.split(","):
            twice, once = count(loop, body, 2 * n, args.gc_off), count(loop, body, n, args.gc_off)
            per_op = (twice - once) / n
            print(f"{op:16} {loop:8} {per_op:10,.0f} instructions per operation", flush=True)


if __name__ == "__main__":
    main()
