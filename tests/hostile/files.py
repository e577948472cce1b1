"""The files machine: zloopgo.open() on a zloopgo loop (io's classes over
capi/files.c's workers) against zloopgo.open() on asyncio's loop (open()'s
own object, each call in the default executor: what tests/test_files_diff.py
compares with open() in a thread), in binary and text modes, with
argument values at every limit (negative sizes and offsets, traps whose
__index__ records or raises), cancellation and timeouts at every await,
a worker held busy, closes, and the canary.

Both loops get the same number of workers: file_workers(n) on zloopgo, a
ThreadPoolExecutor(n) as asyncio's default executor. The *blocker* is an
open of a FIFO with no writer: it holds one worker (zloopgo's, or
asyncio's executor thread) until the program unblocks it, so that what is
queued behind it waits, and a call cancelled then is cancelled while its
operation waits for a worker.

On Windows zloopgo's files are native too (capi/files_windows.c, n
file workers), and the blocker is a call in the default executor that
waits for an event the program sets (Windows has no FIFO, and no open()
there blocks): it holds asyncio's executor thread, not a file worker of
zloopgo's, so only asyncio's queued calls wait behind it there.

A program (JSON):

    {"machine": "files", "handler": mode, "canary": [kind, ...],
     "workers": 1 | 2,
     "files": [{"mode": m, "buffering": n, "encoding": e, "newline": nl,
                "size": initial bytes}, ...],
     "steps": [step, ...]}

Steps:
    ["call", task, f, method, args]    a task calls file f's method; the
                                        step waits (boundedly) for it
    ["start", task, f, method, args]   the same, without waiting
    ["timeout", task, f, method, args, seconds]   asyncio.wait_for(...)
    ["cancel", task, iterations]        cancel task after that many loop
                                        iterations
    ["block"]  ["unblock"]
    ["soon", callback]                  a hostile callback (vocab), whose
                                        ["op", ...] actions are "start"
                                        and "cancel" steps
Args: ints, strings, bytes (as ["bytes", n] or ["text", s]), buffers for
readinto (["buf", n]), traps (vocab) whose __index__ records, or raises.

Observations: the exception handler's calls, the canary after every
step, and at the end of the program each task's outcome (reads by length
and digest, exceptions by type and message) in task order, and each
file's bytes. Which tasks finish within a step is not compared: while a
worker is held, zloopgo reads cached pages without one and the executor
cannot. Nor is what a cancelled or timed-out call did, or anything after
it on its file: a cancelled read on zloopgo is undone where the
executor's finishes in its thread (docs/files.md, "Cancellation"), and a
call that completes without waiting on zloopgo may time out in the
executor. From the step that cancels a task, or times one out, that task
and every later task on its file record only "after a cancel", and that
file's bytes are not compared. Every other task's outcome and file's bytes are.
"""

import asyncio
import concurrent.futures
import errno
import hashlib
import os
import shutil
import sys
import tempfile
import threading

from . import canary as canaries
from . import handler as handlers
from . import vocab
from .host import Host

BUF = 64
BIN_MODES = ["rb", "r+b", "wb", "w+b", "ab", "a+b"]
TEXT_MODES = ["r", "r+", "w", "w+", "a", "a+"]
SIZES = [-1, 0, 1, 7, BUF - 1, BUF, BUF + 1, 3 * BUF, 1 << 20]
OFFSETS = [0, 3, BUF, 5 * BUF, -1, -5, 1 << 63]
# (method, weight); args drawn by _args
BIN_OPS = (
    ("read", 8),
    ("read1", 2),
    ("readline", 3),
    ("readlines", 2),
    ("readinto", 2),
    ("peek", 1),
    ("write", 6),
    ("writelines", 1),
    ("seek", 5),
    ("tell", 3),
    ("truncate", 2),
    ("flush", 2),
    ("pread", 3),
    ("pwrite", 3),
    ("close", 2),
)
TEXT_OPS = (
    ("read", 6),
    ("readline", 4),
    ("readlines", 3),
    ("write", 6),
    ("writelines", 1),
    ("seek", 4),
    ("tell", 4),
    ("truncate", 3),
    ("flush", 2),
    ("peek", 1),
    ("readinto", 1),
    ("read1", 1),
    ("close", 2),
)
TEXT_CHARS = "ab\n\r é中😀"
ENCODINGS = ["utf-8", "utf-16", "latin-1"]
# Traps in arguments are called in the executor's thread on asyncio: they
# record and may raise, but touch no loop.
ARG_ACTIONS = {"cancel": 0, "run": 0, "soon": 0, "later": 0, "stop": 0, "op": 0}
WINDOWS = sys.platform == "win32"


