"""What every hostile machine's runner shares, in a worker process: the
record of observations (also written, line by line, to the worker's
journal, so that what happened before a crash is compared too), the loop
and its exception handler probe (`handler`), the asyncio logger's and
unraisable exceptions' records, the handles the program knows by index
(what traps' "self", "last" and index refs name), scheduling the
callbacks that actions make, the canary (`canary`), and settling the
loop one iteration at a time.

A machine subclasses Host, implements `run_op(op)` (its ops, which traps'
["op", ...] actions run too) and drives the program; see handles.py.

It knows nothing of any machine's objects.
"""

import contextlib
import gc
import inspect
import json
import os
import sys
import threading
import traceback
import types

from . import canary as canaries
from . import handler as handlers
from . import vocab

QUIET = 3  # iterations in a row with nothing recorded: settled
ENDING_KEPT = ("canary", "loop closed", "closed", "harness error")
MAX_ITERATIONS = 300


def factory_for(name):
    """The loop factory the dual-run tests call `name` (tests/helpers.py)."""
    import importlib

    from helpers import SCRIPT_FACTORIES

    module, _, attr = SCRIPT_FACTORIES[name].rpartition(".")
    return getattr(importlib.import_module(module), attr)


class Host:
    """One program on one loop (see the module's docstring)."""

    def __init__(self, program, loop_name, journal=None):
        self.p = program
        self.loop_name = loop_name
        self.journal = journal
        self.obs = []
        self.notes = {}
        self.handles = []
        self.step = None  # the program step running (names what it makes)
        self.made = 0
        self.loop = None
        self.canary = None
        self.spare = None
        self.budget = vocab.ACTION_BUDGET
        # the finalizing and lateness depths (below) of each thread
        self.depths = threading.local()
        self.finalized = []
        # handles a finalizer (or what one made) made in this step, with
        # their owners: they join self.handles at the step's end
        self.finalizer_handles = []
        self.late = []
        # whether the program collected every generation in this step
        # (end_step then does too)
        self.collected_fully = False
        # After the program's end: what was made is torn down and the loop
        # closed. Which objects a loop still holds then, and so which
        # finalizers run before or after its close, differs for reasons
        # that are not behaviour (asyncio's Python frames in reference
        # cycles, the order a loop drops its queues in). From then on only
        # crashes, canary violations and what a closed loop does are
        # compared; the rest is kept in notes["ending"].
        self.ending = False

    # -- recording

    # Whether a record is a finalizer's or a late one is a matter of the
    # thread that makes it: a trap in a file call's arguments runs in
    # asyncio's executor thread, a finalizer in the thread whose collection
    # freed its object, while the loop's thread goes on recording the
    # program's steps. A depth shared by the threads made the loop thread's
    # records late whenever a worker was inside such a trap (files program
    # 12 of found9, on 3.14: its "step" mark among the late records).

    @property
    def finalizing(self):
        """How many finalizers (or what they made) this thread is inside."""
        return getattr(self.depths, "finalizing", 0)

    @finalizing.setter
    def finalizing(self, depth):
        self.depths.finalizing = depth

    @property
    def lateness(self):
        """How many traps whose calls may come at any time this thread is
        inside."""
        return getattr(self.depths, "lateness", 0)

    @lateness.setter
    def lateness(self, depth):
        self.depths.lateness = depth

    @property
    def late_key(self):
        """The key of the innermost such trap this thread is inside (its
        `_late`): what flush_late's `compared` is asked about."""
        return getattr(self.depths, "late_key", None)

    @late_key.setter
    def late_key(self, key):
        self.depths.late_key = key

    def rec(self, entry):
        if self.ending and entry[0] not in ENDING_KEPT:
            self.notes.setdefault("ending", []).append(entry)
        elif self.lateness:
            self.late.append((self.late_key, entry))
        elif self.finalizing and entry[0] == "op":
            # An op a finalizer ran: that it ran is compared, not what it
            # met, which depends on when the finalizer ran (datagram seed
            # 33 on 3.11, 2 programs of 600: a trap's __del__ replaced a protocol's
            # method on a transport whose connection_lost had run; asyncio
            # freed the trap at the step's collection, after the transport
            # let its protocol go, zloopgo where the failed callback that
            # held it returned, before)
            self.notes.setdefault("op in a finalizer, not compared", []).append(entry)
            self.finalized.append(list(entry[:2]) + ["in a finalizer, not compared"])
        elif self.finalizing:
            self.finalized.append(entry)
        else:
            self.obs.append(entry)
        if self.journal is not None:
            os.write(self.journal, (json.dumps(entry, default=repr) + "\n").encode())

    def mask(self, text):
        """An exception's or a log's text without what differs between
        loops for reasons that are not behaviour (handler.mask)."""
        return handlers.mask(text)

    def flush_finalized(self):
        """What finalizers recorded since the last flush, as one entry, in
        a fixed order, and the handles they made, joined to the program's
        in a fixed order too. When CPython frees an object is the moment its
        last reference goes, and a native loop may drop a callback before or
        after its arguments, or at the end of the callback where asyncio
        drops it at cancel() or at a collection (its Python `Handle._run`
        keeps a failed callback's arguments in a reference cycle): the
        order of finalizers within a step is not compared, what they did
        is."""
        made = sorted(self.finalizer_handles, key=lambda pair: _owner_ids(pair[1]))
        self.finalizer_handles = []
        for handle, owners in made:
            self._remember(handle, owners)
        if self.finalized:
            entries = sorted(json.dumps(e, default=repr) for e in self.finalized)
            self.finalized = []
            self.rec(["finalized", [json.loads(e) for e in entries]])

    def flush_late(self, compared=lambda key: True):
        """What traps whose calls may come at any time (in another thread)
        recorded over the whole program, in a fixed order; what those
        whose key `compared` refuses recorded goes to notes["late, not
        compared"] (files: a trap in a call that was cancelled or timed
        out runs, or not, as fast as a worker came to the call)."""
        late, self.late = self.late, []
        for key, entry in late:
            if not compared(key):
                self.notes.setdefault("late, not compared", []).append(entry)
        entries = sorted(json.dumps(e, default=repr) for key, e in late if compared(key))
        if entries:
            self.rec(["late", [json.loads(e) for e in entries]])

    def unraisable(self, u):
        entry = ["unraisable", type(u.exc_value).__name__, self.mask(u.exc_value)]
        if vocab.raised_by_finalizer(u):
            self.finalized.append(entry)  # a finalizer's exception, at its moment
        else:
            self.rec(entry)

    # Whether check_canary ends a step: a machine whose steps are run by a
    # differential test's own run_program (pipes, sock_ops), which ends each
    # step at the canary's check with no end_step, collects there first, as
    # end_step does (pipes seed 26 program 56, sockops seed 30: a callback
    # that raised stayed alive on asyncio through the cycle of
    # Handle._run's frame, its __del__ a step later than on zloopgo)
    steps_end_at_canary = False

    def check_canary(self):
        if self.steps_end_at_canary:
            self.collect_step()
        self.flush_finalized()
        for kind, what in self.canary.check():
            self.rec(["canary", kind, what])

    def fill_canary(self):
        self.canary.fill()

    # -- what actions ask of the host

    def handle_ref(self, ref, trap):
        """The handle a trap's ref names, or None."""
        if ref == "self":
            owner = getattr(trap, "owner", None)
            return None if owner is None else self.handles[owner]  # None: dropped
        if not self.handles:
            return None
        if ref == "last":
            return self.handles[-1]
        return self.handles[ref % len(self.handles)]

    def add_handle(self, handle, *owners):
        """Remembers handle (by the next index) and tells its traps; its
        index, or None for a handle a finalizer made, which joins the
        program's handles at the step's end (flush_finalized): where in
        the step the finalizer ran is not compared, so the index it would
        take, and which handle is the last, must not depend on it (handles
        seed 21 program 231: on zloopgo a failed callback's argument is
        freed when the callback returns, and its __del__'s call_soon made
        the handle the program then ran as the last one)."""
        if self.finalizing:
            self.finalizer_handles.append((handle, owners))
            return None
        return self._remember(handle, owners)

    def _remember(self, handle, owners):
        self.handles.append(handle)
        for obj in owners:
            if isinstance(obj, vocab._TrapBase):
                obj.owner = len(self.handles) - 1
        return len(self.handles) - 1

    def where(self):
        """A name for what the program makes outside any trap."""
        self.made += 1
        return f"step{self.step}.{self.made}"

    def anon_trap(self, actions, name=None):
        return vocab.Trap(self, ["trap", name or self.where(), {"__call__": actions}, {}])

    def schedule_actions(self, kind, actions, name):
        cb = self.anon_trap(actions, name)
        h = self.loop.call_soon(cb) if kind == "soon" else self.loop.call_later(0, cb)
        self.add_handle(h, cb)

    def schedule_callback(self, spec):
        """loop.call_soon(a hostile callback, vocab) as a program step."""
        cb, args = vocab.make_callback(self, spec)
        self.add_handle(self.loop.call_soon(cb, *args), cb, *args)

    def spare_fd(self):
        """A descriptor a trap's fileno() returns: a pipe's read end that
        nothing writes to."""
        if self.spare is None:
            self.spare = os.pipe()
        return self.spare[0]

    def run_op(self, op):
        raise NotImplementedError

    # -- running

    def run_once(self):
        """One loop iteration; an exception that escapes the loop
        (KeyboardInterrupt out of a callback) is recorded."""
        self.loop.stop()
        try:
            self.loop.run_forever()
        except BaseException as exc:  # noqa: BLE001 - the exception is the outcome
            self.rec(["escaped", type(exc).__name__, self.mask(exc)])

    def run_until(self, awaitable):
        """loop.run_until_complete(awaitable), gone on with when a trap's
        stop() or KeyboardInterrupt ends it early (each recorded)."""
        import asyncio

        task = asyncio.ensure_future(awaitable, loop=self.loop)
        while True:
            try:
                return self.loop.run_until_complete(task)
            except RuntimeError as exc:
                if task.done() or "stopped before Future completed" not in str(exc):
                    raise
                self.rec(["stopped early"])
            except (KeyboardInterrupt, SystemExit) as exc:
                if task.done():
                    raise
                self.rec(["escaped", type(exc).__name__, self.mask(exc)])

    def end_step(self):
        """After a step: settle, collect (asyncio's Python frames keep what
        a callback's exception saw alive in reference cycles, a native
        loop's C frames do not: what finalizers do is compared step by
        step, whenever in the step they ran), settle again, and record
        what finalizers did and what the canary saw."""
        self.settle()
        self.collect_step()
        self.settle()
        self.check_canary()

    def collect_step(self):
        """Collects what the step made: the youngest generation (the
        collector is off during a program, so nothing made since the last
        collection has moved on), unless the program collected every
        generation in the step, which moved what it made then to the
        oldest (handles seed 23 program 209 on 3.14: asyncio's reference
        cycle through a failed callback's frame, made before a trap's
        collection, held the argument past the step's end). A full
        collection costs more in a worker that imported a test module and
        pytest with it. Finished frames let go of their locals first
        (release_finished_frames)."""
        release_finished_frames()
        if self.collected_fully:
            gc.collect()
        else:
            gc.collect(0)
        self.collected_fully = False

    def collect(self):
        """A program's gc.collect() (a step's or a trap's action)."""
        self.collected_fully = True
        gc.collect()

    def settle(self, quiet=QUIET):
        """Runs iterations until nothing was recorded for `quiet` in a row,
        filling the canary after each (a close the loop made may have
        freed a number)."""
        still = 0
        for _ in range(MAX_ITERATIONS):
            seen = len(self.obs)
            self.run_once()
            self.fill_canary()
            still = still + 1 if len(self.obs) == seen else 0
            if still >= quiet:
                return
        self.rec(["unsettled"])

    def make_loop(self):
        return factory_for(self.loop_name)()

    def start(self):
        self.loop = self.make_loop()
        self.loop.set_debug(bool(self.p.get("debug")))
        self.loop.slow_callback_duration = 1e9
        mode = self.p.get("handler", "custom")
        self.probe = handlers.HandlerProbe(
            self.loop, self.rec, mode, message=self.mask, skip=self.skip_log
        )
        self.canary = canaries.Watched(self.p.get("canary", canaries.KINDS))
        self.fill_canary()

    def finish(self):
        """Closes the loop, then fills the canary over what it freed."""
        if not self.loop.is_closed():
            self.loop.close()
        self.step = "closed"
        self.rec(["loop closed"])
        self.fill_canary()
        self.after_close()
        gc.collect()
        self.check_canary()

    def after_close(self):
        """What a program may still do with a closed loop: each must raise
        asyncio's RuntimeError and reach no descriptor."""
        for name in ("call_soon", "call_soon_threadsafe"):
            try:
                getattr(self.loop, name)(self.anon_trap([]))
                self.rec(["closed", name, "returned"])
            except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from a nested run too
                self.rec(["closed", name, type(exc).__name__, self.mask(exc)])

    def execute(self):
        """Runs the program (the machine's `program()`), with the records
        and hooks of every machine around it; returns (obs, notes)."""
        saved_hook = sys.unraisablehook
        sys.unraisablehook = self.unraisable
        gc.disable()
        try:
            with handlers.LogProbe(self.rec, self.skip_log, self.mask):
                self.start()
                try:
                    self.program()
                    self.step = "end"
                    self.rec(["end"])
                    self.final()
                    self.ending = True
                    self.teardown()
                    self.end_step()
                finally:
                    self.ending = True
                    self.finish()
        except BaseException:  # noqa: BLE001 - the harness's own failure is an observation
            self.rec(["harness error", traceback.format_exc(limit=6).splitlines()[-1]])
            self.notes["traceback"] = traceback.format_exc()
        finally:
            sys.unraisablehook = saved_hook
            if self.canary is not None:
                self.canary.close()
            if self.spare is not None:
                for fd in self.spare:
                    os.close(fd)
            self.close_resources()
            gc.enable()
            gc.collect()
        return self.obs, self.notes

    @staticmethod
    def skip_log(text):
        """asyncio's records that are timing, not behaviour."""
        return any(s in text for s in ("took", "Using selector", "Executing", "poll", "Close <"))

    def program(self):
        raise NotImplementedError

    def run_ops(self, ops):
        """A "call" step's callback, which a trap may run again nested: it
        spends the actions' budget too."""
        self.budget -= len(ops)
        if self.budget < 0:
            return
        for op in ops:
            self.run_op(op)

    def run_callback_steps(self):
        """program() of a machine whose steps are a callback made from a
        spec ("soon"), a batch of ops run in one callback ("call"), or one
        op run at once; each step is followed by end_step() and the
        machine's state()."""
        for i, step in enumerate(self.p["steps"]):
            self.step = i
            self.rec(["step", i])
            if step[0] == "soon":
                cb, args = vocab.make_callback(self, step[1])
                self.add_handle(self.loop.call_soon(cb, *args), cb, *args)
                del cb, args
            elif step[0] == "call":
                self.add_handle(self.loop.call_soon(self.run_ops, step[1]))
            else:
                self.run_op(step)
            self.end_step()
            self.state()

    def final(self):
        """The machine's last compared observations (files: every task's
        outcome and every file's bytes)."""

    def teardown(self):
        """Cancels every handle the program knows (in debug mode cancel()
        takes the handle's repr, which a trap may make raise)."""
        for h in self.handles:
            if h is not None:
                try:
                    h.cancel()
                except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from a nested run too
                    self.rec(["teardown cancel", type(exc).__name__, self.mask(exc)])

    def close_resources(self):
        """The machine's objects left open (after the loop closed)."""


