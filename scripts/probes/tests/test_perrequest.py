"""probes/perrequest.py's CPU reader: perf stat's plain output (task-clock,
context switches, and the rusage lines of user and system time) read into
µs and counts; a file without the rusage lines is no result. Its
repetitions (--repeat): one request's cost from two runs, the spread over
repetitions, the loops taking turns, a failed run left out of the
figures. Its readiness check, which asks a slow server once. perf,
valgrind and the application servers are not needed here: the counter is
replaced by a function that answers from a table, the server by a small
HTTP server on loopback."""

import http.server
import threading
import time
import types
import typing

import pytest
from benchmark import samples as runner

from .. import perrequest

STAT = """\
# started on Sun Dec  6 13:10:42 2026


 Performance counter stats for 'python3 -m uvicorn ...':

          1,296.95 msec task-clock
             2,029      context-switches

       4.245617647 seconds time elapsed

       1.098582000 seconds user
       0.180000000 seconds sys

"""


def test_cpu_reads_user_and_system_time_in_microseconds(tmp_path):
    out = tmp_path / "stat.out"
    out.write_text(STAT)
    prefix, read = perrequest.cpu(str(out))
    assert prefix[:2] == ["perf", "stat"]
    got = read(None)
    assert got["user"] == 1098582.0
    assert got["sys"] == 180000.0
    assert got["total"] == 1278582.0
    assert got["task-clock"] == 1296.95
    assert got["context-switches"] == 2029


def test_cpu_without_the_rusage_lines_is_no_result(tmp_path):
    out = tmp_path / "stat.out"
    out.write_text(STAT.split("seconds time elapsed")[0])
    _, read = perrequest.cpu(str(out))
    assert read(None) is None


def test_per_request_is_the_difference_of_the_runs_over_n():
    once = {"total": 1000, "python": 600}
    twice = {"total": 1600, "python": 900, "libc": 50}
    assert perrequest.per_request(once, twice, 50) == {"total": 12.0, "python": 6.0, "libc": 1.0}


def test_spread_gives_min_median_max_and_a_missing_key_counts_zero():
    runs = [{"total": 10.0, "go": 4.0}, {"total": 14.0}, {"total": 11.0, "go": 1.0}]
    assert perrequest.spread(runs) == {"total": (10.0, 11.0, 14.0), "go": (0.0, 1.0, 4.0)}


def opts_for(measure="instructions", split=True, repeat=3, loops="zloopgo,asyncio"):
    return types.SimpleNamespace(
        measure=measure, split=split, repeat=repeat, loops=loops, requests=50, keep=None
    )


def test_describe_spread_names_the_total_and_each_part_that_ran():
    runs = [
        {"total": 1000.0, "python": 700.0, "engine (Go)": 100.0},
        {"total": 1030.0, "python": 705.0, "engine (Go)": 125.0},
        {"total": 1010.0, "python": 702.0, "engine (Go)": 108.0},
    ]
    lines = perrequest.describe_spread(opts_for(), runs).splitlines()
    assert lines[0].split() == ["over", "3", "runs:", "min", "median", "max", "max", "-", "min"]
    rows = {line[:20].strip(): line[20:].split() for line in lines[1:]}
    assert list(rows) == ["total", "python", "engine (Go)"]
    assert rows["total"] == ["1,000", "1,010", "1,030", "30"]
    assert rows["engine (Go)"] == ["100", "108", "125", "25"]


def test_describe_spread_with_threads_gives_the_loops_thread_and_the_others():
    runs = [
        {"total": 1000.0, "loop's thread": 900.0, "other threads": 100.0},
        {"total": 1040.0, "loop's thread": 901.0, "other threads": 139.0},
    ]
    opts = opts_for(split=False)
    opts.threads = True
    lines = perrequest.describe_spread(opts, runs).splitlines()
    rows = {line[:20].strip(): line[20:].split() for line in lines[1:]}
    assert rows == {
        "total": ["1,000", "1,020", "1,040", "40"],
        "loop's thread": ["900", "900", "901", "1"],
        "other threads": ["100", "120", "139", "39"],
    }
    line = perrequest.describe(opts, runs[1])
    assert line.split("; ")[1:] == ["loop's thread 901", "other threads 139"]


def test_describe_spread_of_cpu_time_gives_user_and_system():
    runs = [{"total": 30.0, "user": 20.0, "sys": 10.0}, {"total": 34.0, "user": 23.0, "sys": 11.0}]
    lines = perrequest.describe_spread(opts_for(measure="cpu", split=False), runs).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["total", "user", "sys"]
    assert lines[1].split()[1:] == ["30.0", "32.0", "34.0", "4.0"]


def fake_counter(monkeypatch, table, calls):
    """perrequest.count answering from table[(loop, run, requests)]: a dict,
    or an exception to raise; every call noted in calls."""

    def count(opts, server, row, loop, requests, tmpdir, run=1):
        calls.append((loop, run, requests))
        got = table[(loop, run, requests)]
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr(perrequest, "count", count)


