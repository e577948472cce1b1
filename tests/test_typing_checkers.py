"""zloopgo's typed surface: mypy --strict and pyright (strict) accept
tests/typing/usage.py and the package's own annotations and stubs, for the
oldest and newest Python the package supports, and reject a scratch copy of
usage.py with deliberate errors (so the checkers provably check); usage.py
also runs."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USAGE = ROOT / "tests" / "typing" / "usage.py"
PACKAGE_FILES = [
    ROOT / "zloopgo" / "__init__.py",
    ROOT / "zloopgo" / "_loop.pyi",
    ROOT / "zloopgo" / "_engine.pyi",
    ROOT / "zloopgo" / "_otel.pyi",
]
# Each line is wrong in a way the annotations must catch.
DELIBERATE_ERRORS = [
    "    text: str = zloopgo.run(answer())",
    "    number: int = zloopgo.new_event_loop()",
    "    zloopgo.run(42)",
    "    zloopgo.not_a_name()",
    "    zloopgo.install(True)",
    "    policy: int = zloopgo.EventLoopPolicy()",
    "    info: list[str] = zloopgo.build_info()",
]
PYTHON_VERSIONS = ["3.10", "3.14"]


@pytest.fixture
def scratch(tmp_path):
    """usage.py plus a function made of DELIBERATE_ERRORS; returns the
    path and the line numbers the errors are on."""
    text = USAGE.read_text()
    first = text.count("\n") + 4
    text += "\n\ndef deliberate_errors() -> None:\n" + "\n".join(DELIBERATE_ERRORS) + "\n"
    path = tmp_path / "scratch_usage.py"
    path.write_text(text)
    return path, set(range(first, first + len(DELIBERATE_ERRORS)))


def flagged_lines(output, path):
    """Line numbers of errors the checker reported in `path`."""
    pattern = re.compile(re.escape(str(path)) + r":(\d+)(?::\d+)?:? -? ?error")
    return {int(m.group(1)) for m in pattern.finditer(output)}


def run_checker(args):
    proc = subprocess.run(
        [sys.executable, "-m", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "MYPYPATH": str(ROOT)},
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("version", PYTHON_VERSIONS)
def test_mypy_strict(scratch, version, tmp_path):
    path, expected = scratch
    code, out = run_checker(
        [
            "mypy",
            "--strict",
            "--python-version",
            version,
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--show-absolute-path",
            "--no-error-summary",
            str(USAGE),
            *map(str, PACKAGE_FILES),
            str(path),
        ]
    )
    assert code == 1, out
    assert flagged_lines(out, path) == expected, out
    # Nothing but the deliberate errors.
    assert all(line.startswith(str(path)) for line in out.splitlines() if line.strip()), out


@pytest.mark.parametrize("version", PYTHON_VERSIONS)
def test_pyright(scratch, version):
    path, expected = scratch
    code, out = run_checker(
        [
            "pyright",
            "--pythonpath",
            sys.executable,
            "--pythonversion",
            version,
            str(USAGE),
            *map(str, PACKAGE_FILES),
            str(path),
        ]
    )
    assert code == 1, out
    assert flagged_lines(out, path) == expected, out
    summary = re.search(r"(\d+) errors?, (\d+) warnings?", out)
    assert summary, out
    # Only errors on the deliberate lines (some lines give two).
    errors = [line for line in out.splitlines() if " - error: " in line]
    assert all(line.strip().startswith(str(path)) for line in errors), out


# CPython's own warning on a free-threaded build, when the engine's load
# turns the GIL on (docs/architecture.md, "Free-threaded builds"): not the
# program's, so let through where every other warning is an error
GIL_ENABLED = (
    "ignore:The global interpreter lock (GIL) has been enabled to load module "
    "'zloopgo._engine':RuntimeWarning"
)


def test_usage_runs():
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-W", GIL_ENABLED, str(USAGE)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "usage ok"