def _weighted(rng, table):
    return rng.choice([n for n, w in table for _ in range(w)])


class _Gen:
    def __init__(self, rng, files):
        self.rng = rng
        self.files = files
        self.tasks = 0
        self.vocab = vocab.Vocab(self.op, handles=False, weights={"op": 8})
        self.arg_vocab = vocab.Vocab(None, handles=False, weights=ARG_ACTIONS, interrupts=False)

    def size(self):
        if self.rng.randrange(10) == 0:
            return vocab.gen_trap(self.rng, self.arg_vocab, ["__index__"])
        return self.rng.choice(SIZES)

    def offset(self):
        if self.rng.randrange(10) == 0:
            return vocab.gen_trap(self.rng, self.arg_vocab, ["__index__"])
        return self.rng.choice(OFFSETS)

    def data(self, text):
        n = self.rng.choice([0, 1, 5, BUF - 1, BUF + 1, 3 * BUF])
        if text:
            return ["text", "".join(self.rng.choice(TEXT_CHARS) for _ in range(min(n, 40)))]
        return ["bytes", n]

    def args(self, f, method):
        rng = self.rng
        text = "b" not in self.files[f]["mode"]
        if method in ("read", "read1", "readline", "peek"):
            return [] if rng.randrange(4) == 0 else [self.size()]
        if method == "readlines":
            return [] if rng.randrange(3) == 0 else [rng.choice([-1, 0, 1, 10, BUF])]
        if method == "readinto":
            return [["buf", rng.choice([0, 5, BUF, 2 * BUF + 3])]]
        if method == "write":
            return [self.data(text)]
        if method == "writelines":
            return [["lines", [self.data(text) for _ in range(rng.randint(0, 3))]]]
        if method == "seek":
            if text:  # a text file seeks to 0 or a cookie tell() gave; and to its end
                return rng.choice([[0], [0, 0], [0, 1], [0, 2], [5, 1], [-1, 2], [3]])
            return [self.offset()] + ([] if rng.randrange(2) else [rng.choice([0, 1, 2, 3])])
        if method == "truncate":
            return [] if rng.randrange(2) else [rng.choice([0, 7, BUF, 4 * BUF, -1])]
        if method == "pread":
            return [self.size(), self.offset()]
        if method == "pwrite":
            return [self.data(False), self.offset()]
        return []

    def call(self, depth=0):
        rng = self.rng
        f = rng.randrange(len(self.files))
        text = "b" not in self.files[f]["mode"]
        method = _weighted(rng, TEXT_OPS if text else BIN_OPS)
        self.tasks += 1
        return [self.tasks - 1, f, method, self.args(f, method)]

    def op(self, rng, depth):
        """What a hostile callback's ["op", ...] action does: start a call,
        or cancel a task."""
        if self.tasks and rng.randrange(3) == 0:
            return ["cancel", rng.randrange(self.tasks), 0]
        return ["start"] + self.call(depth)

    def held_close(self):
        """An episode: a worker held, a call queued behind it and
        cancelled, the file closed, the worker let go (what a call
        cancelled while its operation waits for a worker must not do to
        the number the file had once it is closed)."""
        rng = self.rng
        f = rng.randrange(len(self.files))
        text = "b" not in self.files[f]["mode"]
        method = rng.choice(["seek", "seek", "read", "tell", "flush", "write", "truncate"])
        args = [0, 2] if method == "seek" else self.args(f, method)
        if text and method == "seek":
            args = [0, 2]
        first = self.tasks
        self.tasks += 2
        return [
            ["block"],
            ["start", first, f, method, args],
            ["cancel", first, rng.choice([0, 1])],
            ["start", first + 1, f, "close", []],
            ["unblock"],
        ]

    def step(self, blocked):
        rng = self.rng
        pick = rng.randrange(20)
        if pick < 9:
            return ["start" if blocked else "call"] + self.call()
        if pick < 11:
            return ["start"] + self.call()
        if pick < 13:
            return ["timeout"] + self.call() + [rng.choice([0, 0.0001, 0.001])]
        if pick < 15 and self.tasks:
            return ["cancel", rng.randrange(self.tasks), rng.choice([0, 0, 1, 2])]
        if pick < 17:
            return ["unblock"] if blocked else ["block"]
        if pick < 18:
            return ["soon", vocab.gen_callback(rng, self.vocab)]
        return ["start" if blocked else "call"] + self.call()


