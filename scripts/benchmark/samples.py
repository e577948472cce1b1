"""How every part of scripts/bench runs its samples, each in fresh
processes: the rounds (warm-up first, contenders rotated from round to
round), the contenders that import (and why the others do not), a server
started for one sample and stopped with SIGTERM to collect what it
counted, a client run with a timeout, CPU pinning, progress on stderr and
the report's files. Used by the harness (python -m benchmark), the echo
matrices (bench_uvloop/run.py) and the HTTP rows (httpbench.py).

It knows processes, ports and files; it knows nothing of what a sample
measures or how it proves its work.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

T0 = time.monotonic()


def log(msg):
    """Progress on stderr, with the seconds since this process started."""
    print(f"[{time.monotonic() - T0:6.0f} s] {msg}", file=sys.stderr, flush=True)


def rotate(seq, k):
    """seq rotated left by k places: round k's order of the contenders."""
    if not seq:
        return seq
    k %= len(seq)
    return seq[k:] + seq[:k]


def rounds(warmup, measured):
    """The plan of a part: (label, rotation) of each warm-up round, then of
    each measured round; labels are "warm-up" and "1", "2", ..."""
    plan = [("warm-up", w) for w in range(warmup)]
    return plan + [(str(r + 1), warmup + r) for r in range(measured)]


def cpu_pair():
    """(first CPU, second CPU) this process may use, as taskset prefixes,
    or two empty prefixes with fewer than two CPUs or no taskset."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return [], []
    return ["taskset", "-c", str(cpus[0])], ["taskset", "-c", str(cpus[1])]


def free_port():
    """A loopback TCP port nothing listens on at the moment of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_line(text, n=300):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:n] if lines else ""


def installs():
    """What scripts/bench's wheel-only installs of the peers said: a JSON
    file {peer: "ok" or the reason} named by ZL_BENCH_INSTALLS, else {}."""
    path = os.environ.get("ZL_BENCH_INSTALLS", "")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def available(python, names, env=None):
    """(the names whose loop `python` makes, {absent name: why}). The why
    is the peer's install's (installs()) when that failed."""
    installed = installs()
    ok, absent = [], {}
    for name in names:
        code = "import asyncio\n" + (
            "asyncio.new_event_loop().close()"
            if name == "asyncio"
            else f"import {name}\n{name}.new_event_loop().close()"
        )
        proc = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),  # `-c` puts the cwd first on sys.path
            check=False,
        )
        why = "" if proc.returncode == 0 else last_line(proc.stderr) or f"exit {proc.returncode}"
        if why and installed.get(name, "ok") != "ok":
            why = f"not installed ({installed[name]})"
        if why:
            absent[name] = why
        else:
            ok.append(name)
    return ok, absent


def _kill_group(proc):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class Server:
    """One sample's server: a process in its own session whose output goes
    to a file; killed (with its children) if still running at the end of
    the `with` block.

        with Server(cmd, path) as srv:
            if not srv.wait_ready(lambda: ..., 15): ...
            ... run the client ...
            if not srv.finish(res, 10): ...   # it crashed or did not stop
        counted = srv.stats("ECHO-STATS ")
    """

    def __init__(self, cmd, out_path, env=None, cwd=None):
        self.cmd, self.out_path, self.env, self.cwd = cmd, out_path, env, cwd

    def __enter__(self):
        self.out = open(self.out_path, "w+b")  # closed by __exit__
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=self.env,
            cwd=self.cwd,
        )
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            _kill_group(self.proc)
        self.out.seek(0)
        self.text = self.out.read().decode(errors="replace")
        self.out.close()

    def wait_ready(self, ready, timeout):
        """True once ready() is true (it may raise OSError: not yet); False
        if the server exits first or timeout seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if ready():
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def not_ready(self, what):
        """(status, detail) of a server that never became ready."""
        self.out.flush()
        self.out.seek(0)
        tail = last_line(self.out.read().decode(errors="replace"), 200)
        status = "error" if self.proc.poll() is not None else "timeout"
        return status, f"server never {what} (rc {self.proc.poll()}): {tail}"

    def stop(self, timeout):
        """SIGTERM, then wait; None once it exited, else why not."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"server did not stop within {timeout:g} s of SIGTERM"
        return None

    def finish(self, res, timeout):
        """Stops the server once its client is done: True, or False with
        res's status and detail saying that it exited during the run or
        did not stop."""
        if self.proc.poll() is not None:
            res["status"] = "crash" if self.proc.returncode < 0 else "error"
            res["detail"] = f"server exited with {self.proc.returncode} during the run"
            return False
        why = self.stop(timeout)
        if why:
            res["status"], res["detail"] = "timeout", why
        return not why

    def stats(self, marker):
        """The JSON of the last output line starting with marker, or None."""
        found = [line for line in self.text.splitlines() if line.startswith(marker)]
        return json.loads(found[-1][len(marker) :]) if found else None


def run_client(cmd, timeout, cwd=None):
    """Runs a client in its own session: (output, exit status), or (None,
    None) if it did not finish in timeout seconds (it is killed)."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
        cwd=cwd,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None, None
    return out, proc.returncode


def write_report(out_dir, kind, tag, text, doc, stamp=None):
    """Writes out_dir/KIND-[TAG-]STAMP.md and .json; returns their base."""
    os.makedirs(out_dir, exist_ok=True)
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = os.path.join(out_dir, f"{kind}-{tag + '-' if tag else ''}{stamp}")
    with open(base + ".md", "w") as f:
        f.write(text + "\n")
    with open(base + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    return base


def versions(names):
    """{distribution: its installed version, or None}."""
    from importlib import metadata

    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git(root, *args):
    """A git command's output in root, or "unknown"."""
    try:
        return subprocess.run(
            ["git", "-C", root, *args], capture_output=True, text=True, check=True
        ).stdout.rstrip("\n")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def loadavg():
    try:
        return os.getloadavg()
    except OSError:
        return None
