"""Runs one program (see `programs`) on one event loop and records what a
program can observe, as a list of JSON-able entries; and the worker
process that runs the programs sent to it, one JSON line each.

What is recorded, in the order it happens:
- each step's start; every op's return value or exception (type and
  message); the protocol's callbacks (connection_made, data_received and
  buffer_updated with the bytes, get_buffer's size hint, eof_received,
  pause_writing, resume_writing, connection_lost with its exception);
  numbered markers scheduled with call_soon; tasks finishing (stream
  machine) with their result;
- the exception handler's calls (message, exception type and message, the
  context's keys, and what the handler sees: hostile.handler.probe),
  records of the 'asyncio' logger (level, format, the arguments that are
  strings or numbers, the exception's type and its __context__; the
  default handler's line as hostile.handler.log_line makes it), unraisable
  exceptions (sys.unraisablehook);
- what hostile objects did (tests/hostile/vocab.py: their calls and their
  actions' outcomes; a finalizer's, per step in a fixed order, as
  hostile.host.Host.flush_finalized says why), an override's calls, and
  the descriptor canary's violations (filled after every loop iteration,
  checked after every step and after the loop's close);
- what each peer receives: a recv op's bytes; and at the end of each step
  the bytes that reached the peer during it (run-length encoded: each
  write carries its own letter, so order, loss and duplication show);
- after each step, every connection's state: is_closing(),
  get_write_buffer_size(), whether writing is paused, is_reading() (and
  for streams at_eof(), the StreamReader's buffered byte count).
Write payloads are letters (the n-th write on a connection is made of the
n-th letter), the peer's are digits, a bytearray overwritten after the call
holds '#'. The peer is driven from the loop's thread, so a peer action
inside a callback sees exactly what has reached the kernel by then (on
asyncio a write() has reached it when write() returns).

Between steps the loop is *settled*: it runs one iteration at a time
(stop() then run_forever()) and peers that are reading read everything,
until nothing observable changed for QUIET iterations in a row and the
last wait_for started is past its deadline (at most MAX_ITERATIONS; then
"unsettled" is recorded). Only what the program can
observe counts, not the loop's internals (a loop that spins on a ready
callback forever, as asyncio 3.13's writelines() after close() does,
settles like one that sleeps). zloopgo may need a different number of
iterations than asyncio for the same outcome, so iterations are never
counted or compared, and the bytes a reading peer gets while the loop
settles are compared per step, not per recv().

Determinism. Each connection's socket buffers are set (SO_SNDBUF and
SO_RCVBUF, both ends, the program's `sockbuf`). A Unix socket then
behaves the same given the same calls: how much a send takes depends only
on the sends and reads before it. It does depend on how the bytes were
sent: the kernel charges every send its buffer overhead, so many small
sends fill a socket sooner than one large one of the same bytes, and
get_write_buffer_size() and pause_writing() show it; a loop must make
asyncio's sends. Unix sockets and TLS ("tls" runs over a Unix socket pair:
asyncio's sslproto over the loop's own transport, made by loop.start_tls()
on a plain transport, by create_connection(ssl=...) or, for streams, by
open_connection(ssl=...)) are compared
exactly. On Windows, which has no Unix sockets, "tls" runs over loopback
TCP and is compared as TCP is (peer.TCP_NETS).

Loopback TCP is not deterministic that way: delayed ACKs, window updates
and autocorking make how much the kernel takes depend on timing. The
runner waits after every iteration, peer action and write until TCP has
carried what was sent both ways, and the reset a write to a closed peer
draws (peer.tcp_quiet; on Windows, where nothing counts what TCP has yet
to carry, until what each end shows stays the same: see peer), does not
end settling while a
reading peer has not acknowledged everything, and compares the program
exactly as long as a connection cannot have filled its socket (at most
SAFE_TCP bytes in at most SAFE_TCP_WRITES writes since its peer last read
everything). Beyond that, until the peer has read everything again, these
are recorded as "?" (not compared) on that connection:
get_write_buffer_size(), the bytes a recv op got, pause_writing and
resume_writing (the armed ops of those two are not run on TCP), and the
bytes the peer received (compared once it has read everything; no longer
compared at all on a connection lost, or whose bytearray was overwritten
after the call, in that state: then what arrives depends on how much the
kernel had taken, and so does whether writing stays paused); ops whose
outcome depends on what is still buffered (close, abort, write_eof, the
peer's shut_wr/reset/close, wait_closed, and a write to a transport that
is closing) are skipped, as are the ops after a drain() in a task (whose
completion is not recorded).

Never compared, because they are timing: how long anything took (asyncio's
slow-callback and poll logs, the TLS handshake time log), and reprs that
hold addresses or class names (formatted as "<obj>").
"""

import asyncio
import gc
import hashlib
import importlib
import json
import logging
import os
import re
import socket
import ssl
import string
import sys
import time
import traceback

from hostile import canary as canaries
from hostile import handler as handlers
from hostile import vocab
from hostile.host import release_finished_frames

