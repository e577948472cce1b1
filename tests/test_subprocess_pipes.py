"""Dual-run tests of subprocesses and pipe transports on every platform:
asyncio.create_subprocess_exec/_shell with piped stdin, stdout and stderr
(communicate, wait, returncode, terminate, kill, send_signal),
connect_read_pipe/connect_write_pipe over a pipe (data, EOF, flow
control, a close while a read is outstanding), bad arguments, named pipes
(Windows), and Ctrl+C (SIGINT) ending a wait in run_until_complete and
asyncio.run.

The reference loop is asyncio's that has these (helpers.PIPE_FACTORIES):
its selector loop on Unix, its ProactorEventLoop on Windows, where zloopgo
runs the proactor's pipe and subprocess code (zloopgo/_winpipes.py). The
children are this interpreter. Where Windows differs (no signals but
SIGTERM and the CTRL_* events, cmd.exe as the shell, TerminateProcess's
exit status 1), the expectation says so.
"""

import ast
import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from helpers import PIPE_FACTORIES, PIPE_SCRIPT_FACTORIES, check, run_once, run_script

WINDOWS = sys.platform == "win32"
PIPE = asyncio.subprocess.PIPE


@pytest.fixture
def loop_factory(loop_name):
    return PIPE_FACTORIES[loop_name]


def pipe_pair():
    """A pipe's read end and write end, as connect_read_pipe and
    connect_write_pipe take them on this platform: on Windows overlapped
    handles, duplex as asyncio makes a child's (the proactor's write
    transport reads its handle to learn of the other end's close)."""
    if WINDOWS:
        from asyncio import windows_utils

        r, w = windows_utils.pipe(overlapped=(True, True), duplex=True)
        return windows_utils.PipeHandle(r), windows_utils.PipeHandle(w)
    r, w = os.pipe()
    return open(r, "rb", buffering=0), open(w, "wb", buffering=0)


class Events(asyncio.Protocol):
    """Every protocol call, in order (data by its bytes)."""

    def __init__(self):
        self.calls = []
        self.lost = None

    def connection_made(self, transport):
        self.calls.append("made")

    def data_received(self, data):
        self.calls.append(bytes(data))

    def eof_received(self):
        self.calls.append("eof")

    def pause_writing(self):
        self.calls.append("pause_writing")

    def resume_writing(self):
        self.calls.append("resume_writing")

    def connection_lost(self, exc):
        self.calls.append(("lost", exc))


def received(calls):
    return b"".join(c for c in calls if isinstance(c, bytes))


def child(code, *args, **kwargs):
    return asyncio.create_subprocess_exec(sys.executable, "-c", code, *args, **kwargs)


def test_communicate_gives_the_childs_output_errors_and_status(loop):
    # more than a pipe holds each way: the write side's flow control too
    payload = b"abc" * 200_000
    code = (
        "import sys\n"
        "data = sys.stdin.buffer.read()\n"
        "sys.stdout.buffer.write(data.upper())\n"
        "sys.stderr.buffer.write(b'to stderr')\n"
        "sys.exit(3)\n"
    )

    async def main():
        proc = await child(code, stdin=PIPE, stdout=PIPE, stderr=PIPE)
        out, err = await proc.communicate(payload)
        return out, err, proc.returncode

    out, err, status = loop.run_until_complete(main())
    assert (out == payload.upper(), err, status) == (True, b"to stderr", 3)


def test_the_output_stays_readable_after_the_child_exits(loop):
    async def main():
        proc = await child("import sys; sys.stdout.write('x' * 100000)", stdout=PIPE)
        status = await proc.wait()
        return status, await proc.stdout.read()

    assert loop.run_until_complete(main()) == (0, b"x" * 100000)