def generate(rng):
    files = []
    for _ in range(rng.randint(1, 3)):
        text = rng.randrange(3) == 0
        spec = {
            "mode": rng.choice(TEXT_MODES if text else BIN_MODES),
            "buffering": rng.choice([BUF, BUF, -1]),
            "size": rng.choice([0, 1, BUF - 1, BUF, 3 * BUF + 5]),
        }
        if text:
            spec["encoding"] = rng.choice(ENCODINGS)
            spec["newline"] = rng.choice([None, "", "\n", "\r\n"])
        files.append(spec)
    g = _Gen(rng, files)
    steps, blocked = [], False
    for _ in range(rng.randint(1, 14)):
        if not blocked and rng.randrange(10) == 0:
            steps += g.held_close()
            continue
        step = g.step(blocked)
        if step[0] in ("block", "unblock"):
            blocked = step[0] == "block"
        steps.append(step)
        if (
            sys.version_info < (3, 13)
            and step[0] in ("call", "start")
            and step[3] in ("write", "writelines")
            and "b" not in files[step[2]]["mode"]
            and "+" in files[step[2]]["mode"]
        ):
            # Before 3.13 open()'s TextIOWrapper keeps text written before a
            # read and writes it later where the read left the position
            # (fixed in 3.13; zloopgo writes it where it was made,
            # docs/files.md): a flush after each write, as in
            # tests/test_files_diff.py
            g.tasks += 1
            steps.append([step[0], g.tasks - 1, step[2], "flush", []])
    return {
        "machine": "files",
        "handler": rng.choice(handlers.MODES),
        "canary": canaries.draw_order(rng),
        "workers": rng.choice([1, 1, 2]),
        "files": files,
        "steps": steps,
    }


def _data(n, seed=1):
    return bytes((i * 7 + seed * 13 + (i >> 5)) % 251 for i in range(n))


