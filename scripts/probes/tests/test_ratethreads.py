"""probes/ratethreads.py's readers: a thread's counters from a /proc task
folder, the difference of two snapshots (a thread born meanwhile counts from
0), where a thread waits from its syscall line and the process's maps, the
kind that names it, the sums per kind, the Go runtime's gctrace lines and a
CPU's busy time from /proc/stat. Every /proc file is a fake one written
here, so that nothing depends on the kernel's configuration; the servers,
PostgreSQL and the load generator are not needed."""

import collections

from .. import ratethreads

STATUS = """\
Name:\tpython3.14
State:\tS (sleeping)
voluntary_ctxt_switches:\t%d
nonvoluntary_ctxt_switches:\t%d
"""

ENGINE = "/v/lib/python3.14/site-packages/zloopgo/_engine.cpython-314-x86_64-linux-gnu.so"
MAPS = f"""\
5581e1a00000-5581e1c00000 r-xp 00000000 08:01 123 /usr/bin/python3.14
7f0000000000-7f0000400000 r-xp 00000000 08:01 456 {ENGINE}
7f1000000000-7f1000200000 r-xp 00000000 08:01 789 /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000000000-7f2000001000 rw-p 00000000 00:00 0
"""
GO_PC = "0x7f0000001234"
LIBC_PC = "0x7f1000000100"


def write_task(folder, comm, run_ns, wait_ns, slices, voluntary, involuntary, ticks=(3, 1)):
    folder.mkdir(parents=True)
    rest = " ".join(["0"] * 10 + [str(ticks[0]), str(ticks[1])] + ["0"] * 30)
    (folder / "stat").write_text(f"7 ({comm}) S {rest}\n")
    (folder / "schedstat").write_text(f"{run_ns} {wait_ns} {slices}\n")
    (folder / "status").write_text(STATUS % (voluntary, involuntary))
    (folder / "comm").write_text(comm + "\n")


def test_a_thread_is_read_in_microseconds_and_counts(tmp_path):
    write_task(tmp_path / "7", "python3.14", 2_500_000, 40_000, 12, 30, 4)
    got = ratethreads.read_thread(str(tmp_path / "7"))
    tick = 1e6 / ratethreads.CLOCK_TICK
    assert got == {
        "comm": "python3.14",
        "cpu_us": 2500.0,
        "wait_us": 40.0,
        "slices": 12,
        "voluntary": 30,
        "involuntary": 4,
        "user_us": 3 * tick,
        "system_us": 1 * tick,
    }


def test_a_thread_gone_is_none(tmp_path):
    assert ratethreads.read_thread(str(tmp_path / "missing")) is None


def test_a_snapshot_holds_every_thread_and_the_difference_counts_from_zero(tmp_path):
    task = tmp_path / "100" / "task"
    write_task(task / "100", "python3.14", 1000, 0, 1, 1, 0)
    before = ratethreads.snapshot(100, proc=str(tmp_path))
    assert set(before) == {100}
    (task / "100" / "schedstat").write_text("5000 2000 9\n")
    write_task(task / "101", "python3.14", 3000, 1000, 4, 3, 1)
    after = ratethreads.snapshot(100, proc=str(tmp_path))
    delta = ratethreads.difference(before, after)
    assert delta[100]["cpu_us"] == 4.0
    assert delta[100]["wait_us"] == 2.0
    assert delta[100]["slices"] == 8
    tick = 1e6 / ratethreads.CLOCK_TICK
    assert delta[101] == {
        "cpu_us": 3.0,
        "wait_us": 1.0,
        "slices": 4,
        "voluntary": 3,
        "involuntary": 1,
        "user_us": 3 * tick,
        "system_us": 1 * tick,
        "comm": "python3.14",
    }


