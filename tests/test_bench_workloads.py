"""scripts/benchmark/workloads.py at the two smallest sizes, each sample in
a fresh interpreter as the harness takes it: 0 operations (what
benchmark.syscalls subtracts, so every workload must set up and finish
with none) and 1. A sample passes as the harness judges one: it exits,
its counter is what the size asks for and every check it makes holds.
This is not a timing test; the figures are not read."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))

from benchmark import harness, workloads


@pytest.mark.parametrize("size", [0, 1])
@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS))
def test_every_workload_finishes_with_its_counter_at_the_smallest_sizes(name, size, monkeypatch):
    # the lookup workloads' name, answered without /etc/hosts or DNS
    monkeypatch.setenv("ZL_BENCH_LOOKUP_HOST", "127.1")
    rec = harness.sample("zloopgo", workloads.WORKLOADS[name], size, timeout=60, gc_off=True)
    assert rec["status"] == "ok", rec
    assert rec["counter"] == workloads.WORKLOADS[name].expected(size)
