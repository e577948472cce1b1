"""Generated programs over loop.sock_recv, sock_recv_into, sock_sendall and
sock_recvfrom, run on asyncio and on zloopgo, compared observation by
observation. zloopgo takes the first three's steps natively
(capi/sockops.c) for zloopgo.Loop itself, a plain socket.socket and debug
mode off, and makes the system calls itself when that socket is
non-blocking; every other case, and sock_recvfrom, takes asyncio's steps
in Python (zloopgo/_sockmethods.py). A receive lands in a buffer the loop
keeps (natively: any n up to RX_LIMIT from a non-blocking plain
socket; in Python, and natively in other modes: n from RX_FROM to
RX_LIMIT) and what came is copied out. The programs walk both sides
of each of those limits:

- the loop: zloopgo.Loop, or a class derived from it (asyncio: the
  selector loop, or a class derived from it); debug mode in a third of
  the programs (a blocking socket is refused there);
- the socket: a Unix stream pair, a TCP loopback pair (its peer can reset
  the connection), a UDP pair (receives cut datagrams, a send too large
  fails), a socket.socket subclass whose recv and send are its own; in
  non-blocking mode or with a timeout (the socket module's own methods,
  which wait up to the timeout);
- n: 1, 1000, 64 KiB, the receive buffer's limits and one byte either
  side, 0, negative, beyond a C long, a float, True, a str;
- on the UDP pair, sock_recvfrom beside sock_recv (3.11+);
- what sock_recv_into receives into: a bytearray, an empty one, a slice of
  one, a memoryview of ints, a bytes (TypeError: read-only);
- what sock_sendall sends: bytes of 0, 1 and 1000 bytes, of more than the
  kernel holds (the writer waits for the peer to read), a bytearray, a
  memoryview of ints (its len() counts items, not bytes), a str and an
  int (TypeError);
- receives and sends that wait, two waiting on one socket, a waiting one
  cancelled (also in the iteration that finds its socket ready, so that
  its callback runs with the future done), the peer reading, closed or
  reset while one waits, the
  socket given to a transport (RuntimeError from then on).

After each step the program runs the loop SETTLE iterations. Observed:
what each step returned, every task's outcome (data by length and digest,
the exception's type, errno and text) or that it still waits, the order
the tasks finished in, whether the socket is watched for reading or
writing, what the peer received, the subclass's own calls and the
exception handler's calls. Both loops must see the same for each of
ZL_SOCK_OPS_PROGRAMS generated programs per socket kind (seeded; 60 by
default).

Every close is watched by the descriptor canary (hostile.canary.Watched),
filled after each close_ours, every settling iteration and the loop's
close; the test prints what its fills met on each loop and fails unless
it landed on some. On Windows it is its form over handle values
(tests/hostile/canary_windows.py).

On Windows (run under Wine: scripts/windows long-tests) the reference is
asyncio's SelectorEventLoop, the one with these methods over readiness,
and three cases are named, not compared (docs/compatibility.md, "Windows"):
- a socket closed while its sock_sendall's writer is still registered
  (the transport step took the socket, so the cancelled send's
  remove_writer raised): asyncio's next select() raises WSAENOTSOCK
  (WSAEOPNOTSUPP once a canary's file or pipe took the handle value) and
  its loop is done; epoll drops a closed descriptor, and so do zloopgo's
  AFD polls. The observations must agree up to asyncio's failure
  (_known);
- a socket closed while a receive or send waits on it, whose handle
  value a canary's socket takes: asyncio's select() watches the value,
  so when the canary's socket is ready the stale callback runs on the
  closed socket and its task fails with WSAENOTSOCK, where zloopgo's
  waits (its AFD poll is the socket's own). _known names it by the
  hostile sockops machine's predicate (machines.KNOWN_ON_WINDOWS, which
  test_hostile.py checks; scripts/wine/probe_stale_reader.py shows it
  without a harness);
- the UDP pair after its peer's close: on Linux each send then earns an
  ICMP port unreachable, which makes our socket readable and the next
  receive (or send) fail with ECONNREFUSED. Wine never delivers it to a
  receive: select() never calls the socket readable, recv() answers
  WSAEWOULDBLOCK, select()'s exceptfds report the error from the second
  datagram on, and a send can meet it as WSAECONNREFUSED, as the Wine
  server's poll and the send race for the kernel's pending error
  (docs/compatibility.md, "Windows"). So asyncio's reference cannot show
  there which waiting operation meets the error. On Windows a UDP
  close_peer therefore leaves a socket bound to the peer's address that
  never reads (ICMP_SINK): what our socket sends after it is dropped
  there, no ICMP error is made, and the steps after close_peer are
  compared all the same, without the error.

And on Windows every kind but udp is a loopback TCP pair (socketpair() is
one there), where how far a transfer larger than the sockets hold at
once has got when a step looks depends on the machine's timing: under
Wine the same program's receive got 128,000, 128,512 or 129,024 bytes on
either loop as the steps took longer or shorter
(scripts/wine/probe_sock_ops_progress.py). So there, as the transport
differential does on loopback TCP (its runner's SAFE_TCP), a direction
that may have filled its sockets (more than SAFE_TCP bytes put in beyond
what its reader has read) has what depends on that progress recorded as
"?" until its reader has read it all (Direction, PROGRESS_MASKED).
"""

