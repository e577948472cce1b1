"""probes/syscalls.py: how `perf stat -x,` output is read — the
events asked for, in any order, counts perf could not take as None, other
lines ignored — and which events a loop's row counts (the Go scheduler's
uprobes only on zloopgo's). perf itself is not needed here."""

from .. import syscalls

STAT = """\
# started on Sat Dec  5 15:20:00 2026

6005912,,raw_syscalls:sys_enter,1002,100.00,,
2000000,,syscalls:sys_enter_epoll_wait,1002,100.00,,
<not counted>,,syscalls:sys_enter_tgkill,0,100.00,,
5901,,context-switches,1002,100.00,0.006,K/sec
22,,zlgo_runtime:handoffp,1002,100.00,,
7,,other:event,1002,100.00,,
"""


def test_the_asked_events_are_read_and_an_uncounted_one_is_none():
    asked = [
        "raw_syscalls:sys_enter",
        "syscalls:sys_enter_epoll_wait",
        "syscalls:sys_enter_tgkill",
        "context-switches",
        "zlgo_runtime:handoffp",
        "syscalls:sys_enter_futex",
    ]
    got = syscalls.parse_stat(STAT, asked)
    assert got == {
        "raw_syscalls:sys_enter": 6005912,
        "syscalls:sys_enter_epoll_wait": 2000000,
        "syscalls:sys_enter_tgkill": None,
        "context-switches": 5901,
        "zlgo_runtime:handoffp": 22,
    }


def test_only_zloopgos_rows_count_the_go_scheduler_and_every_row_its_switches():
    for loop in ("zloopgo", "zuvloop", "asyncio"):
        plain = syscalls.row_events(loop, go_runtime=False)
        assert "context-switches" in plain
        assert not any(e.startswith("zlgo_runtime:") for e in plain)
    assert syscalls.row_events("zuvloop", go_runtime=True) == syscalls.row_events(
        "zuvloop", go_runtime=False
    )
    with_go = syscalls.row_events("zloopgo", go_runtime=True)
    assert [e for e in with_go if e.startswith("zlgo_runtime:")] == [
        "zlgo_runtime:preemptone",
        "zlgo_runtime:handoffp",
        "zlgo_runtime:stoplockedm",
        "zlgo_runtime:startm",
    ]
