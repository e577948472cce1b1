"""Generated programs over read pipe transports, run on asyncio and on
zloopgo, compared observation by observation. zloopgo's read pipe
transport reads into the loop's receive buffer and copies out what came
(zloopgo/_pipes.py); a max_size that is not a positive int, or above
RX_LIMIT, takes asyncio's own read. These programs walk both sides of
each of those limits, over the three kinds of descriptor
connect_read_pipe takes:

- a pipe and a socket pair, whose writes are there to read at once, and a
  pseudo-terminal in raw mode, whose bytes the tty layer hands on a moment
  later (each step waits for them) and whose reads fail with EIO once the
  other side is closed;
- what is written: 1 byte to more than a pipe or a read holds (what the
  non-blocking write end takes is observed too);
- max_size: 1, small, a pipe's 64 KiB, the default, RX_LIMIT and one
  byte more, 0 (asyncio reads that as the end), negative, a float, True;
- pause_reading and resume_reading, the writer closed (EOF, or EIO on a
  pseudo-terminal, or ECONNRESET on a socket whose writer closes with
  bytes unread), the transport closed, a protocol whose data_received
  raises.

After each step the program runs the loop SETTLE iterations. Observed:
every protocol call (data by length and digest), each write's result, the
exception handler's calls (message and exception; the transport's class
name, which is zloopgo's own, and the callback's source location are
masked), and the transport's closing and reading state after every step.
Both loops must see the same for each of ZL_PIPE_PROGRAMS generated
programs (seeded; 60 per kind by default). A program whose runs differ
runs again (helpers.assert_same_observations): the tty layer's hand-off
is the kernel's timing.
"""

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import random
import re
import select
import socket
import struct
import subprocess
import sys
import termios
import time
import tty

import pytest
from helpers import FACTORIES, assert_same_observations
from hostile import vocab
from hostile.canary import Canary
from hostile.handler import probe

import zloopgo
from zloopgo import _pipes

PROGRAMS = int(os.environ.get("ZL_PIPE_PROGRAMS", "60"))
STEPS = 16
SETTLE = 6
KINDS = ["pipe", "socket", "pty"]
LIMIT = _pipes.RX_LIMIT
WRITES = {
    "pipe": [1, 7, 4096, 65535, 65536, 65537, 200_000, 262_144, 262_145],
    "socket": [1, 7, 4096, 65536, 200_000, 262_145],
    "pty": [1, 7, 100, 1000, 3000],
    # a child that writes what its stdin asks (tests/hostile's pipes
    # machine): at most a pipe's atomic write, so that its bytes come at once
    "child": [1, 7, 100, 1000, 4096],
}
MAX_SIZES = [1, 5, 4096, 65536, 256 * 1024, LIMIT, LIMIT + 1, 0, -1, 2.5, True]


class Recorder(asyncio.Protocol):
    def __init__(self, log):
        self.log = log
        self.raising = False

    def connection_made(self, transport):
        self.log.append(("made",))

    def data_received(self, data):
        self.log.append(("data", len(data), hashlib.sha256(data).hexdigest()[:8]))
        if self.raising:
            raise RuntimeError("data_received fails")

    def eof_received(self):
        self.log.append(("eof",))

    def connection_lost(self, exc):
        self.log.append(("lost", describe(exc)))


def describe(exc):
    if exc is None:
        return None
    return (type(exc).__name__, getattr(exc, "errno", None), str(exc))


def masked(message):
    # the transport class is zloopgo's own; the source location is the file
    # that holds the callback
    message = re.sub(r"\b(_Unix)?ReadPipeTransport\b", "<pipe transport>", message)
    # descriptors, addresses and the loop's own class are each loop's
    message = re.sub(r"( fd=|Read pipe )\d+", r"\1<n>", message)
    message = re.sub(r" object at 0x[0-9a-f]+", " object", message)
    message = re.sub(r"<(Loop|_UnixSelectorEventLoop) ", "<loop ", message)
    return re.sub(r" at \S+:\d+", " at <source>", message)


class Records(logging.Handler):
    """asyncio's log lines (a debug-mode program logs the end it reads and
    its read errors), but not the slow-callback warnings: their timing is
    the machine's."""

    def __init__(self, log):
        super().__init__(logging.DEBUG)
        self.log = log

    def emit(self, record):
        text = record.getMessage()
        if not text.startswith("Executing"):
            self.log.append(("logged", record.levelname, masked(text)))


