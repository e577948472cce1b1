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
"""

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The worker imports the zloopgo its interpreter has installed (--python may
# be another checkout's venv): never one found through the current
# directory, which `python -c` puts first on sys.path.
BOOT = (
    "import sys; sys.path[0] = sys.argv[1]; "
    "from transport_diff.runner import worker_main; worker_main(sys.argv[2])"
)
TIMEOUT = float(os.environ.get("ZL_DIFF_TIMEOUT", "30"))


class Worker:
    """One persistent worker process running programs on loop `loop_name`."""

    def __init__(self, loop_name, python=None, timeout=TIMEOUT):
        self.loop_name = loop_name
        self.python = python or sys.executable
        self.timeout = timeout
        self.proc = None
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.restarts = 0

    def start(self):
        env = dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONHASHSEED="0")
        fd = os.open(f"/proc/self/fd/{self.stderr.fileno()}", os.O_WRONLY | os.O_APPEND)
        try:
            self.proc = subprocess.Popen(
                [self.python, "-c", BOOT, TESTS, self.loop_name],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=fd,
                env=env,
            )
        finally:
            os.close(fd)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.pending = b""

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None

    def close(self):
        self.stop()
        self.stderr.close()

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
        self.deadline = time.monotonic() + self.timeout
        try:
            self.proc.stdin.write(json.dumps(program).encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: receive() reports how

    def stderr_tail(self, lines=30):
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def receive(self):
        """The answer to the last program sent: {"obs": [...], "notes": {...}}."""
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while b"\n" not in self.pending:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    tail = self.stderr_tail()
                    self.restart()
                    return {"obs": [["hang", self.timeout]], "notes": {"stderr": tail}}
                if not sel.select(left):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    code = self.proc.wait()
                    tail = self.stderr_tail()
                    how = f"signal {-code}" if code < 0 else f"exit {code}"
                    self.restart()
                    return {"obs": [["crash", how]], "notes": {"stderr": tail}}
                self.pending += chunk
        finally:
            sel.close()
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)


class Pair:
    """The reference loop and the loop under test, one worker each."""

    def __init__(self, reference="asyncio", other="zloopgo", python=None, timeout=TIMEOUT):
        self.names = (reference, other)
        self.workers = (Worker(reference, python, timeout), Worker(other, python, timeout))

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
