"""gunicorn --preload with uvicorn's worker on zloopgo loops.

The preloaded application imports zloopgo (and installs its policy) in the
master; gunicorn then forks the workers, and each runs its server on a
zloopgo loop. That works because importing zloopgo does not start the Go
runtime. The negative case runs a zloopgo loop in the master at import:
the forked workers must then fail at once with zloopgo's RuntimeError
about fork() and never hang.

Needs gunicorn and uvicorn (pip install gunicorn uvicorn); the worker class
comes from the uvicorn-worker package when it is installed, else from
uvicorn.workers. Every gunicorn runs in its own process group, bound to
127.0.0.1, and is killed at the end whatever happens."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from helpers import free_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def require_gunicorn_uvicorn():
    missing = []
    for name in ("gunicorn", "uvicorn"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} not importable: tests/test_gunicorn.py needs "
            "`pip install gunicorn uvicorn` in the test environment (scripts/test)",
            pytrace=False,
        )


WORKER_MODULE = """
import warnings

try:
    from uvicorn_worker import UvicornWorker
except ImportError:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from uvicorn.workers import UvicornWorker


class ZloopgoWorker(UvicornWorker):
    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "loop": "zloopgo:new_event_loop"}


class ZloopgoCheckedWorker(ZloopgoWorker):
    # Fails the boot (so that the arbiter gives up) when zloopgo cannot
    # run in this worker, instead of failing after it booted (which gunicorn
    # answers by forking a new worker, forever).

    def init_process(self):
        import sys

        import zloopgo
        from gunicorn.arbiter import Arbiter

        try:
            zloopgo.new_event_loop().close()
        except RuntimeError:
            self.log.exception("zloopgo cannot run in this worker")
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
        super().init_process()
"""

APP_MODULE = """
import asyncio, json, os, sys

import zloopgo

zloopgo.install()
{at_import}
ENGINE_LOADED_AT_IMPORT = "zloopgo._engine" in sys.modules
MASTER_PID = os.getpid()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({{"type": "lifespan.startup.complete"}})
            elif message["type"] == "lifespan.shutdown":
                await send({{"type": "lifespan.shutdown.complete"}})
                return
    loop = asyncio.get_running_loop()
    body = json.dumps(
        {{
            "module": type(loop).__module__,
            "class": type(loop).__name__,
            "pid": os.getpid(),
            "master_pid": MASTER_PID,
            "engine_loaded_at_import": ENGINE_LOADED_AT_IMPORT,
        }}
    ).encode()
    await send(
        {{
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }}
    )
    await send({{"type": "http.response.body", "body": body}})
"""


def start_gunicorn(tmp_path, at_import="", worker="ZloopgoWorker"):
    (tmp_path / "zlworker.py").write_text(WORKER_MODULE)
    (tmp_path / "zlapp.py").write_text(APP_MODULE.format(at_import=at_import))
    port = free_port()
    log = open(tmp_path / "gunicorn.log", "wb")  # noqa: SIM115 - closed by stop()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--preload",
            "--workers",
            "2",
            "--worker-class",
            f"zlworker.{worker}",
            "--bind",
            f"127.0.0.1:{port}",
            "--chdir",
            str(tmp_path),
            "--timeout",
            "20",
            "--graceful-timeout",
            "5",
            "--log-level",
            "info",
            "zlapp:app",
        ],
        cwd=str(tmp_path),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: killed as a whole
    )
    return proc, port, log


def stop(proc, log, timeout=15):
    """SIGTERM, then SIGKILL to the whole group; returns the exit code."""
    try:
        if proc.poll() is None:
            proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return "hung on SIGTERM"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
        log.close()


def read_log(tmp_path):
    return (tmp_path / "gunicorn.log").read_text(errors="replace")


def wait_listening(proc, port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def test_gunicorn_preload_uvicorn_workers_on_zloopgo(tmp_path):
    require_gunicorn_uvicorn()
    proc, port, log = start_gunicorn(tmp_path)
    replies = []
    try:
        assert wait_listening(proc, port), f"gunicorn did not listen\n{read_log(tmp_path)}"
        deadline = time.monotonic() + 60
        for _ in range(20):
            assert time.monotonic() < deadline
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
                assert resp.status == 200
                replies.append(json.loads(resp.read()))
    finally:
        code = stop(proc, log)
    text = read_log(tmp_path)
    assert len(replies) == 20, text
    for reply in replies:
        assert reply["module"] == "zloopgo._loop", (reply, text)
        assert reply["class"] == "Loop", reply
        assert reply["pid"] != proc.pid  # served by a worker, not by the master
        assert reply["master_pid"] == proc.pid  # the app was preloaded in the master
        assert reply["engine_loaded_at_import"] is False
    assert len({r["pid"] for r in replies}) <= 2
    assert "does not survive fork()" not in text, text
    assert code == 0, f"gunicorn exit {code}\n{text}"


RUNS_ZLOOPGO_AT_IMPORT = "zloopgo.run(asyncio.sleep(0))"


def test_gunicorn_preload_that_runs_zloopgo_fails_loudly(tmp_path):
    # The master runs a zloopgo loop while importing the app: the Go
    # runtime is started before the fork, so every worker's loop creation
    # raises zloopgo's RuntimeError. The workers must die at once with that
    # error in the log (no hang, no request served). uvicorn's worker fails
    # after gunicorn counts it as booted, so the arbiter does not give up:
    # it forks a new worker each time, until SIGTERM stops it.
    require_gunicorn_uvicorn()
    proc, port, log = start_gunicorn(tmp_path, at_import=RUNS_ZLOOPGO_AT_IMPORT)
    served = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            if read_log(tmp_path).count("Exception in worker process") >= 4:
                break
            time.sleep(0.2)
        # no worker serves: a request is refused or gets no answer
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=3) as resp:
                served.append(resp.status)
        except OSError:
            pass
    finally:
        code = stop(proc, log)
    text = read_log(tmp_path)
    assert "RuntimeError" in text, text
    assert "the Go runtime does not survive fork()" in text, text
    assert text.count("Exception in worker process") >= 4, text  # each worker failed at once
    assert served == [], text
    assert code != "hung on SIGTERM", text


def test_gunicorn_preload_that_runs_zloopgo_arbiter_gives_up(tmp_path):
    # The same with a worker that checks zloopgo before it boots: the
    # worker exits with gunicorn's boot-error code and the arbiter halts by
    # itself ("Worker failed to boot"), well within the timeout.
    require_gunicorn_uvicorn()
    proc, _port, log = start_gunicorn(
        tmp_path, at_import=RUNS_ZLOOPGO_AT_IMPORT, worker="ZloopgoCheckedWorker"
    )
    try:
        try:
            exit_code = proc.wait(30)
        except subprocess.TimeoutExpired:
            exit_code = "still running after 30 s"
    finally:
        stop(proc, log)
    text = read_log(tmp_path)
    # The arbiter halts with WORKER_BOOT_ERROR (3); when both workers fail
    # at once, the second HaltServer escapes gunicorn's own halt and the
    # exit code is 1. Either way it stopped by itself.
    assert exit_code in (1, 3), f"arbiter exit {exit_code}\n{text}"
    assert "the Go runtime does not survive fork()" in text, text
    assert "Worker failed to boot" in text, text