import array
import asyncio
import hashlib
import os
import random
import socket
import struct
import sys
import time

import pytest
from helpers import (
    FACTORIES,
    assert_same_observations,
    canary_tallies,
    report_canary_tallies,
    tally_canary,
)
from hostile import machines, vocab
from hostile.canary import Watched
from hostile.handler import probe
from transport_diff import compare
from transport_diff.runner import SAFE_TCP

import zloopgo
from zloopgo import _engine, _sockmethods

PROGRAMS = int(os.environ.get("ZL_SOCK_OPS_PROGRAMS", "60"))
STEPS = 16
SETTLE = 6
KERNEL_SETTLE = 0.002  # seconds
FROM, LIMIT = _engine.SOCK_RX_FROM, _engine.SOCK_RX_LIMIT
SIZES = [1, 1000, 65536, FROM - 1, FROM, LIMIT, LIMIT + 1, 0, -1, 2**70, 2.5, True, "x"]
PAYLOADS = {
    "empty": b"",
    "one": b"a",
    "small": bytes(range(250)) * 4,
    "large": b"L" * 3_000_000,  # more than a socket pair's buffers hold
    "bytearray": bytearray(b"B" * 3000),
    "ints": memoryview(array.array("i", range(700))),  # 700 items, 2800 bytes
    "str": "text",
    "int": 42,
}
INTO = {
    "bytearray": lambda: bytearray(1000),
    "empty": lambda: bytearray(),
    "slice": lambda: memoryview(bytearray(4096))[100:1100],
    "ints": lambda: memoryview(array.array("i", bytes(2000))),
    "bytes": lambda: bytes(100),
}
UDP_PAYLOADS = ["empty", "one", "small", "bytearray", "ints", "too_large", "str"]
KINDS = ["unix", "tcp", "udp", "subclass"]
RECVFROM = sys.version_info >= (3, 11)
# On Windows a UDP peer's close leaves a socket on its address that never
# reads, so that no ICMP error is made (the module's docstring)
ICMP_SINK = sys.platform == "win32"
# On Windows a TCP pair's progress beyond SAFE_TCP is not compared (the
# module's docstring; Direction): under Wine with the canary's fills
# making each step longer or shorter, unix, tcp and subclass programs 31,
# 16 and 34 differed in how many bytes a large transfer had moved when a
# step read or sent, on asyncio's loop as on zloopgo's.
PROGRESS_MASKED = sys.platform == "win32"


class OwnMethods(socket.socket):
    """A socket whose recv and send are its own: it records each call."""

    calls = None

    def recv(self, n, *flags):
        self.calls.append(("own recv", n if type(n) is int else repr(n)))
        return super().recv(n, *flags)

    def send(self, data, *flags):
        self.calls.append(("own send", type(data).__name__))
        return super().send(data, *flags)


class Overrides:
    """What a derived loop class overrides of the methods asyncio's steps
    call: each call is recorded in `calls`, then the loop's own runs."""

    calls = None

    def create_future(self):
        self.calls.append("create_future")
        return super().create_future()

    def _sock_recv(self, fut, sock, n):
        self.calls.append("_sock_recv")
        return super()._sock_recv(fut, sock, n)

    def _sock_recv_into(self, fut, sock, buf):
        self.calls.append("_sock_recv_into")
        return super()._sock_recv_into(fut, sock, buf)

    def _sock_sendall(self, fut, sock, view, pos):
        self.calls.append("_sock_sendall")
        return super()._sock_sendall(fut, sock, view, pos)

    def remove_reader(self, fd):
        self.calls.append("remove_reader")
        return super().remove_reader(fd)

    def remove_writer(self, fd):
        self.calls.append("remove_writer")
        return super().remove_writer(fd)


