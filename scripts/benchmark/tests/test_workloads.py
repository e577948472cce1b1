"""benchmark/workloads.py at the two smallest sizes, each sample in a
fresh interpreter as the harness takes it: 0 operations (what
probes.syscalls subtracts, so every workload must set up and finish with
none) and 1. A sample passes as the harness judges one: it exits, its
counter is what the size asks for and every check it makes holds. This
is not a timing test; the figures are not read. Then the measured part's
perf control (probes.timesplit's fifos): it enables and disables perf's
events, waiting for each ack."""

import os
import threading

import pytest

from .. import harness, workloads


@pytest.mark.parametrize("size", [0, 1])
@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS))
def test_every_workload_finishes_with_its_counter_at_the_smallest_sizes(name, size, monkeypatch):
    # the lookup workloads' name, answered without /etc/hosts or DNS
    monkeypatch.setenv("ZL_BENCH_LOOKUP_HOST", "127.1")
    rec = harness.sample("zloopgo", workloads.WORKLOADS[name], size, timeout=60, gc_off=True)
    assert rec["status"] == "ok", rec
    assert rec["counter"] == workloads.WORKLOADS[name].expected(size)


def test_the_measured_part_enables_and_disables_perf_and_waits_for_its_acks(tmp_path, monkeypatch):
    ctl, ack = tmp_path / "ctl", tmp_path / "ack"
    os.mkfifo(ctl)
    os.mkfifo(ack)
    monkeypatch.setenv("ZL_BENCH_PERF_CTL", f"{ctl},{ack}")
    heard = []
    acked = threading.Event()

    def perf():
        # as perf does: both fifos held open read-write, one ack per command
        c = os.open(ctl, os.O_RDWR)
        a = os.open(ack, os.O_RDWR)
        try:
            with os.fdopen(os.dup(c)) as commands:
                for _ in range(2):
                    heard.append(commands.readline().strip())
                    if heard[-1] == "disable":
                        acked.wait(5)  # _stop must not return before the ack
                    os.write(a, b"ack\n")
        finally:
            os.close(c)
            os.close(a)

    t = threading.Thread(target=perf)
    t.start()
    workloads._start()
    assert heard == ["enable"]  # the clock starts after perf's ack
    finished = []
    stopper = threading.Thread(target=lambda: finished.append(workloads._stop()))
    stopper.start()
    stopper.join(0.2)
    assert finished == []  # still waiting for the disable's ack
    acked.set()
    stopper.join(5)
    t.join(5)
    assert heard == ["enable", "disable"]
    assert len(finished) == 1 and finished[0] >= 0


def test_without_the_variable_the_measured_part_does_not_touch_perf(monkeypatch):
    monkeypatch.delenv("ZL_BENCH_PERF_CTL", raising=False)
    workloads._start()
    assert workloads._stop() >= 0
