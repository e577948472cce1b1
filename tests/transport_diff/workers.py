"""The worker processes that run programs, seen from the test: one
persistent process per loop (`runner.worker_main`), a program sent as one
JSON line, its observations back as one. A zloopgo bug can crash or hang
the process: a worker that dies is reported as the observation
["crash", how] and restarted, one that does not answer within the timeout
is killed and reported as ["hang", seconds]; either is then a difference
that hypothesis shrinks like any other.

A Pair runs one program on two workers at once (the machine has cores to
spare while one loop waits for the other's peer) and returns both
observation lists.

The worker's main is transport_diff's runner unless `main` names another
("module:function", called with the loop's name; tests/hostile's
machines use `hostile.host:worker_main`). With `journal`, the worker is
given a file ($ZL_HOSTILE_JOURNAL) where it writes each observation as it
is made: a crash's observation list is then what the journal holds, then
["crash", how], so the difference shows where the crash happened. `env`
adds variables (PYTHONMALLOC=debug fills freed memory, so that a use
after free crashes instead of reading stale bytes).

On Windows (under Wine: scripts/windows long-tests) a pipe cannot be
non-blocking nor selected, there is no /proc/self/fd to open the stderr
file again in append mode, and a NamedTemporaryFile cannot be opened a
second time while it is open: a thread reads the worker's output into a
queue, the worker writes its stderr through a handle that shares the
file's position with ours (rewound with each program), and the journal
is a named file this process deletes at close.
"""

import json
import os
import queue
import selectors
import subprocess
import sys
import tempfile
import threading
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The worker imports the zloopgo its interpreter has installed (--python may
# be another checkout's venv): never one found through the current
# directory, which `python -c` puts first on sys.path.
BOOT = (
    "import importlib, sys; sys.path[0] = sys.argv[1]; "
    "module, _, main = sys.argv[3].partition(':'); "
    "getattr(importlib.import_module(module), main)(sys.argv[2])"
)
RUNNER = "transport_diff.runner:worker_main"
TIMEOUT = float(os.environ.get("ZL_DIFF_TIMEOUT", "30"))
WINDOWS = sys.platform == "win32"


class Worker:
    """One persistent worker process running programs on loop `loop_name`."""

    def __init__(
        self, loop_name, python=None, timeout=TIMEOUT, main=RUNNER, env=None, journal=False
    ):
        self.loop_name = loop_name
        self.python = python or sys.executable
        self.timeout = timeout
        self.main = main
        self.env = env or {}
        self.proc = None
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.journal = None
        if journal:
            # not deleted on close on Windows: the worker opens it by name
            self.journal = tempfile.NamedTemporaryFile(prefix="journal", delete=not WINDOWS)  # noqa: SIM115
        self.restarts = 0

    def start(self):
        env = dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONHASHSEED="0", **self.env)
        if self.journal is not None:
            env["ZL_HOSTILE_JOURNAL"] = self.journal.name
        if WINDOWS:
            fd = os.dup(self.stderr.fileno())  # shares the position (see send)
        else:
            fd = os.open(f"/proc/self/fd/{self.stderr.fileno()}", os.O_WRONLY | os.O_APPEND)
        try:
            self.proc = subprocess.Popen(
                [self.python, "-c", BOOT, TESTS, self.loop_name, self.main],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=fd,
                env=env,
            )
        finally:
            os.close(fd)
        if WINDOWS:
            self.chunks = queue.Queue()
            self.reader = threading.Thread(
                target=self._read_output, args=(self.proc.stdout, self.chunks), daemon=True
            )
            self.reader.start()
        else:
            os.set_blocking(self.proc.stdout.fileno(), False)
        self.pending = b""

    @staticmethod
    def _read_output(stdout, chunks):
        """Windows: the worker's output into `chunks`, b"" at its end."""
        while True:
            try:
                chunk = stdout.read1(1 << 20)
            except (OSError, ValueError):
                chunk = b""
            chunks.put(chunk)
            if not chunk:
                return

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            if WINDOWS:
                self.reader.join()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None

    def close(self):
        self.stop()
        self.stderr.close()
        if self.journal is not None:
            self.journal.close()
            if WINDOWS:
                os.unlink(self.journal.name)

    def restart(self):
        self.stop()
        self.restarts += 1
        self.start()

    def send(self, program):
        if self.proc is None:
            self.start()
        elif self.proc.poll() is not None:
            self.restart()
        os.ftruncate(self.stderr.fileno(), 0)
        if WINDOWS:
            self.stderr.seek(0)  # the worker writes at the position we share
        self.deadline = time.monotonic() + self.timeout
        try:
            self.proc.stdin.write(json.dumps(program).encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: receive() reports how

    def journaled(self):
        """What the worker recorded of the program it was running."""
        if self.journal is None:
            return []
        with open(self.journal.name, "rb") as f:
            lines = f.read().splitlines()
        entries = []
        for line in lines:
            try:
                entries.append(json.loads(line))
            except ValueError:
                break  # a line cut short by the crash
        return entries

    def stderr_tail(self, lines=30):
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def receive(self):
        """The answer to the last program sent: {"obs": [...], "notes": {...}}."""
        sel = None
        if not WINDOWS:
            sel = selectors.DefaultSelector()
            sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while b"\n" not in self.pending:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    tail = self.stderr_tail()
                    obs = self.journaled() + [["hang", self.timeout]]
                    self.restart()
                    return {"obs": obs, "notes": {"stderr": tail}}
                if WINDOWS:
                    try:
                        chunk = self.chunks.get(timeout=left)
                    except queue.Empty:
                        continue
                elif not sel.select(left):
                    continue
                else:
                    chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    try:
                        code = self.proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
                        how = f"signal {-code}" if code < 0 else f"exit {code}"
                    except subprocess.TimeoutExpired:
                        # it closed its output but does not exit (stuck at
                        # its exit): killed by restart() below
                        how = "closed its output, did not exit"
                    tail = self.stderr_tail()
                    obs = self.journaled() + [["crash", how]]
                    self.restart()
                    return {"obs": obs, "notes": {"stderr": tail}}
                self.pending += chunk
        finally:
            if sel is not None:
                sel.close()
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)


class Pair:
    """The reference loop and the loop under test, one worker each."""

    def __init__(self, reference="asyncio", other="zloopgo", python=None, timeout=TIMEOUT, **kw):
        self.names = (reference, other)
        self.workers = tuple(Worker(name, python, timeout, **kw) for name in self.names)

    def run(self, program):
        """Both answers for `program`, reference first."""
        for w in self.workers:
            w.send(program)
        return tuple(w.receive() for w in self.workers)

    def restart(self):
        for w in self.workers:
            w.restart()

    def close(self):
        for w in self.workers:
            w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