class DerivedZloopgo(Overrides, zloopgo.Loop):
    """A loop class derived from zloopgo's: asyncio's steps run in Python."""


class DerivedAsyncio(Overrides, asyncio.SelectorEventLoop):
    pass


DERIVED = {"asyncio": DerivedAsyncio, "zloopgo": DerivedZloopgo}


def describe(exc):
    text = str(exc)
    if isinstance(exc, RuntimeError) and "is used by transport" in text:
        # each loop names its own transport class, and has its own descriptors
        text = "File descriptor ... is used by transport"
    return (type(exc).__name__, getattr(exc, "errno", None), text)


def handler_call(context):
    """An exception handler's call: the callback's method (each loop names
    its class and descriptors) and the exception."""
    callback = context["message"].split("(")[0].rsplit(".", 1)[-1]
    exc = context.get("exception")
    return ("handler", callback, None if exc is None else describe(exc))


def digest(data):
    return (len(data), hashlib.sha256(data).hexdigest()[:8])


def pair(kind):
    """(our socket, the peer): ours non-blocking, the peer too."""
    if kind in ("unix", "subclass"):
        a, b = socket.socketpair()
        if kind == "subclass":
            a = OwnMethods(a.family, a.type, fileno=a.detach())
    elif kind == "tcp":
        with socket.create_server(("127.0.0.1", 0)) as listener:
            b = socket.create_connection(listener.getsockname())
            a, _ = listener.accept()
        # no Nagle: a small send queued behind a full window would
        # otherwise wait for the delayed ACK of the bytes before it
        # (40 ms), and what a receive finds would depend on timing
        for end in (a, b):
            end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    else:
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        a.connect(b.getsockname())
        b.connect(a.getsockname())
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def make_program(rng, kind, debug):
    steps = []
    payloads = UDP_PAYLOADS if kind == "udp" else list(PAYLOADS)
    for _ in range(STEPS):
        r = rng.random()
        if r < 0.16:
            op = "recvfrom" if RECVFROM and kind == "udp" and rng.random() < 0.5 else "recv"
            steps.append((op, rng.choice(SIZES)))
        elif r < 0.22:
            steps.append(("recv_into", rng.choice(list(INTO))))
        elif r < 0.44:
            steps.append(("sendall", rng.choice(payloads)))
        elif r < 0.56:
            steps.append(("peer_send", rng.choice([1, 1000, 65536, 200_000])))
        elif r < 0.68:
            steps.append(("peer_recv", rng.choice([1, 1000, 1 << 20])))
        elif r < 0.72:
            steps.append(("cancel", rng.randrange(3)))
        elif r < 0.76:
            steps.append(("then_cancel", rng.choice(["peer_send", "peer_recv"])))
        elif r < 0.81:
            steps.append(("timeout", rng.choice([0.0, 0.005])))
        elif r < 0.85 and debug:
            steps.append(("blocking", rng.choice(["recv", "sendall"])))
        elif r < 0.89 and kind != "udp":
            steps.append(("transport",))
        elif r < 0.94:
            steps.append(("close_peer",))
        elif kind == "tcp":
            steps.append(("reset_peer",))
    return steps


def outcome(task, roles, buffers, masked=()):
    if task in masked:
        return "?"  # how much it moved, or whether a send is done, is progress
    if not task.done():
        return "waiting"
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    if exc is not None:
        return describe(exc)
    result = task.result()
    if task in buffers:  # recv_into's count, and what its buffer holds
        return (result, digest(bytes(memoryview(buffers[task]).cast("B"))))
    if isinstance(result, tuple):
        data, address = result
        return (*digest(data), roles.get(address, "?"))
    return None if result is None else digest(result)


def watched(loop, sock):
    """Whether the loop watches sock for reading and for writing."""
    try:
        key = loop._selector.get_key(sock.fileno())
    except (KeyError, ValueError):
        return (False, False)
    return (key.data[0] is not None, key.data[1] is not None)


class Quiet(asyncio.Protocol):
    pass