def test_repetitions_take_turns_between_loops_and_print_the_median(monkeypatch, capsys):
    table = {}
    for run, (a, b) in enumerate([(100, 300), (104, 330), (101, 310)], start=1):
        table[("zloopgo", run, 50)] = {"total": 1000}
        table[("zloopgo", run, 100)] = {"total": 1000 + 50 * a}
        table[("asyncio", run, 50)] = {"total": 2000}
        table[("asyncio", run, 100)] = {"total": 2000 + 50 * b}
    calls = []
    fake_counter(monkeypatch, table, calls)
    row = perrequest.SERVER_ROWS["aiohttp"][0]
    perrequest.measure_cell(opts_for(split=False), "aiohttp", "json", row, "/nowhere")
    assert calls == [
        (loop, run, n) for run in (1, 2, 3) for loop in ("zloopgo", "asyncio") for n in (50, 100)
    ]
    out = capsys.readouterr().out.splitlines()
    assert "run 1/3" in out[0] and out[0].split()[2] == "zloopgo"
    medians = [line.split() for line in out if " median of " in line]
    assert [m[2:8] for m in medians] == [
        ["zloopgo", "median", "of", "3:", "101", "instructions"],
        ["asyncio", "median", "of", "3:", "310", "instructions"],
    ]
    totals = [line.split()[1:] for line in out if line.strip().startswith("total")]
    assert totals == [["100", "101", "104", "4"], ["300", "310", "330", "30"]]


def test_a_failed_run_is_said_and_left_out_of_the_spread(monkeypatch, capsys):
    table = {
        ("zloopgo", 1, 50): {"total": 0},
        ("zloopgo", 1, 100): {"total": 500},
        ("zloopgo", 2, 50): RuntimeError("the server did not exit after GET /exit"),
    }
    fake_counter(monkeypatch, table, [])
    row = perrequest.SERVER_ROWS["aiohttp"][0]
    opts = opts_for(split=False, repeat=2, loops="zloopgo")
    perrequest.measure_cell(opts, "aiohttp", "json", row, "/nowhere")
    out = capsys.readouterr().out
    assert "run 2/2 failed: the server did not exit after GET /exit" in out
    assert "over 1 runs:" in out
    assert "zloopgo  median of 1: 10 instructions per request" in out


def test_one_run_prints_the_figure_as_before_and_no_spread(monkeypatch, capsys):
    table = {("zloopgo", 1, 50): {"total": 0}, ("zloopgo", 1, 100): {"total": 500}}
    fake_counter(monkeypatch, table, [])
    row = perrequest.SERVER_ROWS["aiohttp"][0]
    opts = opts_for(split=False, repeat=1, loops="zloopgo")
    perrequest.measure_cell(opts, "aiohttp", "json", row, "/nowhere")
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert out.split() == ["aiohttp", "json", "zloopgo", "10", "instructions", "per", "request"]


def test_server_env_reads_name_value_settings_a_later_one_winning():
    got = perrequest.server_env(["GOGC=off", "GODEBUG=asyncpreemptoff=1,gctrace=0", "GOGC=200"])
    assert got == {"GOGC": "200", "GODEBUG": "asyncpreemptoff=1,gctrace=0"}


def test_server_env_refuses_a_setting_without_a_value():
    with pytest.raises(ValueError, match="NAME=VALUE"):
        perrequest.server_env(["GOGC"])


def test_threads_put_every_thread_but_the_loops_apart(tmp_path):
    out = str(tmp_path / "cg.out")
    for n, count in ((1, 900), (2, 40), (3, 60)):
        (tmp_path / f"cg.out-{n:02}").write_text(f"thread: {n}\nsummary: {count}\n")
    (tmp_path / "cg.out-notes").write_text("summary: 5000\n")
    prefix, read = perrequest.instructions(out)
    assert prefix[:2] == ["valgrind", "--tool=callgrind"]
    got = read(types.SimpleNamespace(threads=True, split=False))
    assert got == {"total": 1000, perrequest.LOOP_THREAD: 900, perrequest.OTHER_THREADS: 100}


def test_threads_without_the_loops_thread_is_no_result(tmp_path):
    (tmp_path / "cg.out-02").write_text("summary: 40\n")
    _, read = perrequest.instructions(str(tmp_path / "cg.out"))
    assert read(types.SimpleNamespace(threads=True, split=False)) is None


class SlowFirstAnswer(http.server.BaseHTTPRequestHandler):
    """Answers GET /ready, the first time after a second (a server under
    callgrind, cold), and counts the requests it was sent."""

    served: typing.ClassVar[list] = []

    def do_GET(self):
        self.served.append(self.path)
        if len(self.served) == 1:
            time.sleep(1.0)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def test_a_slow_server_is_asked_once_whether_it_is_ready():
    SlowFirstAnswer.served = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowFirstAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    alive = types.SimpleNamespace(proc=types.SimpleNamespace(poll=lambda: None))
    try:
        ready = runner.Server.wait_ready(alive, lambda: perrequest.answered_ready(port), 30)
    finally:
        server.shutdown()
        server.server_close()
    assert ready
    assert SlowFirstAnswer.served == ["/ready"]


def test_nothing_listening_is_not_ready_yet():
    with pytest.raises(OSError):
        perrequest.answered_ready(runner.free_port())