@pytest.mark.parametrize("method", ["terminate", "kill"])
def test_terminate_and_kill_end_the_child(loop, method):
    async def main():
        proc = await child("import sys; sys.stdin.read()", stdin=PIPE, stdout=PIPE)
        assert proc.returncode is None
        getattr(proc, method)()
        return await proc.wait(), await proc.stdout.read()

    status, out = loop.run_until_complete(main())
    # Windows: TerminateProcess(handle, 1) for both
    expected = 1 if WINDOWS else -{"terminate": signal.SIGTERM, "kill": signal.SIGKILL}[method]
    assert (status, out) == (expected, b"")


@pytest.mark.skipif(not WINDOWS, reason="Windows' send_signal: SIGTERM and CTRL_* events only")
def test_send_signal_takes_only_what_windows_has(loop):
    async def main():
        proc = await child("import sys; sys.stdin.read()", stdin=PIPE)
        with pytest.raises(ValueError, match=r"^Unsupported signal: 2$"):
            proc.send_signal(signal.SIGINT)
        assert proc.returncode is None
        proc.send_signal(signal.SIGTERM)
        return await proc.wait()

    assert loop.run_until_complete(main()) == 1


def test_a_shell_command_runs_in_the_platforms_shell(loop):
    # cmd.exe on Windows, /bin/sh elsewhere: both take this line
    async def main():
        proc = await asyncio.create_subprocess_shell("echo hello&& exit 5", stdout=PIPE)
        out, _ = await proc.communicate()
        return out, proc.returncode

    newline = b"\r\n" if WINDOWS else b"\n"
    assert loop.run_until_complete(main()) == (b"hello" + newline, 5)


@pytest.mark.skipif(not WINDOWS, reason="cmd.exe's own syntax")
def test_a_shell_command_is_cmd_exe_on_windows(loop):
    async def main():
        proc = await asyncio.create_subprocess_shell("echo %COMSPEC%", stdout=PIPE)
        out, _ = await proc.communicate()
        return out

    assert loop.run_until_complete(main()).strip().lower().endswith(b"cmd.exe")


def test_pipe_transports_carry_data_then_eof(loop):
    rpipe, wpipe = pipe_pair()

    async def main():
        reader_t, reader = await loop.connect_read_pipe(Events, rpipe)
        writer_t, writer = await loop.connect_write_pipe(Events, wpipe)
        for i in range(50):
            writer_t.write(bytes([65 + i % 26]) * 1000)
        writer_t.close()
        while not reader.calls or reader.calls[-1] != ("lost", None):
            await asyncio.sleep(0.01)
        return reader.calls, writer.calls, reader_t.is_closing(), writer_t.is_closing()

    rcalls, wcalls, rclosing, wclosing = loop.run_until_complete(main())
    assert received(rcalls) == b"".join(bytes([65 + i % 26]) * 1000 for i in range(50))
    assert rcalls[0] == "made" and rcalls[-2:] == ["eof", ("lost", None)]
    assert wcalls == ["made", ("lost", None)]
    assert (rclosing, wclosing) == (True, True)


def test_closing_a_read_pipe_while_its_read_is_outstanding(loop):
    rpipe, wpipe = pipe_pair()

    async def main():
        transport, protocol = await loop.connect_read_pipe(Events, rpipe)
        await asyncio.sleep(0.05)  # the read is outstanding: nothing written
        transport.close()
        assert transport.is_closing()
        await asyncio.sleep(0.05)
        return protocol.calls

    try:
        assert loop.run_until_complete(main()) == ["made", ("lost", None)]
    finally:
        wpipe.close()
    # the fixture closes the loop: its cancelled read must not hold it


def reading_of(transport):
    """is_reading(), or the error it raises: 3.10's pipe transports have
    none of their own (ReadTransport's raises NotImplementedError)."""
    try:
        return transport.is_reading()
    except NotImplementedError:
        return "NotImplementedError"