def payload(name):
    if name == "too_large":
        return b"T" * 70_000  # beyond a UDP datagram's 65,507 bytes
    return PAYLOADS[name]


class Direction:
    """One direction of a program's TCP pair where PROGRESS_MASKED: the
    bytes put into it that its reader has not read yet (None: not known,
    after a send cut short while it was full), and whether it may have
    filled its sockets: from when more than SAFE_TCP of them are pending
    until its reader has read them all. While it is full, what depends on
    how far loopback TCP has carried the bytes is recorded as "?". A
    direction not tracked (UDP, Linux, our end's after a transport took
    the socket and reads it) is never full."""

    def __init__(self, tracked):
        self.tracked, self.pending, self.full = tracked, 0, False

    def put(self, n):
        """n more bytes in (None: an unknown number)."""
        if not self.tracked:
            return
        if n is None or self.pending is None:
            self.pending = None
        else:
            self.pending += n
        if self.pending is None or self.pending > SAFE_TCP:
            self.full = True

    def took(self, n):
        """Its reader read n bytes."""
        if not self.tracked or self.pending is None:
            return
        self.pending = max(0, self.pending - n)
        if self.pending == 0:
            self.full = False

    def stop(self):
        self.tracked, self.pending, self.full = False, 0, False


class SockProgram:
    """One program's sockets, tasks and steps. `rec` records an
    observation; `host` (a tests/hostile machine's, in a worker) is what
    hostile steps need: their traps and buffers, and the canary."""

    def __init__(self, loop, kind, rec, host=None):
        self.loop, self.kind, self.rec, self.host = loop, kind, rec, host
        self.ours, self.peer = pair(kind)
        if kind == "subclass":
            # the transport's reads (it holds the socket), by progress
            self.ours.calls = _Calls(
                rec, lambda: self.transport is not None and self.outbound.tracked
            )
        if isinstance(loop, Overrides):
            loop.calls = _Calls(rec)
        self.roles = {self.peer.getsockname(): "peer"} if kind == "udp" else {}
        self.tasks, self.finished, self.buffers = [], [], {}
        self.peer_open, self.transport = True, None
        self.sink = None  # ICMP_SINK's socket, once the UDP peer is closed
        tracked = PROGRESS_MASKED and kind != "udp"
        self.inbound, self.outbound = Direction(tracked), Direction(tracked)
        self.masked = set()  # tasks whose outcome is progress (Direction)
        self.sizes, self.accounted = {}, set()  # sends' sizes; tasks counted

    def value(self, spec):
        """A step's argument: itself, or a hostile value (vocab)."""
        return vocab.make_value(self.host, spec) if isinstance(spec, list) else spec

    def start(self, op, arg):
        loop, ours = self.loop, self.ours
        if op == "recv":
            task = loop.create_task(loop.sock_recv(ours, self.value(arg)))
        elif op == "recvfrom":
            task = loop.create_task(loop.sock_recvfrom(ours, self.value(arg)))
        elif op == "recv_into":
            buffer = self.value(arg) if isinstance(arg, list) else INTO[arg]()
            task = loop.create_task(loop.sock_recv_into(ours, buffer))
            self.buffers[task] = buffer
        else:
            data = self.value(arg) if isinstance(arg, list) else payload(arg)
            task = loop.create_task(loop.sock_sendall(ours, data))
            # a hostile value's size is not asked: it could run code
            size = None if isinstance(arg, list) else _size(data)
            self.outbound.put(size)
            if self.outbound.full:
                self.masked.add(task)
            self.sizes[task] = size
        number = len(self.tasks)
        task.add_done_callback(lambda _t, number=number: self.finished.append(number))
        self.tasks.append(task)

    def account(self):
        """Takes the tasks finished since the last look into the two
        directions' counts, in the order they were started: a receive
        that got bytes while our way in was full is masked. Called before
        each record and each step, so that both loops decide alike."""
        for task in self.tasks:
            if not task.done() or task in self.accounted:
                continue
            self.accounted.add(task)
            failed = task.cancelled() or task.exception() is not None
            if task in self.sizes:  # a send
                size = self.sizes[task]
                if not failed:
                    pass
                elif self.outbound.full:
                    self.outbound.put(None)  # cut short: how far is progress
                elif size is not None:
                    # not full, a send is taken whole or not begun
                    self.outbound.took(size)
            elif not failed:
                if self.inbound.full:
                    self.masked.add(task)
                result = task.result()
                if isinstance(result, tuple):  # sock_recvfrom's
                    result = result[0]
                self.inbound.took(result if isinstance(result, int) else len(result))

    def peer_sent(self, result):
        """What the peer's send returned, recorded: "?" while our way in
        is full (how much it takes is progress)."""
        shown = "?" if self.inbound.full and isinstance(result, int) else result
        if isinstance(result, int):
            self.inbound.put(result)
        return shown

    def peer_received(self, data):
        """What the peer's receive got, recorded: "?" while our way out is
        full."""
        shown = "?" if self.outbound.full else digest(data)
        self.outbound.took(len(data))
        return shown

    def act_now(self, index, step):
        """A step that takes no loop iteration: its result (a trap's
        ["op", step] action runs these too)."""
        op, peer, result = step[0], self.peer, None
        self.account()
        if op in ("recv", "recvfrom", "recv_into", "sendall"):
            self.start(op, step[1])
        elif op == "peer_send":
            if self.peer_open:
                try:
                    result = self.peer_sent(peer.send(bytes([index + 1]) * step[1]))
                except OSError as exc:
                    result = describe(exc)
        elif op == "peer_recv":
            if self.peer_open:
                try:
                    result = self.peer_received(peer.recv(step[1]))
                except OSError as exc:
                    result = describe(exc)
        elif op == "cancel":
            waiting = [t for t in self.tasks if not t.done()]
            if waiting:
                waiting[step[1] % len(waiting)].cancel()
        elif op == "timeout":
            if self.ours.fileno() != -1:
                self.ours.settimeout(step[1])
        elif op == "close_peer":
            if self.peer_open:
                address = peer.getsockname()
                peer.close()
                self.peer_open = False
                if ICMP_SINK and self.kind == "udp":
                    self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    self.sink.bind(address)
        elif op == "reset_peer" and self.peer_open:
            # a zero linger: the close sends a reset
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            peer.close()
            self.peer_open = False
        elif op == "close_ours":
            # while operations may wait on it: its number is free for the canary
            self.ours.close()
            self.host.fill_canary()
        elif op == "soon":
            self.host.schedule_callback(step[1])
        return result

    async def act(self, index, step):
        op, loop, ours, result = step[0], self.loop, self.ours, None
        self.account()
        if op == "then_cancel" and self.peer_open:
            # the peer makes our socket ready, and a waiting task is
            # cancelled in the iteration whose poll finds it so: its
            # reader or writer callback then runs with the future done
            try:
                if step[1] == "peer_send":
                    self.peer_sent(self.peer.send(b"c" * 100))
                else:
                    self.peer_received(self.peer.recv(1 << 20))
            except OSError as exc:
                result = describe(exc)
            await asyncio.sleep(0)
            waiting = [t for t in self.tasks if not t.done()]
            if waiting:
                waiting[0].cancel()
        elif op == "blocking" and ours.fileno() != -1:
            ours.setblocking(True)
            try:
                if step[1] == "recv":
                    await loop.sock_recv(ours, 10)
                else:
                    await loop.sock_sendall(ours, b"x")
                result = "returned"
            except (ValueError, OSError) as exc:
                result = describe(exc)
            finally:
                if ours.fileno() != -1:
                    ours.setblocking(False)
        elif op == "transport":
            if self.transport is None and ours.fileno() != -1:
                try:
                    self.transport, _ = await loop.create_connection(Quiet, sock=ours)
                    self.inbound.stop()  # it reads whatever comes
                    result = "transport"
                except (OSError, RuntimeError, ValueError) as exc:
                    result = describe(exc)
        elif op not in ("then_cancel", "blocking"):
            result = self.act_now(index, step)
        return result

    def state(self):
        if self.transport is not None:
            return "transport"
        reading, writing = watched(self.loop, self.ours)
        # a send waits for the peer to read as long as progress says
        return (reading, "?" if self.outbound.full else writing)

    def outcomes(self):
        if self.kind == "subclass":
            self.ours.calls.last = None  # a step's record: calls counted anew
        self.account()
        return tuple(outcome(t, self.roles, self.buffers, self.masked) for t in self.tasks)

    def finished_order(self):
        """The order tasks finished in, but a masked send's (progress)."""
        masked = {self.tasks.index(t) for t in self.masked if t in self.tasks}
        return tuple(n for n in self.finished if n not in masked)


