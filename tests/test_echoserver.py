"""bench_uvloop/echoserver.py, the server the echo benchmark measures:
every mode echoes exactly, on the loop it was asked for, and the
ECHO-STATS line it prints on SIGTERM counts what it did (the runner
rejects a sample whose counts do not match the client's work)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from helpers import free_port

SERVER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench_uvloop", "echoserver.py")
MODES = {
    "sock": [],
    "streams": ["--streams"],
    "proto": ["--proto"],
    "buffered": ["--proto", "--buffered"],
}
LOOP_FLAGS = {"asyncio": [], "zloopgo": ["--zloopgo"]}


def _connect(server, port):
    """Connects once the server has said it serves: it prints that line
    before its loop runs, and in sock mode opens its listener in a task, so
    a refusal is retried while the server runs. No deadline of its own
    (under emulation a server starts in tens of seconds): pytest's alarm
    bounds a server that never listens."""
    for said in iter(server.stdout.readline, ""):
        if said.startswith("serving on "):
            break
    else:
        raise AssertionError("the server exited before serving: " + str(server.wait()))
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port))
        except ConnectionRefusedError:
            if server.poll() is not None:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_echoserver_echoes_and_reports_its_work(loop_name, mode):
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            SERVER,
            *LOOP_FLAGS[loop_name],
            *MODES[mode],
            "--addr",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        conn = _connect(server, port)
        messages = [bytes([i]) * size for i, size in enumerate((1, 1024, 10240, 100000))]
        with conn:
            for msg in messages:
                conn.sendall(msg)
                echoed = b""
                while len(echoed) < len(msg):
                    chunk = conn.recv(len(msg) - len(echoed))
                    assert chunk, "the server closed the connection"
                    echoed += chunk
                assert echoed == msg
        time.sleep(0.1)  # let the server see the close before it is stopped
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0, out
    lines = [line for line in out.splitlines() if line.startswith("ECHO-STATS ")]
    assert len(lines) == 1, out
    stats = json.loads(lines[0][len("ECHO-STATS ") :])
    total = sum(len(m) for m in messages)
    assert stats["loop"] == loop_name
    assert stats["mode"] == mode
    assert stats["connections"] == 1
    assert stats["bytes_in"] == stats["bytes_out"] == total
    # CPU from serving to stopping: it echoed 111 KiB, so more than nothing,
    # and far less than the seconds the test took.
    assert 0 < stats["cpu_seconds"] < 5