# code whose frame a clear() would close (a suspended generator's, on
# CPython before 3.13) rather than refuse
_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def release_finished_frames():
    """Clears the locals of every frame object whose call has returned.
    Such a frame lives on where a traceback, or the f_back of a frame a
    traceback holds, keeps it (3.11+ gives a caller its frame object and
    links it as f_back when a frame that has one returns), and it holds
    whatever its locals held: the harness's, a trap's, and asyncio's own
    Python methods', which zloopgo's native methods do not have. A frame
    is no behaviour of a loop; with its locals cleared, when an object is
    finalized no longer depends on it (natives seed 40: an AttributeError
    that a stream transport's `_read_ready__get_buffer` passed to
    `_fatal_error`, waiting in the other loop's queue for
    `connection_lost`, held on asyncio the Python frame of that method,
    through f_back a trap's `__len__` and asyncio's TLS `write` frame
    with the bytes subclass it was writing, to the program's end; on
    zloopgo the native method's exception has one `<native>` frame, with
    no caller, and the bytes' `__del__` ran in the step). Executing
    frames (any thread's stack) refuse clear() and are left as they
    are."""
    for obj in gc.get_objects():
        if type(obj) is types.FrameType and not obj.f_code.co_flags & _SUSPENDABLE:
            with contextlib.suppress(RuntimeError):
                obj.clear()