def test_where_names_the_call_and_the_object_of_the_instruction_pointer():
    maps = ratethreads.parse_maps(MAPS)
    names = ratethreads.SYSCALL_NAMES["x86_64"]
    assert len(maps) == 3  # the anonymous mapping names no file
    waiting = f"202 0xc000 0x80 0x0 0x0 0x0 0x0 0x7ffd0000 {GO_PC}"
    obj, call = ratethreads.where(waiting, maps, names)
    assert obj.endswith("zloopgo/_engine.cpython-314-x86_64-linux-gnu.so")
    assert call == "futex"
    assert ratethreads.where("running", maps, names) == "running"
    assert ratethreads.where(f"-1 0x7ffd0000 {LIBC_PC}", maps, names)[1] == "no call"
    assert ratethreads.where(f"999 0 0 0 0 0 0 0x1 {LIBC_PC}", maps, names)[1] == "call 999"
    assert ratethreads.where("35 0 0 0 0 0 0 0x1 0x10", maps, names) == ("?", "nanosleep")


def test_a_threads_kind_is_its_most_usual_wait():
    engine = "/v/zloopgo/_engine.cpython-314-x86_64-linux-gnu.so"
    libc = "/usr/lib/libc.so.6"

    def kind(tid, **seen):
        counted = collections.Counter()
        for key, n in seen.items():
            obj, call = key.split("__")
            counted[(engine if obj == "go" else libc, call)] = n
        counted["running"] = 50  # running is never a kind
        return ratethreads.kind_of(tid, 1, counted, "python3.14", "python3.14")

    assert kind(1, go__futex=9) == ratethreads.LOOP_THREAD
    assert kind(2, go__nanosleep=9, go__futex=2) == "Go sysmon"
    assert kind(3, go__futex=9, go__nanosleep=2) == "Go idle M"
    assert kind(4, go__epoll_pwait=9) == "Go M in netpoll"
    assert kind(5, libc__futex=9) == "thread in libc.so.6 futex"
    assert ratethreads.kind_of(6, 1, {}, "python3.14", "python3.14") == "always running"
    named = ratethreads.kind_of(7, 1, {(libc, "futex"): 1}, "asyncio_0", "python3.14")
    assert named == "thread 'asyncio_0' in libc.so.6 futex"


def test_the_counts_are_summed_per_kind():
    ticks = {"user_us": 0, "system_us": 0}
    delta = {
        1: {"cpu_us": 10, "wait_us": 1, "slices": 2, "voluntary": 3, "involuntary": 1} | ticks,
        2: {"cpu_us": 5, "wait_us": 0, "slices": 4, "voluntary": 4, "involuntary": 0} | ticks,
        3: {"cpu_us": 1, "wait_us": 2, "slices": 1, "voluntary": 1, "involuntary": 0} | ticks,
    }
    got = ratethreads.by_kind(delta, {1: "loop thread", 2: "Go idle M", 3: "Go idle M"})
    assert got["loop thread"]["threads"] == 1
    assert got["Go idle M"] == {
        "cpu_us": 6,
        "wait_us": 2,
        "slices": 5,
        "voluntary": 5,
        "involuntary": 0,
        "user_us": 0,
        "system_us": 0,
        "threads": 2,
    }


def test_gctrace_counts_cycles_and_the_two_stopping_phases():
    rest = "MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P"
    text = f"""\
INFO: something else
gc 1 @0.011s 0%: 0.016+0.36+0.004 ms clock, 0.032+0.10/0.20/0+0.008 ms cpu, 3->3->0 {rest}
gc 2 @5.200s 0%: 0.020+1.5+0.010 ms clock, 0.040+0/0.3/0+0.02 ms cpu, 4->4->1 {rest}
"""
    cycles, paused = ratethreads.gc_trace(text)
    assert cycles == 2
    assert abs(paused - (0.016 + 0.004 + 0.020 + 0.010)) < 1e-9
    assert ratethreads.gc_trace("no collections here\n") == (0, 0.0)


def test_a_cpus_busy_time_leaves_idle_and_iowait_out(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(
        "cpu  100 0 100 1000 10 0 0 0 0 0\n"
        "cpu0 10 1 20 500 7 3 4 0 0 0\n"
        "cpu1 90 0 80 500 3 0 0 0 0 0\n"
    )
    tick = 1e6 / ratethreads.CLOCK_TICK
    assert ratethreads.cpu_busy_us(0, str(stat)) == (10 + 1 + 20 + 3 + 4) * tick
    assert ratethreads.cpu_busy_us(5, str(stat)) is None


def test_the_server_cpu_is_the_taskset_prefixs():
    assert ratethreads.server_cpu(["taskset", "-c", "0"]) == 0
    assert ratethreads.server_cpu([]) is None
