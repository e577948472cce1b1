"""CPython's own asyncio test modules on zloopgo, one test per module,
compared with tests/conformance/baseline-3.X.json: the socket-free modules
(test_cpython_module) and the socket/server/subprocess ones, CPython's
mixins bound to zloopgo as tests/conformance/network.py does
(test_cpython_network_module).

A module's test fails when a test outside the baseline fails (or the module
hangs), when a baseline entry now passes (so the baseline stays honest), or
when the child did not see zloopgo loops. See tests/conformance/README.md.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

CONF = Path(__file__).resolve().parent / "conformance"
_spec = importlib.util.spec_from_file_location("zloopgo_conformance_run", CONF / "run.py")
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)

# Modules in which no test runs a real loop: TestLoop throughout, or no loop.
NO_REAL_LOOP = {"test_futures", "test_protocols", "test_transports", "test_tools"}
if sys.version_info < (3, 11):
    NO_REAL_LOOP.add("test_queues")  # 3.10's uses test_utils.TestLoop throughout


def _baseline():
    path = conformance.baseline_path()
    if not path.exists():
        return {}
    return json.loads(path.read_text())["known_failures"]


BASELINE = _baseline()


@pytest.mark.parametrize(
    "module,timeout",
    [
        pytest.param(name, timeout, marks=pytest.mark.timeout(timeout + 60), id=name)
        for name, timeout in conformance.available_modules()
    ],
)
def test_cpython_module(module, timeout, tmp_path, pytestconfig):
    _check_module(module, _under_the_floor(timeout, pytestconfig), tmp_path)


@pytest.mark.parametrize(
    "module,timeout",
    [
        pytest.param(name, timeout, marks=pytest.mark.timeout(timeout + 60), id=name)
        for name, timeout in conformance.available_modules(network=True)
    ],
)
def test_cpython_network_module(module, timeout, tmp_path, pytestconfig):
    _check_module(module, _under_the_floor(timeout, pytestconfig), tmp_path)


def _under_the_floor(timeout, config):
    """A module's time limit, raised with the run's alarm floor
    (tests/conftest.py's alarm_floor, which scripts/arm64 sets for qemu-user,
    where a module takes 5-20x this machine's time): the limit run.py
    gives each attempt, and the subprocess's (30 s more), stay inside the
    test's alarm, which the floor raised. 0, the default, keeps it."""
    floor = float(config.getini("alarm_floor"))
    return max(timeout, floor - 90)


def _check_module(module, timeout, tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(CONF / "run.py"),
            "--module",
            module,
            "--timeout",
            str(timeout),
            "--json",
            str(out),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout + 30,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (res,) = json.loads(out.read_text())["modules"]

    assert res["swap"] and res["swap"]["ok"], f"swap probe did not see zloopgo: {res['swap']}"
    if module in NO_REAL_LOOP:
        assert res["swap_check"] in ("ok", "n/a")
    else:
        assert res["swap_check"] == "ok", "no test of this module ran on a zloopgo loop"
    assert not res["hung"], f"{module} hung:\n{res['output_tail']}"

    prefix = f"test.test_asyncio.{module}"
    failing = res["failures"]
    unexpected = {t: f for t, f in failing.items() if t not in BASELINE}
    outcomes = {t["id"]: t["outcome"] for t in res["tests"]}
    fixed = [
        t
        for t in BASELINE
        if (t == prefix or t.startswith(prefix + ".")) and outcomes.get(t) in ("pass", "xfail")
    ]
    missing = [t for t in BASELINE if t.startswith(prefix + ".") and t not in outcomes]
    problems = []
    if unexpected:
        problems.append(
            "failing, not in the baseline:\n"
            + "\n".join(f"  {t} [{f['outcome']}]: {f['message']}" for t, f in unexpected.items())
        )
    if fixed:
        problems.append("in the baseline but passing now (remove them):\n  " + "\n  ".join(fixed))
    if missing:
        problems.append("in the baseline but not run:\n  " + "\n  ".join(missing))
    assert not problems, "\n".join(problems)
