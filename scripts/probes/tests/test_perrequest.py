"""probes/perrequest.py's CPU reader: perf stat's plain output (task-clock,
context switches, and the rusage lines of user and system time) read into
µs and counts; a file without the rusage lines is no result. perf itself
is not needed here."""

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
