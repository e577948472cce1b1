"""What the end-to-end tests share: the loop each server must report, the
deterministic payloads, a server run in a subprocess (started on a free
127.0.0.1 port, stopped by a signal with its exit timed), and a small raw
HTTP/1.1 client that shows the wire (connection reuse, chunk framing)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from helpers import free_port

# Import names of what requirements.txt pins that the tests use directly.
E2E_PACKAGES = (
    "aiohttp",
    "aiosqlite",
    "asyncpg",
    "fastapi",
    "h11",
    "httptools",
    "httpx",
    "hypercorn",
    "sanic",
    "sqlalchemy",
    "trustme",
    "uvicorn",
    "websockets",
)
MISSING = [name for name in E2E_PACKAGES if importlib.util.find_spec(name) is None]
# scripts/e2e sets ZLOOPGO_E2E=1: then a missing package is a failure.
REQUIRED = os.environ.get("ZLOOPGO_E2E") == "1"

HERE = Path(__file__).resolve().parent
APPS = HERE / "apps"
HOST = "127.0.0.1"

# type(asyncio.get_running_loop()) as "module.qualname", for each loop the
# tests run on: what every server must report to prove where it ran.
EXPECTED_LOOP = {
    "asyncio": "asyncio.unix_events._UnixSelectorEventLoop",
    "zloopgo": "zloopgo._loop.Loop",
}

# What `uvicorn --loop` gets for each loop under test.
UVICORN_LOOP = {"asyncio": "asyncio", "zloopgo": "zloopgo:new_event_loop"}

MIB = 1024 * 1024


def payload(seed: int, size: int) -> bytes:
    """`size` deterministic pseudo-random bytes (the apps make the same)."""
    return random.Random(seed).randbytes(size)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_on(loop: asyncio.AbstractEventLoop, loop_name: str, coro, timeout: float = 30.0):
    """Run `coro` on the dual-run fixture's `loop` within `timeout` seconds,
    after checking that the loop is the kind under test."""
    cls = type(loop)
    assert f"{cls.__module__}.{cls.__qualname__}" == EXPECTED_LOOP[loop_name]
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


class ServerProcess:
    """A server in its own process group, output in a log file, listening on
    `self.port` (127.0.0.1) once `start` returns."""

    def __init__(
        self,
        make_argv: Callable[[int], list[str]],
        log_path: Path,
        env: dict[str, str] | None = None,
    ):
        self.make_argv = make_argv
        self.log_path = log_path
        self.env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self, ready_timeout: float = 30.0) -> ServerProcess:
        # A free port can be taken between the probe and the server's bind:
        # then the server exits at once and another port is tried.
        for _attempt in range(3):
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    self.make_argv(self.port),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                )
            if self._wait_listening(ready_timeout):
                return self
            if "address already in use" not in self.output().lower():
                break
        self.kill()
        raise AssertionError(f"server did not start listening:\n{self.output()}")

    def _wait_listening(self, timeout: float) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection((HOST, self.port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def problems(self) -> list[str]:
        """Lines of the server's output that report an error or a traceback
        (uvicorn, hypercorn and Sanic all log errors with ERROR)."""
        return [
            line for line in self.output().splitlines() if "Traceback" in line or "ERROR" in line
        ]

    def interrupt(self, sig: int = signal.SIGINT, timeout: float = 10.0) -> tuple[int, float]:
        """Send `sig`; returns (exit status, seconds from the signal to the
        exit). A server still running after `timeout` is killed and fails."""
        assert self.proc is not None
        start = time.monotonic()
        self.proc.send_signal(sig)
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"server still running {timeout} s after signal {sig}:\n{self.output()}"
            ) from None
        return status, time.monotonic() - start

    def interrupt_with_idle_connection(self, expected_loop: str) -> tuple[int, float]:
        """interrupt() while a keep-alive connection sits idle (it must not
        hold the shutdown up): the connection's one request reports
        `expected_loop`, and the server closes the connection on its way
        out."""
        with RawHTTP(self.port) as idle:
            assert idle.request("GET", "/loop").json()["loop"] == expected_loop
            status, seconds = self.interrupt()
            assert idle.rfile.read() == b""
        return status, seconds

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def python_argv(*args: str) -> list[str]:
    return [sys.executable, *args]


def uvicorn_argv(
    app: str, loop_name: str, http: str = "httptools", extra: Iterable[str] = ()
) -> Callable[[int], list[str]]:
    def argv(port: int) -> list[str]:
        return python_argv(
            "-m",
            "uvicorn",
            app,
            "--app-dir",
            str(APPS),
            "--host",
            HOST,
            "--port",
            str(port),
            "--loop",
            UVICORN_LOOP[loop_name],
            "--http",
            http,
            "--ws",
            "websockets",
            "--lifespan",
            "on",
            "--no-access-log",
            *extra,
        )

    return argv


# The ASGI servers the asgi_app cases run on, by name.
ASGI_SERVERS = ["uvicorn-httptools", "uvicorn-h11", "hypercorn"]


def asgi_server_argv(kind: str, loop_name: str) -> Callable[[int], list[str]]:
    """The command line serving apps/asgi_app.py with `kind` on `loop_name`."""
    if kind.startswith("uvicorn-"):
        return uvicorn_argv("asgi_app:app", loop_name, kind.removeprefix("uvicorn-"))
    if kind == "hypercorn":
        return lambda port: python_argv(str(APPS / "hypercorn_server.py"), loop_name, str(port))
    raise ValueError(kind)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    # Sizes of the chunks as framed on the wire (chunked responses only).
    chunks: list[int] | None = field(default=None)

    def json(self):
        return json.loads(self.body)


class RawHTTP:
    """One HTTP/1.1 connection to 127.0.0.1:port, written and parsed by hand
    so that the tests see the wire: which connection a request used, and how
    a chunked body was framed."""

    def __init__(self, port: int, timeout: float = 30.0, pause: float = 0.0, rcvbuf: int = 0):
        self.sock = socket.socket()
        if rcvbuf:
            # Before connect(), so that the window offered is small too.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((HOST, port))
        self.rfile = self.sock.makefile("rb")
        # With a pause, bodies are read at most 16 KiB at a time, sleeping
        # `pause` seconds between reads: a slow reader.
        self.pause = pause

    def close(self) -> None:
        self.rfile.close()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        chunks: Iterable[bytes] | None = None,
        headers: Iterable[tuple[str, str]] = (),
    ) -> Response:
        head = [f"{method} {path} HTTP/1.1", f"Host: {HOST}"]
        head += [f"{k}: {v}" for k, v in headers]
        if chunks is not None:
            head.append("Transfer-Encoding: chunked")
        elif body is not None:
            head.append(f"Content-Length: {len(body)}")
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        if chunks is not None:
            for chunk in chunks:
                self.sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.sock.sendall(b"0\r\n\r\n")
        elif body:
            self.sock.sendall(body)
        return self.read_response(method)

    def read_response(self, method: str = "GET") -> Response:
        status_line = self.rfile.readline()
        if not status_line:
            raise ConnectionError("connection closed before a response")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while True:
            line = self.rfile.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return Response(status, headers, b"")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                parts.append(self._read_exact(size))
                if self.rfile.readline() != b"\r\n":
                    raise AssertionError("chunk not followed by CRLF")
            return Response(status, headers, b"".join(parts), [len(p) for p in parts])
        if "content-length" in headers:
            return Response(status, headers, self._read_exact(int(headers["content-length"])))
        return Response(status, headers, self.rfile.read())

    def _read_exact(self, size: int) -> bytes:
        if self.pause:
            pieces, left = [], size
            while left:
                piece = self.rfile.read1(min(left, 16 * 1024))
                if not piece:
                    break
                pieces.append(piece)
                left -= len(piece)
                time.sleep(self.pause)
            data = b"".join(pieces)
        else:
            data = self.rfile.read(size)
        if len(data) != size:
            raise ConnectionError(f"body cut short: {len(data)} of {size} bytes")
        return data


def get(port: int, path: str) -> Response:
    """One request on a fresh connection."""
    with RawHTTP(port) as conn:
        return conn.request("GET", path, headers=[("Connection", "close")])
