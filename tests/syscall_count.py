"""How many of some system calls a Python program makes, all threads
together: the program runs in a fresh interpreter under `strace -f -c`,
with the folder of the zloopgo imported here on PYTHONPATH (helpers'
ZLOOPGO_HOME) and none of the inherited PYTHON* or GO*
variables. Used by the tests that count calls per operation
(test_waits_per_round_trip.py, test_getpid_per_task.py).

It knows strace's summary; nothing of loops."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import ZLOOPGO_HOME


def count(script, args, calls, out):
    """Runs `script` (a file) with `args`, tracing `calls`; strace's
    summary goes to `out`. Returns the calls' total, or None when strace
    reported none of them."""
    strace = shutil.which("strace")
    assert strace, "needs strace on PATH (scripts/test installs it with apt-get)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GO"))}
    env["PYTHONPATH"] = str(ZLOOPGO_HOME)
    proc = subprocess.run(
        [strace, "-f", "-c", "-o", str(out), "-e", "trace=" + ",".join(calls)]
        + [sys.executable, str(script)]
        + [str(a) for a in args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # strace -c's last line: "% time, seconds, usecs/call, calls[, errors] total"
    lines = [line.split() for line in Path(out).read_text().splitlines()]
    totals = [cells[3] for cells in lines if len(cells) >= 5 and cells[-1] == "total"]
    if not totals:
        return None
    assert len(totals) == 1 and totals[0].isdigit(), Path(out).read_text()
    return int(totals[0])