def digest(data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
        return ["str", len(data), hashlib.sha1(data).hexdigest()[:8]]
    data = bytes(data)
    return ["bytes", len(data), hashlib.sha1(data).hexdigest()[:8]]


class FilesHost(Host):
    @staticmethod
    def skip_log(text):
        # On 3.14+ asyncio.shield reports the error of a shielded future
        # whose outer one was cancelled: the executor path's cancelled call
        # that failed (zloopgo's ExecutorFile shields its executor future),
        # where the native file drops it (docs/files.md, "Cancellation").
        # Not the loop's behaviour: what a cancelled call did is not compared.
        return Host.skip_log(text) or "exception in shielded future" in text

    def start(self):
        import zloopgo

        self.zloopgo = zloopgo
        super().start()
        workers = self.p.get("workers", 1)
        if self.loop_name == "zloopgo":
            from zloopgo import _engine

            _engine.file_workers(workers)
        self.executor = concurrent.futures.ThreadPoolExecutor(workers)
        self.loop.set_default_executor(self.executor)
        self.dir = tempfile.mkdtemp(prefix="hostile-files")
        if WINDOWS:
            self.release = threading.Event()  # what the blocker waits for
        else:
            self.fifo = os.path.join(self.dir, "fifo")
            os.mkfifo(self.fifo)
        self.blocker = None
        self.tasks = {}  # task number -> (asyncio task, file index)
        # file -> the first task whose call was cancelled or timed out:
        # what it and the later calls on the file do is not compared
        self.cancelled_from = {}
        self.objects = []
        for i, spec in enumerate(self.p["files"]):
            path = os.path.join(self.dir, f"f{i}")
            with open(path, "wb") as f:
                f.write(_data(spec["size"], i + 1))
            self.objects.append(self.open_file(path, spec))

    def open_file(self, path, spec):
        args = [spec["mode"], spec["buffering"]]
        if "b" not in spec["mode"]:
            args += [spec.get("encoding"), "replace", spec.get("newline")]

        async def opening():
            return await self.zloopgo.open(path, *args)

        try:
            return self.run_until(opening())
        except Exception as exc:  # noqa: BLE001 - the exception is the outcome
            self.rec(["open", type(exc).__name__, self.mask(exc)])
            return None

    # -- values

    def value(self, arg, text, number):
        if isinstance(arg, list) and arg:
            if arg[0] == "bytes":
                return _data(arg[1], 7)
            if arg[0] == "text":
                return arg[1]
            if arg[0] == "buf":
                return bytearray(arg[1])
            if arg[0] == "lines":
                return [self.value(a, text, number) for a in arg[1]]
            obj = vocab.make_value(self, arg)
            # the executor path converts arguments in its thread, when the
            # call's turn comes: when a trap runs is not compared, and
            # whether it runs at all only for a call that was not cancelled
            # nor timed out (a cancelled call's turn may never come)
            obj._late = number
            return obj
        return arg

    def outcome(self, method, args, result):
        if method in ("readinto", "readinto1"):
            return ["ok", result, digest(args[0])]
        if isinstance(result, (bytes, bytearray, memoryview, str)):
            return ["ok", digest(result)]
        if isinstance(result, list):
            return ["ok", [digest(x) for x in result]]
        return ["ok", result if isinstance(result, (int, bool, type(None))) else repr(result)]

    # -- steps

    def start_call(self, number, f, method, args, timeout=None):
        obj = self.objects[f]
        text = "b" not in self.p["files"][f]["mode"]
        values = [self.value(a, text, number) for a in args]

        async def call():
            if obj is None:
                return ["not open"]
            try:
                bound = getattr(obj, method)
                if method in ("fileno", "readable", "writable", "seekable"):
                    result = bound(*values)
                elif timeout is None:
                    result = await bound(*values)
                else:
                    result = await asyncio.wait_for(bound(*values), timeout)
            except Exception as exc:  # noqa: BLE001 - the exception is the outcome
                return [type(exc).__name__, self.mask(exc)]
            finally:
                if method == "close":
                    # the number the file had is free: canaries take it now,
                    # before anything queued for it runs
                    self.fill_canary()
            return self.outcome(method, values, result)

        task = self.loop.create_task(call())
        self.tasks[number] = (task, f)
        if timeout is not None:
            self.cancelled_from.setdefault(f, number)

    def report(self):
        """Every task's outcome, in task order (see the module's docstring
        for those after a cancel)."""
        done = []
        for number in sorted(self.tasks):
            task = self.tasks[number][0]
            if not task.done():
                outcome = ["pending"]
            elif task.cancelled():
                outcome = ["cancelled"]
            elif task.exception() is not None:
                exc = task.exception()
                timed_out = isinstance(exc, asyncio.TimeoutError)
                outcome = ["timeout" if timed_out else type(exc).__name__]
            else:
                outcome = task.result()
            if not self.compared(number):
                # what it returns depends on whether the cancelled call's
                # operation had run, and whether a call timed out on when
                # a worker came to it: not compared
                outcome = ["after a cancel"]
            done.append([number, outcome])
        self.rec(["done", done])

    def compared(self, number):
        """Whether what task `number` did is compared: not from the first
        task on its file that was cancelled or timed out."""
        first = self.cancelled_from.get(self.tasks[number][1])
        return first is None or number < first

    def wait(self, quiet_rounds=5):
        """Runs the loop until no task is left but those waiting for a
        held worker: nothing finished for quiet_rounds rounds of 2 ms."""
        still, last = 0, None
        for _ in range(1000):
            self.run_until(asyncio.sleep(0.002))
            self.fill_canary()
            pending = sum(1 for t, _ in self.tasks.values() if not t.done())
            state = (pending, len(self.obs))
            if pending == 0 and not self.blocker_pending():
                break
            still = still + 1 if state == last else 0
            last = state
            if still >= quiet_rounds:
                break

    def blocker_pending(self):
        return self.blocker is not None and not self.blocker.done()

    def block(self):
        if self.blocker is not None:
            return "already"

        if WINDOWS:
            self.release.clear()
            self.blocker = self.loop.run_in_executor(None, self.release.wait)
        else:

            async def open_fifo():
                f = await self.zloopgo.open(self.fifo, "rb")
                return f

            self.blocker = self.loop.create_task(open_fifo())
        # let it reach its worker
        for _ in range(5):
            self.run_until(asyncio.sleep(0.002))
        return "blocked"

    def unblock(self):
        if self.blocker is None:
            return "not blocked"
        if WINDOWS:
            self.release.set()
            blocker, self.blocker = self.blocker, None
            self.run_until(blocker)
            return "unblocked"
        # The blocker's worker may not have reached its open() yet (block()
        # gives it a few loop rounds, which a loaded machine can outlast):
        # until a reader has the FIFO open, a writer's non-blocking open
        # fails with ENXIO, so wait for it rather than fail the harness.
        for _ in range(5000):
            try:
                w = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:
                if e.errno != errno.ENXIO or self.blocker.done():
                    raise
            self.run_until(asyncio.sleep(0.002))
        else:
            raise TimeoutError("the blocker never opened its FIFO")
        os.close(w)
        blocker, self.blocker = self.blocker, None
        f = self.run_until(blocker)
        self.run_until(f.close())
        return "unblocked"

    def run_op(self, op):
        kind = op[0]
        if kind == "start":
            self.start_call(*op[1:5])
            self.rec(["op", "start", op[1]])
        elif kind == "cancel":
            entry = self.tasks.get(op[1])
            if entry is None:
                self.rec(["op", "cancel", op[1], "no task"])
                return
            task, f = entry
            for _ in range(op[2]):
                self.run_once()
            self.cancelled_from[f] = min(op[1], self.cancelled_from.get(f, op[1]))
            task.cancel()
            self.rec(["op", "cancel", op[1]])
        else:
            raise AssertionError(f"unknown op {op!r}")

    def program(self):
        for i, step in enumerate(self.p["steps"]):
            self.step = i
            self.rec(["step", i])
            kind = step[0]
            if kind in ("call", "start"):
                self.start_call(*step[1:5])
            elif kind == "timeout":
                self.start_call(*step[1:5], timeout=step[5])
            elif kind == "cancel":
                self.run_op(step)
            elif kind == "block":
                self.rec(["block", self.block()])
            elif kind == "unblock":
                self.rec(["unblock", self.unblock()])
            elif kind == "soon":
                cb, args = vocab.make_callback(self, step[1])
                self.add_handle(self.loop.call_soon(cb, *args), cb, *args)
                del cb, args
            self.wait()
            self.check_canary()

    def final(self):
        if self.blocker is not None:
            self.rec(["unblock", self.unblock()])
        self.wait()
        for task, _ in self.tasks.values():
            if not task.done():
                task.cancel()
        self.wait()
        self.report()
        self.flush_late(self.compared)
        for i, obj in enumerate(self.objects):
            if obj is None:
                continue
            try:
                self.run_until(obj.close())
            except Exception as exc:  # noqa: BLE001 - the exception is the outcome
                self.rec(["close", i, type(exc).__name__, self.mask(exc)])
            self.fill_canary()
        self.wait()
        for i in range(len(self.p["files"])):
            if i in self.cancelled_from:
                continue
            path = os.path.join(self.dir, f"f{i}")
            with open(path, "rb") as f:
                self.rec(["bytes", i, digest(f.read())])

    def close_resources(self):
        self.executor.shutdown(wait=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def run(program, loop_name, journal=None):
    return FilesHost(program, loop_name, journal).execute()