def open_ends(kind):
    """(object to read from, descriptor to write to, closers)."""
    if kind == "pipe":
        r, w = os.pipe()
        os.set_blocking(w, False)
        return os.fdopen(r, "rb", buffering=0), w
    if kind == "socket":
        a, b = socket.socketpair()
        w = b.detach()
        os.set_blocking(w, False)
        return a, w
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(slave, False)
    return os.fdopen(master, "rb", buffering=0), slave


def make_program(rng, kind):
    steps = []
    for _ in range(STEPS):
        r = rng.random()
        if r < 0.45:
            steps.append(("write", rng.choice(WRITES[kind])))
        elif r < 0.62:
            steps.append(("max_size", rng.choice(MAX_SIZES)))
        elif r < 0.72:
            steps.append(("pause",))
        elif r < 0.82:
            steps.append(("resume",))
        elif r < 0.88:
            steps.append(("raising", rng.random() < 0.5))
        elif r < 0.91:
            steps.append(("close_writer",))
        elif r < 0.94 and kind == "socket":
            # bytes the writer leaves unread when it closes: the reader's
            # next read fails with ECONNRESET
            steps.append(("reset",))
        else:
            steps.append(("close",))
    return steps


def reading(transport):
    try:
        return transport.is_reading()
    except NotImplementedError:  # 3.10's read pipe transport has none
        return "no is_reading"


def wait_readable(fd, kind):
    # a pseudo-terminal's bytes reach the master a moment after the write
    if kind == "pty":
        with contextlib.suppress(OSError, ValueError):
            select.select([fd], [], [], 0.2)
        time.sleep(0.002)


# the child's stdout pipe: more than the bytes of a program's writes
CHILD_PIPE_SIZE = 1 << 20
# how long a child's bytes are waited for (they come: it writes each line's)
CHILD_WAIT = 30.0


def _identity(fd):
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _queued_on(fd, identity):
    """The bytes queued on the pipe fd, or None when fd is no longer that
    pipe (the transport closed it: its number may be another file's)."""
    try:
        if _identity(fd) != identity:
            return None
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return None


def wait_queued(fd, identity, want):
    """Until want bytes are queued on the pipe fd (or it is no longer that
    pipe, or CHILD_WAIT passed: the child died)."""
    deadline = time.monotonic() + CHILD_WAIT
    while time.monotonic() < deadline:
        queued = _queued_on(fd, identity)
        if queued is None or queued >= want:
            return
        time.sleep(0.001)