def _size(data):
    """The bytes a sock_sendall of `data` sends: 0 for what it refuses."""
    try:
        return memoryview(data).nbytes
    except TypeError:
        return 0


class _Calls:
    """The subclass's and the derived loop's calls, recorded in order.
    While `reads` says so, a call the same as the one before it in this
    step is not recorded again: on Windows the reads a transport makes of
    a TCP pair's bytes depend on how they arrive (progress, Direction),
    so they are compared per step, as the transport differential compares
    what a reading peer gets, not per recv()."""

    def __init__(self, rec, reads=lambda: False):
        self.rec, self.reads, self.last = rec, reads, None

    def append(self, entry):
        if entry == self.last and self.reads():
            return
        self.last = entry
        self.rec(entry)


async def run_program(loop, kind, steps, host):
    """Runs steps on loop; `host` (_Host here, or a tests/hostile
    machine's) records the observations and runs the exception handler's
    probe and the canary."""
    prog = host.prog = SockProgram(loop, kind, host.rec, host)
    for index, step in enumerate(steps):
        host.step = index
        result = await prog.act(index, step)
        if kind == "tcp":
            # loopback TCP moves what a full window held back in the
            # kernel's own time: let it, so that what a receive finds
            # does not depend on how busy the machine is
            time.sleep(KERNEL_SETTLE)
        for _ in range(SETTLE):
            await asyncio.sleep(0)
            host.fill_canary()
        host.rec((step, result, prog.outcomes(), prog.finished_order(), prog.state()))
        host.check_canary()
    for t in prog.tasks:
        t.cancel()
    for _ in range(SETTLE):
        await asyncio.sleep(0)
    host.rec(("end", prog.state()))
    if prog.transport is not None:
        try:
            prog.transport.abort()
        except OSError as exc:  # a hostile step closed the socket under it
            host.rec(("abort", describe(exc)))
        await asyncio.sleep(0)
    prog.ours.close()
    if prog.peer_open:
        prog.peer.close()
    if prog.sink is not None:
        prog.sink.close()
    host.fill_canary()
    host.check_canary()


