"""User-space instructions per request of an application row's server,
counted by callgrind: what bounds a row where the application's own Python
does most of the work (issue 43's "bound", as docs/where-time-goes.md gives
it for uvicorn plaintext).

    python -m benchmark.apps.instructions [--rows json,db] [--servers uvicorn] \\
        [--loops asyncio,uvloop,zloopgo] [--requests 400] [--split]

For each (server, row, loop) the server runs under `valgrind
--tool=callgrind` twice, serving N and then 2N requests from the load
generator (apps/load, closed loop, every answer checked, on the usual
connections) before SIGTERM stops it; the difference of the two totals
divided by N is one request's cost without start-up and shut-down. With
--split it is divided as benchmark/instructions.py divides it (the
interpreter, _asyncio, zloopgo's C adapter and Go engine, another loop's
own module, libc); the kernel is not counted. zloopgo must be built with
GOFLAGS=-tags=valgrind, as for benchmark.instructions. PostgreSQL, Redis
and the load generator run outside callgrind.
"""

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile

from .. import samples as runner
from ..instructions import PARTS, split
from . import bench, services
from .rows import CONNS, SERVER_ROWS

SHORT = {
    "json": "JSON serialization",
    "db": "single query",
    "queries": "20 queries",
    "fortunes": "fortunes",
    "updates": "20 updates",
    "cached": "cached query (Redis, 20 Worlds)",
    "ws": "WebSocket echo, 1 KiB",
}


def count(opts, server, row, loop, requests, tmpdir):
    """(total instructions, their split) of a server run that answered
    `requests` requests, or raises RuntimeError saying why not."""
    out = os.path.join(tmpdir, f"cg-{server}-{loop}-{requests}.out")
    port = runner.free_port()
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    cmd += bench.server_command(server, loop, port)
    env = dict(
        os.environ,
        ZL_APPS_PG=opts.svc.pg_dsn,
        ZL_APPS_REDIS=opts.svc.redis_url,
        PYTHONHASHSEED="0",
        GODEBUG="asyncpreemptoff=1",  # callgrind aborts on the preemption signals
    )
    log_path = os.path.join(tmpdir, f"server-{server}-{loop}.out")
    with runner.Server(cmd, log_path, env=env, cwd=bench.SCRIPTS) as srv:
        if not srv.wait_ready(lambda: bench.ready(port), 600):
            raise RuntimeError(srv.not_ready("answered /ready under callgrind")[1])
        _, path, check = row
        scheme = "ws" if check.startswith("echo") else "http"
        client = [opts.appload, "-url", f"{scheme}://127.0.0.1:{port}{path}", "-check", check]
        client += ["-conns", str(CONNS[server]), "-requests", str(requests)]
        text, rc = runner.run_client(client, 1800)
        if rc != 0:
            raise RuntimeError(f"appload: {(text or 'timed out')[-300:]}")
        # not SIGTERM: a signal that lands on one of the Go runtime's
        # threads trips callgrind; the server ends itself with os._exit
        with contextlib.suppress(OSError):  # it may be gone before the answer is read
            bench.fetch_exit(port)
        try:
            srv.proc.wait(600)
        except subprocess.TimeoutExpired:
            raise RuntimeError("the server did not exit after GET /exit") from None
    with open(out) as f:
        found = re.search(r"^summary: (\d+)", f.read(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no callgrind summary; the server said: {srv.text[:3000]}")
    total = int(found.group(1))
    return total, split(out) if opts.split else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="json,db", help=f"of {','.join(SHORT)}")
    p.add_argument("--servers", default="uvicorn", help="of uvicorn,aiohttp (ws: uvicorn-ws)")
    p.add_argument("--loops", default="asyncio,uvloop,zloopgo")
    p.add_argument("--requests", type=int, default=400, help="N (the runs serve N and 2N)")
    p.add_argument("--split", action="store_true")
    opts = p.parse_args(argv)
    why = services.missing()
    if why:
        print(f"not run: {why}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="zl-apps-cg-") as tmpdir:
        opts.appload = bench.build_appload(tmpdir)
        with services.running(tmpdir, []) as svc:
            opts.svc = svc
            for short in opts.rows.split(","):
                title = SHORT[short]
                servers = ["uvicorn-ws"] if short == "ws" else opts.servers.split(",")
                for server in servers:
                    row = next(r for r in SERVER_ROWS[server] if r[0] == title)
                    for loop in opts.loops.split(","):
                        n = opts.requests
                        try:
                            once, once_parts = count(opts, server, row, loop, n, tmpdir)
                            twice, twice_parts = count(opts, server, row, loop, 2 * n, tmpdir)
                        except RuntimeError as exc:
                            print(f"{server:10} {short:9} {loop:8} failed: {exc}", flush=True)
                            continue
                        per = (twice - once) / n
                        line = f"{server:10} {short:9} {loop:8} {per:10,.0f} per request"
                        if opts.split:
                            line += "".join(
                                f"; {part} {(twice_parts[part] - once_parts[part]) / n:,.0f}"
                                for part in PARTS
                                if twice_parts[part] != once_parts[part]
                            )
                        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