def observe_flow_control(factory):
    """What the protocols and transports of a pipe see, reading paused and
    resumed, writing past the high-water mark: one list, for comparing the
    two loops."""
    loop = factory()
    errors = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context["message"]))
    rpipe, wpipe = pipe_pair()
    seen = []
    try:

        async def main():
            reader_t, reader = await loop.connect_read_pipe(Events, rpipe)
            writer_t, writer = await loop.connect_write_pipe(Events, wpipe)
            writer_t.set_write_buffer_limits(high=4096, low=1024)
            seen.append(("limits", writer_t.get_write_buffer_limits()))
            reader_t.pause_reading()
            seen.append(("reading", reading_of(reader_t)))
            writer_t.write(b"a" * 300_000)
            await asyncio.sleep(0.1)
            seen.append(("paused", received(reader.calls) == b""))
            seen.append(("buffered", writer_t.get_write_buffer_size() > 0))
            seen.append(("writer", list(writer.calls)))
            reader_t.resume_reading()
            seen.append(("reading", reading_of(reader_t)))
            while len(received(reader.calls)) < 300_000:
                await asyncio.sleep(0.01)
            while writer_t.get_write_buffer_size():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            seen.append(("buffer", writer_t.get_write_buffer_size()))
            seen.append(("writer", list(writer.calls)))
            writer_t.close()
            await asyncio.sleep(0.05)
            reader_t.close()
            await asyncio.sleep(0.05)
            seen.append(("reader ends", reader.calls[-1:]))

        loop.run_until_complete(main())
    finally:
        loop.close()
        rpipe.close()
        wpipe.close()
    return seen, errors


def test_pipe_flow_control_is_the_reference_loops():
    want = observe_flow_control(PIPE_FACTORIES["asyncio"])
    got = observe_flow_control(PIPE_FACTORIES["zloopgo"])
    assert got == want
    # and it paused and resumed writing at all
    assert ("writer", ["made", "pause_writing", "resume_writing"]) in want[0]


def test_subprocess_exit_is_seen_with_nothing_else_to_do(loop):
    # the process's exit alone ends the wait (no pipe traffic)
    async def main():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import time; time.sleep(0.3)"
        )
        return await asyncio.wait_for(proc.wait(), 30)

    assert loop.run_until_complete(main()) == 0


BAD_CALLS = {
    "exec shell=True": lambda lp: lp.subprocess_exec(
        asyncio.SubprocessProtocol, sys.executable, shell=True
    ),
    "exec bufsize=1": lambda lp: lp.subprocess_exec(
        asyncio.SubprocessProtocol, sys.executable, bufsize=1
    ),
    "exec text=True": lambda lp: lp.subprocess_exec(
        asyncio.SubprocessProtocol, sys.executable, text=True
    ),
    "shell list": lambda lp: lp.subprocess_shell(asyncio.SubprocessProtocol, ["echo"]),
    "missing program": lambda lp: lp.subprocess_exec(
        asyncio.SubprocessProtocol, "zloopgo-no-such-program-here"
    ),
}


def observe_bad_calls(factory):
    """Each bad call's exception: its type and arguments."""
    loop = factory()
    seen = {}
    try:
        for name, call in BAD_CALLS.items():
            try:
                loop.run_until_complete(call(loop))
            except Exception as exc:  # noqa: BLE001 - the exception is what is observed
                seen[name] = (type(exc).__name__, exc.args)
            else:  # pragma: no cover - a failure shows it
                seen[name] = "no exception"
    finally:
        loop.close()
    return seen


def test_bad_subprocess_calls_raise_as_the_reference_loop():
    want = observe_bad_calls(PIPE_FACTORIES["asyncio"])
    assert observe_bad_calls(PIPE_FACTORIES["zloopgo"]) == want
    assert want["exec shell=True"] == ("ValueError", ("shell must be False",))
    assert want["missing program"][0] == "FileNotFoundError"


