"""Generated programs over read pipe transports, run on asyncio and on
zloopgo, compared observation by observation. zloopgo's read pipe
transport reads into the loop's scratch buffer and copies out what came
(zloopgo/_pipes.py); a max_size that is not a positive int, or above
SCRATCH_LIMIT, takes asyncio's own read. These programs walk both sides of
each of those limits, over the three kinds of descriptor
connect_read_pipe takes:

- a pipe and a socket pair, whose writes are there to read at once, and a
  pseudo-terminal in raw mode, whose bytes the tty layer hands on a moment
  later (each step waits for them) and whose reads fail with EIO once the
  other side is closed;
- what is written: 1 byte to more than a pipe or a read holds (what the
  non-blocking write end takes is observed too);
- max_size: 1, small, a pipe's 64 KiB, the default, SCRATCH_LIMIT and one
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
import hashlib
import logging
import os
import random
import re
import select
import socket
import sys
import time
import tty

import pytest
from helpers import FACTORIES, assert_same_observations

import zloopgo
from zloopgo import _pipes

PROGRAMS = int(os.environ.get("ZL_PIPE_PROGRAMS", "60"))
STEPS = 16
SETTLE = 6
KINDS = ["pipe", "socket", "pty"]
LIMIT = _pipes.SCRATCH_LIMIT
WRITES = {
    "pipe": [1, 7, 4096, 65535, 65536, 65537, 200_000, 262_144, 262_145],
    "socket": [1, 7, 4096, 65536, 200_000, 262_145],
    "pty": [1, 7, 100, 1000, 3000],
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


async def run_program(loop, kind, steps):
    log = []
    errors = []
    records = Records(log)
    logging.getLogger("asyncio").addHandler(records)
    try:
        return await _run_program(loop, kind, steps, log, errors)
    finally:
        logging.getLogger("asyncio").removeHandler(records)


async def _run_program(loop, kind, steps, log, errors):
    loop.set_exception_handler(
        lambda _loop, ctx: errors.append((masked(ctx["message"]), describe(ctx.get("exception"))))
    )
    reader, wfd = open_ends(kind)
    rfd = reader.fileno()
    protocol = Recorder(log)
    transport, _ = await loop.connect_read_pipe(lambda: protocol, reader)
    writer_open = True
    for index, step in enumerate(steps):
        op = step[0]
        result = None
        if op == "write":
            if not writer_open:
                result = "writer closed"
            else:
                try:
                    result = os.write(wfd, bytes([index + 1]) * step[1])
                except BlockingIOError:
                    result = "EAGAIN"
                except OSError as exc:  # the read end closed: EPIPE, EIO
                    result = describe(exc)
                wait_readable(rfd, kind)
        elif op == "max_size":
            transport.max_size = step[1]
        elif op == "pause":
            transport.pause_reading()
        elif op == "resume":
            transport.resume_reading()
        elif op == "raising":
            protocol.raising = step[1]
        elif op == "reset":
            if writer_open:
                try:
                    result = reader.send(b"z" * 100)
                except OSError as exc:
                    result = describe(exc)
                os.close(wfd)
                writer_open = False
        elif op == "close_writer":
            if writer_open:
                os.close(wfd)
                writer_open = False
                wait_readable(rfd, kind)
        elif op == "close":
            transport.close()
        for _ in range(SETTLE):
            await asyncio.sleep(0)
        log.append((step, result, transport.is_closing(), reading(transport), tuple(errors)))
        errors.clear()
    transport.close()
    if writer_open:
        os.close(wfd)
    for _ in range(SETTLE):
        await asyncio.sleep(0)
    log.append(("end", tuple(errors)))
    return log


def observe(loop_name, kind, steps, debug):
    loop = FACTORIES[loop_name]()
    loop.set_debug(debug)
    asyncio_logger = logging.getLogger("asyncio")
    level = asyncio_logger.level
    asyncio_logger.setLevel(logging.DEBUG)
    try:
        return loop.run_until_complete(run_program(loop, kind, steps))
    finally:
        loop.close()
        asyncio_logger.setLevel(level)


@pytest.mark.parametrize("kind", KINDS)
def test_generated_pipe_programs_observe_what_asyncio_observes(kind):
    rng = random.Random(("pipes", kind).__repr__())
    for n in range(PROGRAMS):
        steps = make_program(rng, kind)
        debug = n % 3 == 0  # debug mode logs the end and read errors
        assert_same_observations(f"program {n} ({kind})", steps, observe, kind, steps, debug)


def test_reads_take_the_scratch_path_and_the_rest_asyncios(monkeypatch):
    # The programs above prove nothing about the scratch path if it never
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
            scratch = dict(calls)
            transport.max_size = LIMIT + 1
            os.write(w, b"y")
            for _ in range(SETTLE):
                await asyncio.sleep(0)
            os.close(w)
            for _ in range(SETTLE):
                await asyncio.sleep(0)
            return scratch, dict(calls), log

        scratch, after, log = loop.run_until_complete(main())
    finally:
        loop.close()
    assert scratch == {"readv": 20, "asyncio": 0}
    assert after == {"readv": 20, "asyncio": 2}  # the byte, then the end
    assert log[-2:] == [("eof",), ("lost", None)]


def test_a_childs_output_comes_through_the_scratch_path_whole():
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
