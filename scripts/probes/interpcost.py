"""Whether a request costs more instructions in a subinterpreter than in
the main interpreter (issue 41, part 3): the scaling part's HTTP server
(benchmark/scaling/server.py, h11 on asyncio.Protocol) run under callgrind
in each arrangement, one server, one keep-alive connection.

    python -m probes.interpcost [--loops asyncio,zloopgo] [--requests 1000]

The scaling part found a request's server CPU time higher in an
interpreter than in a process (docs/benchmarks.md); this says whether the
interpreter runs more instructions for it or runs the same ones slower.
For each (loop, arrangement) the server runs twice under callgrind,
answering a few warm-up requests and then N/5 or 6N/5 more; the
difference of the two totals divided by N is one request without start-up
and shut-down. Every answer is checked (status 200, the body's length),
and the server's own count of requests must agree. zloopgo must be built
with GOFLAGS=-tags=valgrind. It knows how to run the server and count;
the figures go into docs/benchmarks.md.
"""

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from benchmark import samples as runner
from benchmark.scaling.serve import JSON_BODY

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARRANGEMENTS = ("thread", "interp")
WARM_UP = 50
REQUEST = b"GET /json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
READY_WITHIN = 900  # seconds: a server starting under callgrind on a loaded machine


def server_command(loop, arrangement, port):
    return [
        sys.executable,
        "-m",
        "benchmark.scaling.server",
        *("--arrangement", arrangement, "--servers", "1"),
        *("--loop", loop, "--app", "http", "--port", str(port)),
    ]


def ask(sock, n):
    """n requests on one keep-alive connection, one at a time; raises on
    any answer that is not 200 with the app's JSON body."""
    pending = b""
    for _ in range(n):
        sock.sendall(REQUEST)
        while True:
            end = pending.find(b"\r\n\r\n")
            if end >= 0:
                head = pending[:end].decode("latin-1")
                length = int(re.search(r"(?im)^content-length:\s*(\d+)", head).group(1))
                if len(pending) >= end + 4 + length:
                    break
            got = sock.recv(65536)
            if not got:
                raise ConnectionError("the server closed the connection")
            pending += got
        if not head.startswith("HTTP/1.1 200") or length != len(JSON_BODY):
            raise AssertionError(f"unexpected answer: {head!r}")
        pending = pending[end + 4 + length :]
        if pending:
            raise AssertionError(f"bytes beyond the answer: {pending[:60]!r}")


def _text(path):
    with open(path, errors="replace") as f:
        return f.read()


def served(log_path):
    """The server's own count of requests (its SCALING-STATS line), or
    None before it printed one."""
    found = re.findall(r'^SCALING-STATS .*"requests": (\d+)', _text(log_path), re.MULTILINE)
    return int(found[-1]) if found else None


def run_once(loop, arrangement, n, tmpdir, counter):
    """The counter's total over a server that answered WARM_UP + n
    requests (None without a counter: the run only checks the answers)."""
    port = runner.free_port()
    out = os.path.join(tmpdir, f"cg-{loop}-{arrangement}-{n}")
    log_path = out + ".log"
    prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] if counter else []
    env = dict(os.environ, GODEBUG="asyncpreemptoff=1", PYTHONHASHSEED="0")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [*prefix, *server_command(loop, arrangement, port)],
            cwd=SCRIPTS,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + READY_WITHIN
        while "SCALING-READY" not in _text(log_path):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {_text(log_path)[-400:]}")
            time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            ask(sock, WARM_UP + n)
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(600)
    if rc != 0 or served(log_path) != WARM_UP + n:
        raise RuntimeError(
            f"server exit {rc}, {served(log_path)} requests served: {_text(log_path)[-300:]!r}"
        )
    if not counter:
        return None
    return int(re.search(r"^summary: (\d+)", _text(out), re.MULTILINE).group(1))


def counted(loop, arrangement, n, tmpdir, tries=3):
    """run_once under callgrind, again when the server did not end
    cleanly: the SIGTERM that ends it can land on one of the Go runtime's
    threads, which trips callgrind now and then (perrequest.py avoids it
    with GET /exit, which the scaling server has not)."""
    for _ in range(tries - 1):
        try:
            return run_once(loop, arrangement, n, tmpdir, True)
        except RuntimeError as exc:
            print(f"# {loop} {arrangement} {n}: {exc}; again", file=sys.stderr, flush=True)
    return run_once(loop, arrangement, n, tmpdir, True)


def per_request(loop, arrangement, n, tmpdir):
    small = counted(loop, arrangement, n // 5, tmpdir)
    large = counted(loop, arrangement, n // 5 + n, tmpdir)
    return (large - small) / n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loops", default="asyncio,zloopgo")
    p.add_argument("--requests", type=int, default=1000)
    opts = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="zl-interpcost-") as tmpdir:
        for loop in opts.loops.split(","):
            got = {a: per_request(loop, a, opts.requests, tmpdir) for a in ARRANGEMENTS}
            print(
                f"{loop:10} main interpreter {got['thread']:10,.0f}"
                f"  subinterpreter {got['interp']:10,.0f}"
                f"  ratio {got['interp'] / got['thread']:.3f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