@pytest.mark.parametrize("loop_name", sorted(PIPE_SCRIPT_FACTORIES))
@pytest.mark.parametrize(
    "run",
    [
        "loop = factory(); loop.run_until_complete(asyncio.sleep(60)); loop.close()",
        # asyncio.run's own SIGINT handler cancels the main task
        "asyncio.run(asyncio.sleep(60), loop_factory=factory)",
    ],
    ids=["run_until_complete", "asyncio.run"],
)
def test_sigint_interrupts_run_until_complete_while_it_waits(loop_name, run):
    # From another thread, a while into a long wait: raise_signal on
    # Windows (what Ctrl+C's handler does there), a process signal elsewhere.
    if "loop_factory" in run and sys.version_info < (3, 12):
        pytest.skip("asyncio.run takes loop_factory from 3.12")
    proc = run_script(
        loop_name,
        f"""
        def interrupt():
            if sys.platform == "win32":
                signal.raise_signal(signal.SIGINT)
            else:
                os.kill(os.getpid(), signal.SIGINT)
        threading.Timer(0.5, interrupt).start()
        start = time.monotonic()
        try:
            {run}
        except KeyboardInterrupt:
            print("interrupted", time.monotonic() - start < 30)
        """,
        timeout=90,
        factories=PIPE_SCRIPT_FACTORIES,
    )
    check(proc, "interrupted True")


# A console's Ctrl+C, for real: the parent of the program gives itself a
# console of its own (FreeConsole, AllocConsole: under Wine the python.exe
# a test runs has none, and GenerateConsoleCtrlEvent then fails with
# ERROR_INVALID_ACCESS), starts the program in a new process group
# (CREATE_NEW_PROCESS_GROUP, which turns Ctrl+C off in it until the
# program turns it back on with SetConsoleCtrlHandler(NULL, FALSE), as
# Windows documents) and, once the loop waits, sends CTRL_C_EVENT to that
# group (os.kill, GenerateConsoleCtrlEvent).
CTRL_C_PARENT = """
import ctypes, os, signal, subprocess, sys
kernel32 = ctypes.windll.kernel32
kernel32.FreeConsole()
if not kernel32.AllocConsole():
    sys.exit(f"AllocConsole failed: {ctypes.GetLastError()}")
child = subprocess.Popen(
    [sys.executable, "-c", sys.argv[1]],
    stdout=subprocess.PIPE,
    text=True,
    creationflags=subprocess.CREATE_NEW_PROCESS_GROUP,
)
print(child.stdout.readline().strip(), flush=True)
os.kill(child.pid, signal.CTRL_C_EVENT)
out, _ = child.communicate(timeout=60)
print(out.strip())
print("exit", child.returncode)
"""


