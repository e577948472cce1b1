"""probes/callcount.py: a module run under it has its Python functions and
the C functions it calls counted by name, written when the process ends
by os._exit (the application servers' way) or normally, and read back
with a total. Runs a small module in a child interpreter."""

import os
import subprocess
import sys

from .. import callcount

SCRIPTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODULE = """\
import os
import sys


def tick():
    return len("abc")


for _ in range(3):
    tick()
if sys.argv[1:] == ["--exit"]:
    os._exit(0)
"""


def _run(tmp_path, *args):
    (tmp_path / "counted.py").write_text(MODULE)
    out = tmp_path / "calls.out"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "probes.callcount",
            str(out),
            sys.executable,
            "-m",
            "counted",
            *args,
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SCRIPTS},
        check=True,
        timeout=60,
    )
    return callcount.read(str(out))


def test_calls_are_counted_by_name_when_the_process_ends_by_os_exit(tmp_path):
    got = _run(tmp_path, "--exit")
    tick = [name for name in got if name.endswith("counted.py:5 tick")]
    assert tick and got[tick[0]] == 3
    assert got["c builtins len on module"] == 3
    assert got["total"] == sum(v for k, v in got.items() if k != "total")


def test_a_normal_exit_writes_them_too(tmp_path):
    got = _run(tmp_path)
    assert got["c builtins len on module"] == 3


def test_an_empty_or_missing_file_is_no_result(tmp_path):
    assert callcount.read(str(tmp_path / "missing.out")) is None
    (tmp_path / "empty.out").write_text("")
    assert callcount.read(str(tmp_path / "empty.out")) is None