class _Host:
    """What a program run here (not by a tests/hostile machine) records
    beside its steps: the exception handler's calls with what the handler
    sees (hostile.handler.probe), and the descriptor canary."""

    def __init__(self, loop, log):
        self.log = log
        self.canary = Watched()
        loop.set_exception_handler(lambda _loop, ctx: log.append(handler_call(ctx) + (probe(),)))

    def rec(self, entry):
        self.log.append(entry)

    def fill_canary(self):
        self.canary.fill()

    def check_canary(self):
        for kind, what in self.canary.check():
            self.log.append(("canary", kind, what))

    def close(self):
        self.canary.close()


# What observe records when asyncio's select() failed on Windows:
# WSAENOTSOCK when nothing holds the closed socket's handle value,
# WSAEOPNOTSUPP when a canary's file or pipe took it
# (scripts/wine/probe_select_reused_value.py).
SELECT_FAILED = ("asyncio's select() failed", "WSAENOTSOCK")
WSAENOTSOCK, WSAEOPNOTSUPP = 10038, 10045


def observe(loop_name, kind, steps, debug, derived, tallies):
    loop = DERIVED[loop_name]() if derived else FACTORIES[loop_name]()
    loop.set_debug(debug)
    host = _Host(loop, [])
    try:
        loop.run_until_complete(run_program(loop, kind, steps, host))
    except OSError as exc:
        if not (
            sys.platform == "win32"
            and loop_name == "asyncio"
            and getattr(exc, "winerror", None) in (WSAENOTSOCK, WSAEOPNOTSUPP)
        ):
            raise
        host.log.append(SELECT_FAILED)
    finally:
        loop.close()
        host.fill_canary()
        host.check_canary()  # what the loop's close freed
        host.close()
        tally_canary(tallies, loop_name, host.canary)
    return host.log


# The hostile sockops machine's name for the stale callback case (the
# module's docstring), whose predicate judges the first difference.
STALE_CALLBACK = "asyncio's select() watches a closed socket's handle value, reused"


def _as_lists(value):
    """An observation as the hostile machines' journal has it (JSON:
    tuples are lists), which their predicates read."""
    if isinstance(value, (tuple, list)):
        return [_as_lists(item) for item in value]
    return value