from . import peer as peers

QUIET = 8
MAX_ITERATIONS = 5000
SAFE_TCP = 16384
SAFE_TCP_WRITES = 8
LETTERS = string.ascii_letters.encode()
DIGITS = string.digits.encode()
HOOK_BUDGET = 3  # times the logging and exception handler ops run per program
# asyncio log records that are timing, not behaviour
_TIMING_LOGS = ("took", "Using selector", "Get address info", "Close %r")
_RUNS = re.compile(rb"(.)\1*", re.DOTALL)


def show(data):
    """bytes as '<length>:<char>x<count>...', e.g. '5:ax2 bx3'; long
    ones keep their first and last runs and a checksum."""
    data = bytes(data)
    runs = [f"{chr(m.group()[0])}x{len(m.group())}" for m in _RUNS.finditer(data)]
    if len(runs) > 16:
        digest = hashlib.blake2b(data, digest_size=6).hexdigest()
        runs = runs[:8] + [f"...({len(runs)} runs, {digest})..."] + runs[-4:]
    return f"{len(data)}:" + " ".join(runs)


def _exc(exc):
    # masked: a message may hold an address (a context's "already entered")
    return [type(exc).__name__, handlers.mask(exc)]


def _value(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return show(v)
    return repr(v)


def _arg(a):
    return a if isinstance(a, (str, int, float)) and not isinstance(a, bool) else "<obj>"


class Finalizer:
    """Runs ops from __del__ (dropped as soon as it is made)."""

    def __init__(self, runner, ops):
        self.runner = runner
        self.ops = ops

    def __del__(self):
        self.runner.rec(["fin"])
        self.runner.run_ops(self.ops)


class _Hooks:
    """What the protocols of both machines share: recording and armed ops."""

    def __init__(self, runner, t):
        self.r = runner
        self.t = t
        self.paused = False

    def connection_made(self, transport):
        self.r.rec(["cb", self.t, "connection_made"])

    def eof_received(self):
        self.r.rec(["cb", self.t, "eof_received"])
        return self.r.fire(self.t, "eof_received")

    def connection_lost(self, exc):
        self.r.rec(["cb", self.t, "connection_lost"] + (_exc(exc) if exc else [None]))
        self.r.note_lost(self.t)
        self.r.fire(self.t, "connection_lost")

    def pause_writing(self):
        self.paused = True
        self.r.flow(self.t, "pause_writing")

    def resume_writing(self):
        self.paused = False
        self.r.flow(self.t, "resume_writing")


class PlainProtocol(_Hooks, asyncio.Protocol):
    def data_received(self, data):
        self.r.rec(["cb", self.t, "data_received", show(data)])
        self.r.fire(self.t, "data_received")


class BufferedProtocol(_Hooks, asyncio.BufferedProtocol):
    def __init__(self, runner, t, chunk):
        super().__init__(runner, t)
        self.buf = bytearray(chunk)
        self.kind = "bytearray"  # what get_buffer returns (the "buffer" op)

    def get_buffer(self, sizehint):
        self.r.rec(["cb", self.t, "get_buffer", sizehint])
        self.r.fire(self.t, "get_buffer")
        n = len(self.buf)
        # what recv_into cannot fill: asyncio reports recv_into's error
        return {
            "bytearray": lambda: self.buf,
            "list": lambda: [0] * n,
            "bytes": lambda: bytes(n),
            "strided": lambda: memoryview(bytearray(2 * n))[::2],
            "empty": lambda: bytearray(),
            "hostile": lambda: self.r.hostile_buffer(n),
        }[self.kind]()

    def buffer_updated(self, nbytes):
        self.r.rec(["cb", self.t, "buffer_updated", show(self.buf[:nbytes])])
        self.r.fire(self.t, "buffer_updated")


class SockWrapper:
    """What an "override" op puts in a socket transport's `_sock`: the
    socket, with one method recorded and running ops first."""

    def __init__(self, sock, method, hook):
        self._sock = sock
        setattr(self, method, hook)

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _LogRecorder(logging.Handler):
    def __init__(self, runner):
        super().__init__(logging.DEBUG)
        self.r = runner

    def emit(self, record):
        msg = str(record.msg)
        if any(s in msg for s in _TIMING_LOGS):
            return
        args = record.args if isinstance(record.args, tuple) else ()
        exc = record.exc_info[1] if record.exc_info else None
        context = getattr(exc, "__context__", None)
        if msg.startswith("Exception in callback") or "\n" in msg:
            # the default handler's line (hostile.handler's modes): its
            # first line and the names of the context lines after it
            msg = handlers.log_line(msg)
        self.r.rec(
            [
                "log",
                record.levelname,
                msg,
                [_arg(a) for a in args],
                type(exc).__name__ if exc else None,
            ]
            # what an exception the handler raised was raised inside
            + ([["context"] + _exc(context)] if context is not None else [])
        )
        self.r.hook_ops("log_ops")


class Runner:
    """One program on one loop."""

    def __init__(self, program, factory, tls=None):
        self.p = program
        self.factory = factory
        self.tls = tls  # (server context, client context) for net "tls"
        self.obs = []
        self.n = len(program["conns"])
        self.exact = program["net"] not in peers.TCP_NETS
        self.arms = {}
        self.markers = 0
        self.tasks = 0
        self.tasks_done = 0
        self.written = [0] * self.n  # letters used per connection
        self.peer_sends = [0] * self.n
        self.unsynced = [[0, 0] for _ in range(self.n)]  # bytes, writes (TCP)
        self.reported = [0] * self.n  # peer stream bytes already recorded
        self.lost = [False] * self.n
        # TCP: what the peer receives depends on how much the kernel took
        # (the connection was lost, or a bytearray overwritten, while
        # uncertain): its stream is no longer compared
        self.tainted = [False] * self.n
        self.hook_budget = {"log_ops": HOOK_BUDGET, "handler_ops": HOOK_BUDGET}
        self.in_hook = False
        self.notes = {"sync_timeouts": 0, "iterations": 0, "paths": []}
        # program["probe"]: count the calls of StreamReader.feed_data made
        # in Python (sys.setprofile), which the stream fast path skips
        self.python_feeds = 0
        # hostile objects (tests/hostile/vocab.py): the handles their
        # actions name, finalizers' records (compared per step, in a fixed
        # order), the canary
        self.handles = []
        self.step = None
        self.made = 0
        self.budget = vocab.ACTION_BUDGET
        self.finalizing = 0
        self.lateness = 0
        self.finalized = []
        # the monotonic time the last wait_for started times out at
        self.timeouts_until = 0.0
        self.spare = None
        self.canary = None

    # -- recording

    def rec(self, entry):
        if self.finalizing or self.lateness:
            self.finalized.append(entry)
        else:
            self.obs.append(entry)

    def uncertain(self, t):
        b, w = self.unsynced[t]
        return not self.exact and (b > SAFE_TCP or w > SAFE_TCP_WRITES)

    def flow(self, t, what):
        if self.uncertain(t):
            return  # how much the kernel took decides this on TCP
        self.rec(["cb", t, what])
        if self.exact:
            self.fire(t, what)

    def fire(self, t, hook):
        """Runs what was armed on protocol method `hook` of connection t."""
        arm = self.arms.pop((t, hook), None)
        if arm is None:
            return None
        ops, raises, ret = arm
        self.run_ops(ops)
        if raises:
            raise ValueError(f"raised by {hook}")
        return ret

    def hook_ops(self, which):
        ops = self.p.get(which)
        if not ops or self.in_hook or self.hook_budget[which] <= 0:
            return
        self.hook_budget[which] -= 1
        self.in_hook = True
        try:
            self.run_ops(ops)
        finally:
            self.in_hook = False

    def exception_handler(self, loop, context):
        msg = str(context.get("message"))
        if msg.startswith("Exception in callback"):
            msg = "Exception in callback"  # then the handle's repr
        exc = context.get("exception")
        keys = sorted(k for k in context if k not in ("message", "exception", "source_traceback"))
        keys = [k for k in keys if k != "handle_traceback"]
        # what the handler sees (hostile.handler.probe): sys.exc_info(),
        # whether logging.exception() prints a traceback, __context__
        entry = ["handler", msg] + (_exc(exc) if exc else [None, None]) + [keys]
        self.rec(entry + [handlers.probe()])
        self.hook_ops("handler_ops")
        mode = self.p.get("handler", "custom")
        if mode == "raises":
            raise RuntimeError("raised by the exception handler")
        if mode == "delegate":
            loop.default_exception_handler(context)

    def unraisable(self, u):
        entry = ["unraisable"] + _exc(u.exc_value)
        if vocab.raised_by_finalizer(u) and self.finalizing:
            self.finalized.append(entry)
        else:
            self.rec(entry)

    # -- what hostile objects (tests/hostile/vocab.py) ask of a runner

    mask = staticmethod(handlers.mask)

    def where(self):
        self.made += 1
        return f"step{self.step}.{self.made}"

    def handle_ref(self, ref, trap):
        if ref == "self":
            owner = getattr(trap, "owner", None)
            return None if owner is None else self.handles[owner]
        if not self.handles:
            return None
        return self.handles[-1 if ref == "last" else ref % len(self.handles)]

    def add_handle(self, handle, *owners):
        self.handles.append(handle)
        for obj in owners:
            if isinstance(obj, vocab._TrapBase):
                obj.owner = len(self.handles) - 1

    def schedule_actions(self, kind, actions, name):
        cb = vocab.Trap(self, ["trap", name, {"__call__": actions}, {}])
        h = self.loop.call_soon(cb) if kind == "soon" else self.loop.call_later(0, cb)
        self.add_handle(h, cb)

    def spare_fd(self):
        if self.spare is None:
            self.spare = os.pipe()
        return self.spare[0]

    def flush_finalized(self):
        """What finalizers recorded during the step, in a fixed order (see
        hostile.host.Host.flush_finalized)."""
        if self.finalized:
            entries = sorted(json.dumps(e, default=repr) for e in self.finalized)
            self.finalized = []
            self.rec(["finalized", [json.loads(e) for e in entries]])

    # -- data

    def payload(self, t, kind, size):
        """The object one write passes: size bytes of connection t's next
        letter, as `kind`; and the bytearray to overwrite afterwards."""
        letter = LETTERS[self.written[t] % len(LETTERS)]
        self.written[t] += 1
        raw = bytes([letter]) * size
        if kind == "bytes":
            return raw, None
        if kind == "bytearray":
            b = bytearray(raw)
            return b, b
        if kind == "memoryview":
            return memoryview(raw), None
        if kind == "mv_bytearray":
            b = bytearray(raw)
            return memoryview(b), b
        return memoryview(raw * 2)[::2], None  # strided: not one contiguous block

    def note_write(self, t, size):
        self.unsynced[t][0] += size
        self.unsynced[t][1] += 1

    def note_mutated(self, t):
        # asyncio 3.12+ keeps the bytearray a send did not take whole
        if self.uncertain(t):
            self.tainted[t] = True

    def note_lost(self, t):
        if not self.lost[t]:
            self.lost[t] = True
            if self.uncertain(t):
                self.tainted[t] = True

    def check_lost(self):
        """A transport closed its socket: the connection is gone (the
        stream machine has no connection_lost of its own to record)."""
        for t, sock in enumerate(self.socks):
            if sock.fileno() < 0:
                self.note_lost(t)

    # -- ops

    def transport(self, t):
        return self.transports[t]

    def writer_or_transport(self, t):
        return self.writers[t] if self.p["machine"] == "stream" else self.transports[t]

    def run_ops(self, ops):
        """Runs ops in order; each op's exception is recorded and the next
        runs, but for "raise", which ends the list by raising."""
        for op in ops:
            if op[0] == "raise":
                self.rec(["op", "raise"])
                raise ValueError("raised by the program")
            self.run_op(op)

    def run_op(self, op):
        name = op[0]
        try:
            if name == "marker":
                self.markers += 1
                self.loop.call_soon(self.rec, ["marker", self.markers])
                return
            if name == "soon":
                self.loop.call_soon(self.run_ops, op[1])
                return
            if name == "fin":
                Finalizer(self, op[1])
                return
            t = op[1]
            if name == "peer":
                self.peer_act(t, op[2])
                return
            if name in ("close", "abort", "write_eof") and self.uncertain(t):
                self.rec(["op", name, t, "skipped"])
                return
            writes = ("write", "writelines", "hwrite")
            if name in writes and self.uncertain(t) and self.transport(t).is_closing():
                # a closing transport's write goes to the socket when its
                # buffer is empty (asyncio's fails there once
                # connection_lost ran) and joins the buffer when not: how
                # much the kernel took decides which
                self.rec(["op", name, t, "skipped"])
                return
            result = self.sync_op(name, t, op)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - the exception is the outcome
            self.rec(["op", name, op[1] if len(op) > 1 else None, "!"] + _exc(exc))
            return
        self.rec(["op", name, t, result])

    def sync_op(self, name, t, op):
        w = self.writer_or_transport(t)
        tr = self.transport(t)
        if name == "write":
            _, _, kind, size, mutate = op
            data, mutable = self.payload(t, kind, size)
            self.note_write(t, size)
            try:
                return _value(w.write(data))
            finally:
                if mutate and mutable is not None:
                    mutable[:] = b"#" * len(mutable)
                    self.note_mutated(t)
                self.sync(t)
        if name == "writelines":
            _, _, chunks, mutate = op
            made = [self.payload(t, kind, size) for kind, size in chunks]
            for _, size in chunks:
                self.note_write(t, size)
            try:
                return _value(w.writelines([data for data, _ in made]))
            finally:
                for _, mutable in made:
                    if mutate and mutable is not None:
                        mutable[:] = b"#" * len(mutable)
                        self.note_mutated(t)
                self.sync(t)
        if name == "limits":
            return _value(tr.set_write_buffer_limits(high=op[2], low=op[3]))
        if name == "get_limits":
            return _value(tr.get_write_buffer_limits())
        if name == "size":
            size = tr.get_write_buffer_size()
            return "?" if self.uncertain(t) else _value(size)
        if name in ("pause_reading", "resume_reading", "is_reading", "abort"):
            return _value(getattr(tr, name)())
        if name in ("write_eof", "can_write_eof", "close", "is_closing"):
            return _value(getattr(w, name)())
        if name == "max_size":  # on the socket transport, under TLS too
            raw = getattr(getattr(tr, "_ssl_protocol", None), "_transport", None) or tr
            raw.max_size = vocab.make_value(self, op[2]) if isinstance(op[2], list) else op[2]
            return None
        if name == "hwrite":
            data = vocab.make_buffer(self, op[2])
            self.note_write(t, op[2][3])
            try:
                return _value(w.write(data))
            finally:
                del data
                self.sync(t)
        if name == "override":
            return self.override(t, op[2], op[3], op[4])
        if name == "buffer":
            proto = self.protocols[t]
            if not isinstance(proto, BufferedProtocol):
                return "not buffered"
            proto.kind = op[2]
            return None
        raise AssertionError(f"unknown op {op!r}")

    def override(self, t, target, method, ops):
        """Replaces target's method on the instance (see programs): the
        loop must call what the instance has, as asyncio's Python does."""
        tr = self.transport(t)
        ssl_protocol = getattr(tr, "_ssl_protocol", None)
        raw = ssl_protocol._transport if ssl_protocol is not None else tr
        if target == "protocol":
            obj = self.protocols[t]
        elif target == "transport":
            obj = self.writer_or_transport(t).transport if self.p["machine"] == "stream" else tr
        elif target == "sock":
            obj = getattr(raw, "_sock", None)
        elif target == "sslobj":
            obj = getattr(ssl_protocol, "_sslobj", None)
        else:
            obj = self.readers[t]
        if obj is None:
            return "nothing to override"
        original = getattr(obj, method)
        calls = []

        def hook(*args, **kwargs):
            # runs its ops the first time, as an armed method does
            self.rec(["override", t, target, method])
            calls.append(None)
            if len(calls) == 1:
                self.run_ops(ops)
            return original(*args, **kwargs)

        if target == "sock":
            raw._sock = SockWrapper(obj, method, hook)
        else:
            setattr(obj, method, hook)
        return "replaced"

    def hostile_buffer(self, n):
        trap = ["trap", f"buffer{self.made}", {"__len__": []}, {"__len__": n}]
        self.made += 1
        return vocab.make_buffer(self, ["hbuf", "bytearray", trap, n])

    async def run_task_ops(self, k, ops):
        for i, op in enumerate(ops):
            timeout = None
            if op[0] == "timeout":  # asyncio.wait_for at this await
                timeout, op = op[1], op[2]
            name = op[0]
            if name not in ("drain", "wait_closed", "read", "readexactly", "readline", "at_eof"):
                self.run_ops([op])
                continue
            t = op[1]
            reader, writer = self.readers[t], self.writers[t]
            if name == "wait_closed" and self.uncertain(t):
                self.rec(["op", name, t, "skipped"])
                continue
            if name == "drain" and self.uncertain(t):
                # when it returns depends on how much the kernel took
                self.rec(["op", name, t, "not compared", len(ops) - i - 1])
                self.untracked.add(k)
                await writer.drain()
                return "not compared"
            try:
                if name == "drain":
                    awaitable = writer.drain()
                elif name == "wait_closed":
                    awaitable = writer.wait_closed()
                elif name == "read":
                    awaitable = reader.read(op[2])
                elif name == "readexactly":
                    awaitable = reader.readexactly(op[2])
                elif name == "readline":
                    awaitable = reader.readline()
                else:
                    awaitable = None
                    result = reader.at_eof()
                if awaitable is not None and timeout is not None:
                    # the step settles after this deadline (settle): on
                    # an await that does not end, the timeout is the
                    # step's, however fast the loop's iterations are
                    self.timeouts_until = max(self.timeouts_until, time.monotonic() + timeout)
                    result = await asyncio.wait_for(awaitable, timeout)
                elif awaitable is not None:
                    result = await awaitable
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the exception is the outcome
                self.rec(["op", name, t, "!"] + _exc(exc))
                continue
            self.rec(["op", name, t, _value(result)])
        return None

    def task_done(self, k, fut):
        self.tasks_done += 1
        if k in self.untracked:
            if not fut.cancelled():
                fut.exception()  # retrieved: never logged when it is collected
            return
        if fut.cancelled():
            self.rec(["done", k, "cancelled"])
        elif fut.exception() is not None:
            self.rec(["done", k, "!"] + _exc(fut.exception()))
        else:
            self.rec(["done", k, _value(fut.result())])

    # -- the peer

    def peer_act(self, t, action):
        p = self.peers[t]
        what = action[0]
        if what in ("shut_wr", "reset", "close") and self.uncertain(t):
            self.rec(["peer", t, what, "skipped"])
            return
        if what == "recv":
            got = p.recv(action[1])
            if self.uncertain(t) and (got is None or isinstance(got, bytes)):
                out = "?"
            elif isinstance(got, bytes):
                out = show(got)
            elif got is None:
                out = "nothing"
            else:
                out = ["!"] + _exc(got)
            self.rec(["peer", t, "recv", action[1], out])
        elif what == "send":
            digit = DIGITS[self.peer_sends[t] % len(DIGITS)]
            self.peer_sends[t] += 1
            got = p.send(bytes([digit]) * action[1])
            self.rec(["peer", t, "send", action[1], got if isinstance(got, int) else _exc(got)])
        elif what in ("read", "stop"):
            p.reading = what == "read"
            self.rec(["peer", t, what])
        else:
            if what in ("reset", "close") and not self.exact:
                p.loop_sent_at_close = peers.tcp_sent(self.socks[t])
            err = getattr(p, what)()
            self.rec(["peer", t, what] + (_exc(err) if err else []))
        self.sync(t)

    def sync(self, t, settling=False):
        """TCP: wait until what was sent on connection t has arrived
        (`settling`: after a loop iteration, which settle's QUIET
        iterations watch further; on Windows a shorter wait, see peer)."""
        if self.exact:
            return
        p, ours = self.peers[t], self.socks[t]
        expect_reset = p.closed and (p.reset_sent or peers.tcp_sent(ours) > p.loop_sent_at_close)
        if not peers.tcp_quiet(ours, p.sock, p.closed, expect_reset, settling=settling):
            self.notes["sync_timeouts"] += 1

    def profile(self, frame, event, arg):
        if event == "call" and frame.f_code is asyncio.StreamReader.feed_data.__code__:
            self.python_feeds += 1

    # -- running the loop

    def run_once(self):
        self.loop.stop()
        self.loop.run_forever()
        self.notes["iterations"] += 1

    def fingerprint(self):
        state = [len(self.obs), self.tasks_done]
        for t in range(self.n):
            tr = self.transports[t]
            p = self.peers[t]
            state.append(
                (
                    tr.is_closing(),
                    tr.get_write_buffer_size(),
                    p.inq(),
                    peers.fionread(self.socks[t]),
                    len(p.stream),
                    p.eof,
                    p.error,
                    p.closed,
                )
            )
        return state

    def settle(self):
        quiet, last = 0, None
        deadline = None
        for _ in range(MAX_ITERATIONS):
            self.run_once()
            self.canary.fill()  # a close may have freed a number
            self.check_lost()
            for t, p in enumerate(self.peers):
                p.pump()
                self.autoread(t)
                self.sync(t, settling=True)
            state = self.fingerprint()
            if state != last:
                quiet, last = 0, state
                continue
            quiet += 1
            if quiet < QUIET:
                continue
            if time.monotonic() < self.timeouts_until:
                # a wait_for's timer not yet due: settling in fewer
                # iterations than its time would make the step it fires
                # in a matter of speed (seed 10's TLS program 61 on 3.14,
                # asyncio's debug-mode iterations slower than zloopgo's)
                time.sleep(0.0005)
                quiet = 0
                continue
            if self.tcp_flushed():
                break
            # TCP: what a reading peer has not acknowledged yet still holds
            # the loop's socket; ask the peer to acknowledge, then go on
            deadline = deadline or time.monotonic() + 2
            if time.monotonic() > deadline:
                self.notes["sync_timeouts"] += 1
                break
            for p in self.peers:
                p.quickack()
            time.sleep(0.0005)
            quiet = 0
        else:
            self.rec(["unsettled"])
        for t, p in enumerate(self.peers):
            if self.lost[t] or p.closed or p.reading:
                self.unsynced[t] = [0, 0]

    def tcp_flushed(self):
        """Exact nets; TCP: every reading peer has everything the loop sent."""
        if self.exact:
            return True
        for t, p in enumerate(self.peers):
            alive = p.reading and not p.closed and not self.lost[t]
            if alive and (peers.outq(self.socks[t]) or self.transports[t].get_write_buffer_size()):
                return False
        return True

    def drain_all(self):
        """Every peer reads until the loop has nothing left to send."""
        for p in self.peers:
            p.reading = True
        self.settle()

    def autoread(self, t):
        p = self.peers[t]
        eof, err = p.eof, p.error
        p.autoread()
        if p.eof and not eof:
            self.rec(["peer", t, "eof"])
        if p.error and not err:
            self.rec(["peer", t, "error", p.error])

    def report_streams(self):
        for t, p in enumerate(self.peers):
            if self.uncertain(t) or len(p.stream) == self.reported[t]:
                continue
            if self.tainted[t]:
                if self.reported[t] >= 0:
                    self.rec(["stream", t, "not compared"])
                self.reported[t] = -1
                continue
            self.rec(["stream", t, show(p.stream[self.reported[t] :])])
            self.reported[t] = len(p.stream)

    def snapshot(self):
        for t in range(self.n):
            tr = self.transports[t]
            size = "?" if self.uncertain(t) else tr.get_write_buffer_size()
            entry = ["state", t, tr.is_closing(), size]
            if self.p["machine"] == "transport":
                flow = self.uncertain(t) or self.tainted[t]
                paused = "?" if flow else self.protocols[t].paused
                entry += [paused, tr.is_reading()]
            else:
                r = self.readers[t]
                entry += [r.at_eof(), len(getattr(r, "_buffer", b""))]
            self.rec(entry)

    # -- connections

    def pair(self):
        if self.p["net"] in peers.TCP_NETS:
            with socket.create_server(("127.0.0.1", 0)) as listener:
                ours = socket.create_connection(listener.getsockname())
                theirs, _ = listener.accept()
            theirs.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            ours, theirs = socket.socketpair()
        for s in (ours, theirs):
            peers.set_buffers(s, self.p["sockbuf"])
        ours.setblocking(False)
        return ours, theirs

    def connect(self):
        self.transports, self.protocols, self.peers, self.socks = [], [], [], []
        self.readers, self.writers = [], []
        for t, conn in enumerate(self.p["conns"]):
            ours, theirs = self.pair()
            self.socks.append(ours)
            if self.p["machine"] == "stream":
                tr, proto, p = self.open_stream(ours, theirs, conn)
            elif self.p["net"] == "tls":
                tr, proto, p = self.open_tls(t, ours, theirs, conn)
            else:
                proto = self.protocol(t, conn)
                tr, _ = self.loop.run_until_complete(
                    self.loop.connect_accepted_socket(lambda proto=proto: proto, ours)
                )
                p = peers.RawPeer(theirs, self.p["net"])
            self.transports.append(tr)
            self.protocols.append(proto)
            self.peers.append(p)
            self.notes["paths"].append(self.path_of(tr))
        self.settle()

    @staticmethod
    def path_of(tr):
        """The class of the socket transport that carries connection's
        bytes (under TLS, the one under the SSL protocol), and the class
        of the protocol reading from it: what the test checks to know that
        each machine ran over the loop's own transport (and, for streams,
        its stream fast path's gate: exactly StreamReaderProtocol)."""
        ssl_protocol = getattr(tr, "_ssl_protocol", None)
        sock_tr = ssl_protocol._transport if ssl_protocol is not None else tr
        names = []
        for obj in (sock_tr, sock_tr.get_protocol()):
            cls = type(obj)
            names.append(f"{cls.__module__}.{cls.__qualname__}")
        return names

    def protocol(self, t, conn):
        if conn["protocol"] == "plain":
            return PlainProtocol(self, t)
        return BufferedProtocol(self, t, conn["chunk"])

    def open_stream(self, ours, theirs, conn):
        """asyncio.open_connection over the socket; for net "tls", with
        ssl= (the loop the TLS client, the peer the server)."""
        if self.p["net"] == "tls":
            p = peers.TlsPeer(theirs, self.p["net"], self.tls[0])
            coro = asyncio.open_connection(
                sock=ours,
                limit=conn["limit"],
                ssl=self.tls[1],
                server_hostname="localhost",
            )
            reader, writer = self.handshake(coro, p)
        else:
            p = peers.RawPeer(theirs, self.p["net"])
            coro = asyncio.open_connection(sock=ours, limit=conn["limit"])
            reader, writer = self.loop.run_until_complete(coro)
        self.readers.append(reader)
        self.writers.append(writer)
        return writer.transport, None, p

    def handshake(self, coro, peer):
        """coro's result, run while the peer is driven through the TLS
        handshake."""
        task = self.loop.create_task(coro)
        for _ in range(1000):
            self.run_once()
            peer.handshake()
            if task.done():
                break
        return task.result()

    def open_tls(self, t, ours, theirs, conn):
        """The loop is the TLS client, the peer the server (driven here
        until the handshake is done). program["tls"] "start_tls": asyncio's
        sslproto over the loop's own socket transport (loop.start_tls);
        "connect": loop.create_connection(ssl=...), which makes the SSL
        protocol and the socket transport under it at once (the loop's
        _make_ssl_transport)."""
        proto = self.protocol(t, conn)
        p = peers.TlsPeer(theirs, self.p["net"], self.tls[0])
        if self.p.get("tls", "connect") == "start_tls":
            plain, _ = self.loop.run_until_complete(
                self.loop.connect_accepted_socket(lambda proto=proto: proto, ours)
            )
            coro = self.loop.start_tls(plain, proto, self.tls[1], server_hostname="localhost")
        else:
            coro = self.loop.create_connection(
                lambda proto=proto: proto, sock=ours, ssl=self.tls[1], server_hostname="localhost"
            )
        result = self.handshake(coro, p)
        return (result if self.p.get("tls") == "start_tls" else result[0]), proto, p

    # -- the program

    def run_step(self, step):
        kind = step[0]
        if kind == "call":
            self.loop.call_soon(self.run_ops, step[1])
        elif kind == "direct":
            try:
                self.run_ops(step[1])
            except ValueError as exc:
                self.rec(["raised"] + _exc(exc))
        elif kind == "peer":
            self.peer_act(step[1], step[2])
        elif kind == "arm":
            _, t, hook, ops, raises, ret = step
            if hook in ("pause_writing", "resume_writing") and not self.exact:
                self.rec(["arm", t, hook, "not on tcp"])
            else:
                self.arms[(t, hook)] = (ops, raises, ret)
        elif kind == "task":
            self.tasks += 1
            k = self.tasks
            task = self.loop.create_task(self.run_task_ops(k, step[1]))
            task.add_done_callback(lambda fut, k=k: self.task_done(k, fut))
            self.live_tasks.append(task)
        elif kind == "cancel_task":
            k = step[1]
            if k <= len(self.live_tasks):
                self.rec(["cancel_task", k, self.live_tasks[k - 1].cancel()])
            else:
                self.rec(["cancel_task", k, "no task"])
        elif kind == "hostile":
            cb, args = vocab.make_callback(self, step[1])
            self.add_handle(self.loop.call_soon(cb, *args), cb, *args)
            del cb, args
        else:
            raise AssertionError(f"unknown step {step!r}")

    def run(self):
        logger = logging.getLogger("asyncio")
        saved = (logger.level, logger.propagate, sys.unraisablehook)
        self.loop = self.factory()
        self.loop.set_debug(self.p["debug"])
        self.loop.slow_callback_duration = 1e9
        if self.p.get("handler", "custom") != "default":
            self.loop.set_exception_handler(self.exception_handler)
        # on Windows the form over handle values (hostile/canary_windows.py)
        self.canary = canaries.Watched(self.p.get("canary", canaries.KINDS))
        self.live_tasks = []
        self.untracked = set()
        handler = _LogRecorder(self)
        gc.disable()
        try:
            self.connect()
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            logger.addHandler(handler)
            sys.unraisablehook = self.unraisable
            if self.p.get("probe"):
                sys.setprofile(self.profile)
            for i, step in enumerate(self.p["steps"]):
                self.step = i
                self.rec(["step", i])
                self.run_step(step)
                self.settle()
                # asyncio's Python frames keep what a callback's exception
                # saw alive in reference cycles, a native loop's C frames
                # do not: collected each step (the youngest generation is
                # all the step made, the collector being off), so that
                # finalizers are compared step by step (hostile.host.Host
                # .end_step does the same, finished frames' locals let go
                # of first: a kept traceback's frames are asyncio's alone)
                release_finished_frames()
                gc.collect(0)
                self.settle()
                self.report_streams()
                self.flush_finalized()
                self.snapshot()
                self.check_canary()
            self.step = "end"
            self.rec(["end"])
            self.drain_all()
            self.report_streams()
            self.snapshot()
            self.rec(["teardown"])
            for t, tr in enumerate(self.transports):
                try:
                    tr.abort()
                except Exception as exc:  # noqa: BLE001 - the exception is the outcome
                    self.rec(["abort", t, "!"] + _exc(exc))
            self.settle()
            for task in self.live_tasks:
                if not task.done():
                    self.rec(["pending"])
                    task.cancel()
            self.settle()
            gc.collect()
            self.flush_finalized()
            self.check_canary()
        finally:
            sys.setprofile(None)
            self.notes["python_feeds"] = self.python_feeds
            logger.removeHandler(handler)
            logger.setLevel(saved[0])
            logger.propagate = saved[1]
            sys.unraisablehook = saved[2]
            for p in getattr(self, "peers", []):
                if not p.closed:
                    p.sock.close()
            self.loop.close()
            # what the loop's close freed: nothing may reach it any more
            self.canary.fill()
            gc.collect()
            self.check_canary()
            self.notes["canary"] = self.canary.tally()
            self.canary.close()
            if self.spare is not None:
                for fd in self.spare:
                    os.close(fd)
            gc.enable()
            gc.collect()
        return self.obs

    def check_canary(self):
        for kind, what in self.canary.check():
            self.rec(["canary", kind, what])


# -- the worker process


def tls_contexts():
    import trustme

    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    for ctx in (server, client):
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    server.num_tickets = 0  # no session tickets after the handshake
    return server, client


def factory_for(name):
    """The loop factory the dual-run tests call `name` (tests/helpers.py)."""
    from helpers import SCRIPT_FACTORIES

    module, _, attr = SCRIPT_FACTORIES[name].rpartition(".")
    return getattr(importlib.import_module(module), attr)


def run_program(program, loop_name, tls=None):
    """Runs `program` here, on a new loop of `loop_name`; returns
    (observations, notes). An exception of the harness itself is an
    observation too (it shows on both loops if the harness is wrong)."""
    if program["net"] == "tls" and tls is None:
        tls = tls_contexts()
    runner = Runner(program, factory_for(loop_name), tls)
    try:
        runner.run()
    except Exception:  # noqa: BLE001 - reported as an observation
        runner.rec(["harness error", traceback.format_exc(limit=8).splitlines()[-1]])
        runner.notes["traceback"] = traceback.format_exc()
    return runner.obs, runner.notes


def worker_main(loop_name):
    """Reads one program per line on stdin, answers one JSON line each
    (on the descriptor stdout had: stray prints go to stderr)."""
    import faulthandler

    faulthandler.enable()
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    tls = None
    for line in sys.stdin:
        program = json.loads(line)
        if program["net"] == "tls" and tls is None:
            tls = tls_contexts()
        start = time.perf_counter()
        obs, notes = run_program(program, loop_name, tls)
        notes["seconds"] = time.perf_counter() - start
        out.write(json.dumps({"obs": obs, "notes": notes}) + "\n")


if __name__ == "__main__":
    worker_main(sys.argv[1])