@pytest.mark.skipif(not WINDOWS, reason="a console's Ctrl+C (GenerateConsoleCtrlEvent): Windows")
@pytest.mark.parametrize("loop_name", sorted(PIPE_SCRIPT_FACTORIES))
@pytest.mark.parametrize(
    "run",
    [
        "loop = factory(); loop.call_soon(ready); loop.run_until_complete(asyncio.sleep(60))",
        "asyncio.run(main(), loop_factory=factory)",
    ],
    ids=["run_until_complete", "asyncio.run"],
)
def test_a_consoles_ctrl_c_interrupts_the_wait(loop_name, run):
    if "loop_factory" in run and sys.version_info < (3, 12):
        pytest.skip("asyncio.run takes loop_factory from 3.12")
    program = textwrap.dedent(
        f"""
        import asyncio, ctypes, sys, time
        import zloopgo
        factory = {PIPE_SCRIPT_FACTORIES[loop_name]}
        # CREATE_NEW_PROCESS_GROUP turned Ctrl+C off here: on again
        ctypes.windll.kernel32.SetConsoleCtrlHandler(None, False)

        def ready():
            print("waiting", flush=True)

        async def main():
            ready()
            await asyncio.sleep(60)

        start = time.monotonic()
        try:
            {run}
        except KeyboardInterrupt:
            print("interrupted", time.monotonic() - start < 30)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_PARENT, program],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    check(proc, "waiting", "interrupted True", "exit 0")


@pytest.mark.parametrize("loop_name", sorted(PIPE_SCRIPT_FACTORIES))
@pytest.mark.parametrize("left", ["child done", "read outstanding"])
def test_a_loop_never_closed_lets_the_interpreter_exit(loop_name, left):
    # A loop that ran a piped child (on Windows the one that starts the
    # proactor's wait thread, zloopgo/_winpipes.py) and is never closed:
    # the interpreter still exits, with or without a pipe read outstanding
    # on its port, and exits as the reference loop does (status 0; a
    # hang is a TimeoutExpired).
    body = """
        loop = factory()

        async def main():
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", "print('hi')", stdout=asyncio.subprocess.PIPE
            )
            out, _ = await proc.communicate()
            print("child said", out.decode().strip())
    """
    if left == "read outstanding":
        body += """
            # a child that waits for its stdin's EOF (this process's exit)
            # keeps its stdout open, so the read stays outstanding
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", "import sys; sys.stdin.read()",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            reading = asyncio.ensure_future(proc.stdout.read(1))
            await asyncio.sleep(0.2)
            print("reading", not reading.done())
        """
    body += """
        loop.run_until_complete(main())
        print("leaving without close()", flush=True)
    """
    proc = run_script(loop_name, body, timeout=60, factories=PIPE_SCRIPT_FACTORIES)
    expected = ["child said hi", "leaving without close()"]
    if left == "read outstanding":
        expected.append("reading True")
    check(proc, *expected)


@pytest.mark.skipif(not WINDOWS, reason="Windows' named pipes")
def test_a_named_pipe_server_and_client_talk(loop):
    address = rf"\\.\pipe\zloopgo-test-{os.getpid()}-{id(loop):x}"

    class Echo(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            self.transport.write(data.upper())

    async def main():
        [server] = await loop.start_serving_pipe(Echo, address)
        transport, client = await loop.create_pipe_connection(Events, address)
        transport.write(b"hello")
        while received(client.calls) != b"HELLO":
            await asyncio.sleep(0.01)
        transport.close()
        server.close()
        await asyncio.sleep(0.05)
        return client.calls

    assert loop.run_until_complete(main()) == ["made", b"HELLO", ("lost", None)]


def test_run_once_with_a_read_outstanding_returns(loop):
    # a read in flight is not a reason to block a zero-timeout iteration
    rpipe, wpipe = pipe_pair()
    transport, protocol = loop.run_until_complete(loop.connect_read_pipe(Events, rpipe))
    run_once(loop)
    assert protocol.calls == ["made"]
    transport.close()
    wpipe.close()
    run_once(loop)
    assert protocol.calls[-1] == ("lost", None)


# zloopgo/_winpipes.py's ThreadWaitedProactor._finish repeats the steps of
# IocpProactor._poll for one packet: this is the _poll those steps were
# copied from (the same in 3.11, 3.13, 3.14.6 and 3.15). Another _poll
# needs a review of _finish, then its digest here.
REVIEWED_IOCP_POLL = {"2c6a78a84a06"}


def test_the_proactor_steps_zloopgo_repeats_are_the_ones_it_copied():
    # read from the source file: windows_events imports only on Windows
    path = os.path.join(os.path.dirname(asyncio.__file__), "windows_events.py")
    with open(path, encoding="utf-8") as f:
        source = f.read()
    [proactor] = [
        c
        for c in ast.parse(source).body
        if isinstance(c, ast.ClassDef) and c.name == "IocpProactor"
    ]
    [poll] = [fn for fn in proactor.body if getattr(fn, "name", None) == "_poll"]
    digest = hashlib.sha256(ast.get_source_segment(source, poll).encode()).hexdigest()[:12]
    assert digest in REVIEWED_IOCP_POLL, f"IocpProactor._poll changed ({digest}): review _finish"