def _known(want, got):
    """Why asyncio's observations (want) and zloopgo's (got) may differ:
    the module's docstring names the case; None for any other."""
    if want[-1:] == [SELECT_FAILED] and got[: len(want) - 1] == want[:-1]:
        return "Windows: asyncio's select() fails on a socket closed while registered"
    if sys.platform == "win32":
        diff = compare.first_difference(_as_lists(want), _as_lists(got))
        if diff is not None and machines.KNOWN_ON_WINDOWS[STALE_CALLBACK](
            diff, {"machine": "sockops"}
        ):
            return "Windows: " + STALE_CALLBACK
    return None


@pytest.mark.parametrize("kind", KINDS)
def test_generated_sock_programs_observe_what_asyncio_observes(kind, capsys):
    rng = random.Random(repr(("sock_ops", kind)))
    known = {}
    tallies = canary_tallies()
    for n in range(PROGRAMS):
        debug, derived = n % 3 == 0, n % 4 == 1
        steps = make_program(rng, kind, debug)
        why = assert_same_observations(
            f"program {n} ({kind}, debug={debug}, derived={derived})",
            steps,
            observe,
            kind,
            steps,
            debug,
            derived,
            tallies,
            known=_known,
        )
        if why is not None:
            known.setdefault(why, []).append(n)
    # a named difference is Windows' alone: on Linux every program agrees
    assert sys.platform == "win32" or not known, known
    report_canary_tallies(f"sock_ops programs ({kind})", tallies, capsys)


@pytest.mark.parametrize("sink", [True, False])
def test_the_icmp_sink_keeps_a_closed_udp_peer_from_answering(sink, monkeypatch):
    """ICMP_SINK (Windows' setting) after a UDP close_peer: what our socket
    sends earns no ICMP error, so no receive or send meets one. Run with
    the sink on and off on every platform: Linux delivers the error to
    the next receive every time (ECONNREFUSED), so there the check fails
    without the sink; Wine never delivers it to a receive (the module's
    docstring), so there only the sink's run checks anything."""
    monkeypatch.setitem(globals(), "ICMP_SINK", sink)
    prog = SockProgram(None, "udp", lambda entry: None)
    try:
        prog.act_now(0, ("close_peer",))
        assert (prog.sink is not None) == sink
        met = []
        for _ in range(4):
            for call, arg in ((prog.ours.send, b"x"), (prog.ours.recv, 10)):
                time.sleep(0.01)
                try:
                    call(arg)
                except BlockingIOError:
                    pass
                except OSError as exc:
                    met.append(describe(exc))
    finally:
        prog.ours.close()
        if prog.sink is not None:
            prog.sink.close()
    if sink:
        assert met == []
    elif sys.platform == "linux":
        assert met and all(m[0] == "ConnectionRefusedError" for m in met), met


class PlainDerivedLoop(zloopgo.Loop):
    """A class derived from zloopgo's loop: sock_recv takes asyncio's steps
    in Python (zloopgo/_sockmethods.py), not the adapter's."""


def test_receives_from_rx_from_on_take_the_receive_buffer(monkeypatch):
    # The programs above prove nothing about the Python steps' receive-buffer path
    # if it never ran: count the receives that reach recv_into.
    calls = []
    monkeypatch.setattr(
        _sockmethods,
        "rx_view",
        lambda loop, n, view=_sockmethods.rx_view: (
            calls.append(n),
            view(loop, n),
        )[1],
    )
    loop = PlainDerivedLoop()
    try:

        async def main():
            a, b = socket.socketpair()
            a.setblocking(False)
            b.send(b"x" * 10)
            got = [await loop.sock_recv(a, FROM - 1)]
            b.send(b"y" * 10)
            got.append(await loop.sock_recv(a, FROM))
            waiting = loop.create_task(loop.sock_recv(a, LIMIT))
            await asyncio.sleep(0)
            b.send(b"z" * 10)
            got.append(await waiting)
            b.send(b"w" * 10)
            got.append(await loop.sock_recv(a, LIMIT + 1))
            a.close()
            b.close()
            return got

        got = loop.run_until_complete(main())
    finally:
        loop.close()
    assert got == [b"x" * 10, b"y" * 10, b"z" * 10, b"w" * 10]
    # the immediate one, then the waiting one's first try (the adapter's
    # _sock_recv makes its second)
    assert calls == [FROM, LIMIT]