def _owner_ids(owners):
    """A handle's traps' names: the order handles made by finalizers join
    the program's in (stable for those whose traps share names)."""
    return [str(obj._id) for obj in owners if isinstance(obj, vocab._TrapBase)]


# With $ZL_HOSTILE_COMPANION set (CPython 3.14+): while the worker runs
# programs, a thread runs rounds of this program in an isolated interpreter
# of its own, on a loop of the worker's kind: a TCP stream of checksummed
# data with a collection on nearly every allocation. On zloopgo two module
# objects are then alive, in two interpreters with their own GILs; a round
# that does not get its data back whole ends the worker (a crash, which
# the pair reports).
COMPANION = """
import asyncio, gc, hashlib, random, sys, zloopgo
gc.set_threshold(1)
async def main():
    rng = random.Random(ROUND)
    async def echo(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(40):
        chunk = rng.randbytes(rng.randint(1, 30000))
        writer.write(chunk)
        if await reader.readexactly(len(chunk)) != chunk:
            raise AssertionError("the companion's stream came back changed")
    writer.close()
    server.close()
    await server.wait_closed()
loop = LOOP
try:
    loop.run_until_complete(main())
finally:
    loop.close()
"""


def start_companion(loop_name):
    """The companion thread (above), or None; stop() ends it after its round."""
    import threading

    if not os.environ.get("ZL_HOSTILE_COMPANION"):
        return None
    from concurrent import interpreters

    make = {"asyncio": "asyncio.SelectorEventLoop()", "zloopgo": "zloopgo.new_event_loop()"}
    stop = threading.Event()

    def rounds():
        interp = interpreters.create()
        try:
            n = 0
            while not stop.is_set():
                program = COMPANION.replace("LOOP", make[loop_name]).replace("ROUND", str(n))
                interp.exec(program)
                n += 1
        except BaseException:  # noqa: BLE001 - any failure of the companion ends the worker
            traceback.print_exc()
            os._exit(3)
        finally:
            interp.close()

    thread = threading.Thread(target=rounds, name="companion interpreter")
    thread.start()
    thread.stop = lambda: (stop.set(), thread.join())
    return thread


def worker_main(loop_name):
    """Reads one program per line on stdin, answers one JSON line each (on
    the descriptor stdout had: stray prints go to stderr); observations
    are journaled to $ZL_HOSTILE_JOURNAL as they are made. With
    $ZL_HOSTILE_COMPANION, a companion interpreter runs beside them
    (start_companion)."""
    import faulthandler
    import time

    from . import machines

    faulthandler.enable()
    companion = start_companion(loop_name)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    path = os.environ.get("ZL_HOSTILE_JOURNAL")
    journal = os.open(path, os.O_WRONLY | os.O_APPEND) if path else None
    for line in sys.stdin:
        program = json.loads(line)
        if journal is not None:
            os.ftruncate(journal, 0)
        start = time.perf_counter()
        obs, notes = machines.run(program, loop_name, journal)
        notes["seconds"] = time.perf_counter() - start
        out.write(json.dumps({"obs": obs, "notes": notes}, default=repr) + "\n")
    if companion is not None:
        companion.stop()
