"""Smoke tests of an installed zloopgo (scripts/wheel runs this file as a
script against each wheel it builds, in a virtualenv with no Go): import,
new_event_loop, a coroutine, a TCP echo, build_info() and the shipped type
files. Under pytest they check the development build the same way."""

import asyncio
import importlib.machinery
import importlib.metadata
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zloopgo

GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "AMD64": "amd64", "ARM64": "arm64"}
GOOS = {"linux": "linux", "darwin": "darwin", "win32": "windows"}
# The reactor each system's build has (core/reactor_*.go).
REACTOR = {"linux": "epoll", "darwin": "kqueue", "win32": "iocp"}
# Set by `--installed-wheel` (scripts/wheel): zloopgo must come from a wheel.
REQUIRE_WHEEL = False


def test_import_does_not_start_the_engine():
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, zloopgo; print('zloopgo._engine' in sys.modules)",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_new_event_loop_runs_a_coroutine():
    loop = zloopgo.new_event_loop()
    try:
        assert isinstance(loop, zloopgo.Loop)
        assert isinstance(loop, asyncio.AbstractEventLoop)
        order = []

        async def main():
            loop.call_later(0.02, order.append, "late")
            loop.call_soon(order.append, "soon")
            await asyncio.sleep(0.05)
            return asyncio.get_running_loop()

        assert loop.run_until_complete(main()) is loop
        assert order == ["soon", "late"]
    finally:
        loop.close()
    assert loop.is_closed()


def test_run_returns_and_raises():
    async def answer():
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()), 42

    assert zloopgo.run(answer()) == (zloopgo.Loop, 42)

    async def fail():
        raise LookupError("from the coroutine")

    try:
        zloopgo.run(fail())
    except LookupError as exc:
        assert str(exc) == "from the coroutine"
    else:
        raise AssertionError("zloopgo.run swallowed the exception")


def test_tcp_echo():
    payloads = [b"ping", bytes(range(256)) * 1024, b"last line\n"]

    async def handle(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        echoed = []
        for payload in payloads:
            writer.write(payload)
            await writer.drain()
            echoed.append(await reader.readexactly(len(payload)))
        writer.write_eof()
        assert await reader.read() == b""
        writer.close()
        await writer.wait_closed()
        server.close()
        await server.wait_closed()
        return type(asyncio.get_running_loop()), echoed

    loop_type, echoed = zloopgo.run(main())
    assert loop_type is zloopgo.Loop
    assert echoed == payloads


def test_build_info():
    info = zloopgo.build_info()
    assert info["go_version"].startswith("go1."), info
    assert info["goos"] == GOOS.get(sys.platform, sys.platform)
    assert info["goarch"] == GOARCH.get(platform.machine(), platform.machine())
    assert info["reactor"] == REACTOR.get(sys.platform, "kqueue")
    assert info["zloopgo_version"] == zloopgo.__version__ == importlib.metadata.version("zloopgo")
    assert info["python_version"] == platform.python_version()
    assert info["logical_cores"] >= 1


def test_loop_time_reads_time_monotonic():
    # asyncio's loop.time() is time.monotonic(), whose clock differs by
    # system and version (on Windows, GetTickCount64 before 3.13 and
    # QueryPerformanceCounter after): every reading falls between the
    # readings of time.monotonic() around it, which another clock (another
    # origin, another resolution) would soon break.
    loop = zloopgo.new_event_loop()
    try:
        for _ in range(2000):
            before = time.monotonic()
            now = loop.time()
            after = time.monotonic()
            assert before <= now <= after, (before, now, after, time.get_clock_info("monotonic"))
    finally:
        loop.close()


def wheel_record():
    """The files of the wheel install zloopgo was imported from, or None
    (an editable install, or the source tree)."""
    here = Path(zloopgo.__file__).resolve()
    for dist in importlib.metadata.distributions(name="zloopgo"):
        files = dist.files or []
        if dist.read_text("RECORD") and any(
            str(f) == "zloopgo/__init__.py" and Path(dist.locate_file(f)).resolve() == here
            for f in files
        ):
            return {str(f) for f in files}
    return None


def test_type_files_and_engine_are_installed():
    package = Path(zloopgo.__file__).parent
    engine = "_engine" + importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in ("py.typed", "_loop.pyi", "_engine.pyi", engine):
        assert (package / name).is_file(), name
    recorded = wheel_record()
    if REQUIRE_WHEEL:
        assert recorded is not None, f"zloopgo was not imported from a wheel: {zloopgo.__file__}"
    if recorded is not None:
        # One engine, this interpreter's, and the type files.
        engines = {
            f for f in recorded if f.startswith("zloopgo/_engine") and f.endswith((".so", ".pyd"))
        }
        assert engines == {"zloopgo/" + engine}, engines
        assert {"zloopgo/py.typed", "zloopgo/_loop.pyi", "zloopgo/_engine.pyi"} <= recorded


if __name__ == "__main__":
    REQUIRE_WHEEL = "--installed-wheel" in sys.argv[1:]
    for _name, _test in sorted(globals().items()):
        if _name.startswith("test_") and callable(_test):
            _test()
            print("ok", _name)
