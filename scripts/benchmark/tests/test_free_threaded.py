"""The free-threaded table's contenders (harness.FT_GIL): each sample runs
in a fresh worker with its own PYTHON_GIL, whatever the harness's own
environment holds, and a sample whose GIL is not what its row says is not
accepted. On a free-threaded build (the suite's ft stage) that is asyncio
with the GIL off, asyncio-gil with it on, and zloopgo with it on, its
engine having turned it on; on a GIL build asyncio's row cannot be run as
it says and must fail. It does not time anything, and knows nothing of
the rival loops (they need not be installed here)."""

import sysconfig

import pytest

from .. import harness, workloads

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


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
    assert rec["status"] == "ok", rec
    assert rec["gil"] is harness.gil_expected(loop)
    assert rec["gil"] is (loop != "asyncio")


def test_outside_the_free_threaded_table_a_sample_gets_no_python_gil(monkeypatch):
    monkeypatch.delenv("PYTHON_GIL", raising=False)
    assert harness.gil_env("asyncio", free_threaded=False) == {}
    rec = harness.sample("asyncio", workloads.WORKLOADS["seed_callbacks"], 1, 60, gc_off=True)
    assert rec["status"] == "ok", rec
    assert rec["gil"] is not FREE_THREADED