class PipeProgram:
    """One program's read pipe transport and the writer feeding it. `rec`
    records an observation, `errors` collects the exception handler's
    calls of a step (recorded with the step), `host` (a tests/hostile
    machine's, in a worker) is what hostile steps need."""

    def __init__(self, loop, kind, rec, errors, host):
        self.loop, self.kind, self.rec, self.errors, self.host = loop, kind, rec, errors, host
        self.writer_open = True

    async def open(self):
        if self.kind == "child":
            await self.open_child()
        else:
            self.reader, self.wfd = open_ends(self.kind)
            self.rfd = self.reader.fileno()
            self.protocol = Recorder(self.log)
            self.transport, _ = await self.loop.connect_read_pipe(
                lambda: self.protocol, self.reader
            )

    async def open_child(self):
        """A child that writes as many bytes to its stdout as each line on
        its stdin asks: its stdout is a read pipe transport of the loop's
        subprocess transport (asyncio's pipe_data_received reaches
        Recorder's data_received through _ChildProtocol)."""
        child = (
            "import os, sys\n"
            "try:\n"
            "    for line in sys.stdin.buffer:\n"
            "        n, b = line.split()\n"
            "        os.write(1, bytes([int(b)]) * int(n))\n"
            "except BrokenPipeError:\n"  # its stdout was closed
            "    pass\n"
        )
        self.protocol = Recorder(self.log)
        self.process, _ = await self.loop.subprocess_exec(
            lambda: _ChildProtocol(self.protocol),
            sys.executable,
            "-c",
            child,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.transport = self.process.get_pipe_transport(1)
        self.stdin = self.process.get_pipe_transport(0)
        self.rfd = self.transport.get_extra_info("pipe").fileno()
        # room for every byte a program asks of the child while reading is
        # paused (write() waits for them all to be queued)
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(self.rfd, fcntl.F_SETPIPE_SZ, CHILD_PIPE_SIZE)
        self.rfd_id = _identity(self.rfd)

    @property
    def log(self):
        return _Records(self.rec)

    def write(self, index, n):
        if not self.writer_open:
            return "writer closed"
        if self.kind == "child":
            queued = _queued_on(self.rfd, self.rfd_id)
            self.stdin.write(b"%d %d\n" % (n, (index + 1) % 256))
            # The child's bytes come when it has started and read the line:
            # under load that may be later than any fixed wait, and where
            # they come among the steps is what is compared. So wait until
            # they are all queued on the pipe (the loop does not run
            # meanwhile, so nothing reads them).
            if queued is not None:
                wait_queued(self.rfd, self.rfd_id, queued + n)
            return n
        try:
            result = os.write(self.wfd, bytes([(index + 1) % 256]) * n)
        except BlockingIOError:
            result = "EAGAIN"
        except OSError as exc:  # the read end closed: EPIPE, EIO
            result = describe(exc)
        wait_readable(self.rfd, self.kind)
        return result

    def close_writer(self):
        if not self.writer_open:
            return
        if self.kind == "child":
            self.stdin.close()
        else:
            os.close(self.wfd)
        self.writer_open = False
        wait_readable(self.rfd, self.kind)

    def act_now(self, index, step):
        """One step (a trap's ["op", step] action runs them too): its result."""
        op, transport, result = step[0], self.transport, None
        if op == "write":
            result = self.write(index, step[1])
        elif op == "max_size":
            value = step[1]
            if isinstance(value, list):  # a trap (tests/hostile)
                value = vocab.make_value(self.host, value)
            transport.max_size = value
        elif op == "pause":
            transport.pause_reading()
        elif op == "resume":
            transport.resume_reading()
        elif op == "raising":
            self.protocol.raising = step[1]
        elif op == "reset":
            if self.writer_open:
                try:
                    result = self.reader.send(b"z" * 100)
                except OSError as exc:
                    result = describe(exc)
                os.close(self.wfd)
                self.writer_open = False
        elif op == "close_writer":
            self.close_writer()
        elif op == "close":
            transport.close()
        elif op == "proto":
            # data_received replaced on the protocol instance: the
            # transport calls what the instance has
            self.override(step[1])
        elif op == "soon":
            self.host.schedule_callback(step[1])
        return result

    def override(self, actions):
        protocol, host = self.protocol, self.host
        original = type(protocol).data_received

        calls = []

        def data_received(data):
            # runs its actions the first time, as a trap's methods do
            host.rec(["override", "data_received", len(data)])
            calls.append(None)
            if len(calls) == 1:
                vocab.run_actions(host, actions)
            return original(protocol, data)

        protocol.data_received = data_received

    async def end(self):
        self.transport.close()
        if self.kind == "child":
            if self.writer_open:
                self.stdin.close()
            await self.process._wait()
            self.process.close()
        elif self.writer_open:
            os.close(self.wfd)
        for _ in range(SETTLE):
            await asyncio.sleep(0)


class _Records:
    """Recorder's log: each entry recorded as it comes."""

    def __init__(self, rec):
        self.append = rec


class _ChildProtocol(asyncio.SubprocessProtocol):
    """A child's stdout, as Recorder sees a read pipe (its stdin's and
    the process's ends are not observed: when a child exits is timing)."""

    def __init__(self, recorder):
        self.recorder = recorder

    def pipe_data_received(self, fd, data):
        self.recorder.data_received(data)

    def pipe_connection_lost(self, fd, exc):
        if fd == 1:
            self.recorder.connection_lost(exc)


async def run_program(loop, kind, steps, host):
    """Runs steps on loop; `host` (_Host here, or a tests/hostile
    machine's) records the observations, the exception handler's calls
    and the canary."""
    prog = host.prog = PipeProgram(loop, kind, host.rec, host.errors, host)
    await prog.open()
    for index, step in enumerate(steps):
        host.step = index
        result = prog.act_now(index, step)
        for _ in range(SETTLE):
            await asyncio.sleep(0)
            host.fill_canary()
        transport = prog.transport
        host.rec((step, result, transport.is_closing(), reading(transport), tuple(host.errors)))
        host.errors.clear()
        host.check_canary()
    await prog.end()
    host.fill_canary()
    host.rec(("end", tuple(host.errors)))
    host.check_canary()


class _Host:
    """What a program run here (not by a tests/hostile machine) records:
    its steps, asyncio's log lines (Records), the exception handler's
    calls with what the handler sees (hostile.handler.probe) with each
    step, and the descriptor canary."""

    def __init__(self, loop):
        self.log = []
        self.errors = []
        self.canary = Canary()
        loop.set_exception_handler(
            lambda _loop, ctx: self.errors.append(
                (masked(ctx["message"]), describe(ctx.get("exception")), probe())
            )
        )

    def rec(self, entry):
        self.log.append(entry)

    def fill_canary(self):
        self.canary.fill()

    def check_canary(self):
        for kind, what in self.canary.check():
            self.log.append(("canary", kind, what))


def observe(loop_name, kind, steps, debug):
    loop = FACTORIES[loop_name]()
    loop.set_debug(debug)
    asyncio_logger = logging.getLogger("asyncio")
    level = asyncio_logger.level
    asyncio_logger.setLevel(logging.DEBUG)
    host = _Host(loop)
    records = Records(host.log)
    asyncio_logger.addHandler(records)
    try:
        loop.run_until_complete(run_program(loop, kind, steps, host))
    finally:
        asyncio_logger.removeHandler(records)
        loop.close()
        asyncio_logger.setLevel(level)
        host.fill_canary()
        host.check_canary()  # what the loop's close freed
        host.canary.close()
    return host.log


@pytest.mark.parametrize("kind", KINDS)
def test_generated_pipe_programs_observe_what_asyncio_observes(kind):
    rng = random.Random(("pipes", kind).__repr__())
    for n in range(PROGRAMS):
        steps = make_program(rng, kind)
        debug = n % 3 == 0  # debug mode logs the end and read errors
        assert_same_observations(f"program {n} ({kind})", steps, observe, kind, steps, debug)


def test_reads_take_the_receive_buffer_and_the_rest_asyncios(monkeypatch):
    # The programs above prove nothing about the receive buffer's path if it never
    # ran: count the reads that reach os.readv and asyncio's method.
    calls = {"readv": 0, "asyncio": 0}
    readv, asyncios = os.readv, _pipes.unix_events._UnixReadPipeTransport._read_ready

    def counting_readv(fd, buffers):
        calls["readv"] += 1
        return readv(fd, buffers)

    def counting_asyncios(self):
        calls["asyncio"] += 1
        return asyncios(self)

    monkeypatch.setattr(_pipes.os, "readv", counting_readv)
    monkeypatch.setattr(_pipes.unix_events._UnixReadPipeTransport, "_read_ready", counting_asyncios)
    loop = zloopgo.new_event_loop()
    try:

        async def main():
            r, w = os.pipe()
            log = []
            transport, _ = await loop.connect_read_pipe(
                lambda: Recorder(log), os.fdopen(r, "rb", buffering=0)
            )
            assert type(transport) is _pipes.ReadPipeTransport
            for _ in range(20):
                os.write(w, b"x" * 1000)
                for _ in range(SETTLE):
                    await asyncio.sleep(0)
            via_rx = dict(calls)
            transport.max_size = LIMIT + 1
            os.write(w, b"y")
            for _ in range(SETTLE):
                await asyncio.sleep(0)
            os.close(w)
            for _ in range(SETTLE):
                await asyncio.sleep(0)
            return via_rx, dict(calls), log

        via_rx, after, log = loop.run_until_complete(main())
    finally:
        loop.close()
    assert via_rx == {"readv": 20, "asyncio": 0}
    assert after == {"readv": 20, "asyncio": 2}  # the byte, then the end
    assert log[-2:] == [("eof",), ("lost", None)]


def test_a_childs_output_comes_through_the_receive_buffer_whole():
    # a subprocess's stdout is a read pipe transport too
    async def main(loop):
        child = "import os, sys\nfor i in range(64): os.write(1, bytes([i]) * 65536)\n"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", child, stdout=asyncio.subprocess.PIPE
        )
        kind = type(proc._transport.get_pipe_transport(1))
        out = await proc.stdout.read()
        await proc.wait()
        return kind, hashlib.sha256(out).hexdigest(), len(out), proc.returncode

    results = {}
    for name in ("asyncio", "zloopgo"):
        loop = FACTORIES[name]()
        try:
            results[name] = loop.run_until_complete(main(loop))
        finally:
            loop.close()
    assert results["zloopgo"][0] is _pipes.ReadPipeTransport
    assert results["zloopgo"][1:] == results["asyncio"][1:]
    assert results["zloopgo"][2] == 64 * 65536
