"""The free-threaded table's contenders (harness.FT_GIL): each sample runs
in a fresh worker with its own PYTHON_GIL, whatever the harness's own
environment holds, and a sample whose GIL is not what its row says is not
accepted. On a free-threaded build (the suite's ft stage) that is asyncio
with the GIL off, asyncio-gil with it on, and zloopgo with it on, its
engine having turned it on; on a GIL build asyncio's row cannot be run as
it says and must fail. scripts/gil-off's test-only build of zloopgo keeps
the GIL off, so its zloopgo row must fail as not what the row says. It
does not time anything, and knows nothing of the rival loops (they need
not be installed here)."""

import os
import subprocess
import sys
import sysconfig

import pytest

from .. import harness, workloads
from ..tables import ZL

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def zloopgo_keeps_the_gil_off():
    """Whether the zloopgo a sample's worker imports is scripts/gil-off's
    test-only build (its engine's GIL_OFF_TEST_BUILD) on a free-threaded
    Python. Asked of a fresh interpreter started as the worker is (its
    folder, zloopgo's environment), so that this process does not load the
    engine: a released build's would turn this process's GIL on."""
    if not FREE_THREADED:
        return False
    env = {**os.environ, **harness.gil_env(ZL, free_threaded=True)}
    env = {k: v for k, v in env.items() if v is not None}
    code = "from zloopgo import _engine; print(getattr(_engine, 'GIL_OFF_TEST_BUILD', 0))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=harness.SCRIPTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip() == "1"


@pytest.mark.parametrize("loop", ["asyncio", "asyncio-gil", "zloopgo"])
def test_each_contender_runs_with_the_gil_its_row_names(loop, monkeypatch):
    # inherited from the harness's caller: zloopgo must not get it (it
    # refuses PYTHON_GIL=0 at import), asyncio-gil must override it
    monkeypatch.setenv("PYTHON_GIL", "0")
    wl = workloads.WORKLOADS["seed_callbacks"]
    rec = harness.sample(loop, wl, 1, timeout=60, gc_off=True, free_threaded=True)
    if loop == "asyncio" and not FREE_THREADED:
        # the GIL cannot be off here: CPython refuses PYTHON_GIL=0 (3.13+)
        # or ignores it, and the sample reports the GIL on
        assert rec["status"] == "error", rec
        return
    if loop == ZL and zloopgo_keeps_the_gil_off():
        # the test-only build declares the GIL unused: the sample ran, with
        # the GIL off, and is refused as not what the row says
        assert rec["status"] == "error", rec
        assert rec["gil"] is False, rec
        assert rec["why"] == "the GIL was off, not as its row says", rec
        return
    assert rec["status"] == "ok", rec
    assert rec["gil"] is harness.gil_expected(loop)
    assert rec["gil"] is (loop != "asyncio")


def test_outside_the_free_threaded_table_a_sample_gets_no_python_gil(monkeypatch):
    monkeypatch.delenv("PYTHON_GIL", raising=False)
    assert harness.gil_env("asyncio", free_threaded=False) == {}
    rec = harness.sample("asyncio", workloads.WORKLOADS["seed_callbacks"], 1, 60, gc_off=True)
    assert rec["status"] == "ok", rec
    assert rec["gil"] is not FREE_THREADED
