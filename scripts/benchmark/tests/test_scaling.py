"""benchmark/scaling/: the parsing and checking of a sample (bench.py),
the report's figures (report.py), and smokes of the server program
(server.py): 1 and 2 asyncio servers in interpreters (Python 3.14+) and in
processes answering an echo and an HTTP request on their shared port, and
one sample measured end to end by the Go load generator. Not a timing
test: no figure is compared with a speed."""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from ..scaling import bench, report, serve

SCRIPTS = bench.SCRIPTS
REFUSAL = "ImportError: module zloopgo._engine does not support loading in subinterpreters"
needs_interpreters = pytest.mark.skipif(
    bench.interpreters_available() is not None,
    reason="concurrent.interpreters is new in Python 3.14",
)
needs_h11 = pytest.mark.skipif(
    __import__("importlib").util.find_spec("h11") is None,
    reason="h11 is not installed (scripts/bench installs it into the bench venv)",
)


# ---- bench.py: commands, parsing, checks ---------------------------------


def test_interpreters_are_one_program_and_processes_one_program_each():
    (one,) = bench.server_commands("interp", "asyncio", "echo", 8080, 2)
    assert one[one.index("--arrangement") + 1] == "interp"
    assert one[one.index("--servers") + 1] == "2"
    procs = bench.server_commands("proc", "uvloop", "http", 8080, 2)
    assert len(procs) == 2
    assert [c[c.index("--first-index") + 1] for c in procs] == ["0", "1"]
    assert all(c[c.index("--servers") + 1] == "1" for c in procs)
    assert all(c[c.index("--port") + 1] == "8080" for c in procs)


def test_a_module_refusing_subinterpreters_is_refused_and_other_failures_are_errors():
    text = f"SCALING-READY 1\nSCALING-FAILED 0 {REFUSAL}\nSCALING-FAILED 1 {REFUSAL}\n"
    assert bench.failure_of(text) == ("refused", REFUSAL)
    assert bench.failure_of("SCALING-FAILED 0 OSError: [Errno 98] in use\n") == (
        "error",
        "OSError: [Errno 98] in use",
    )
    assert bench.failure_of("SCALING-READY 0\n") is None


def test_the_generators_result_lines_are_read():
    out = 'noise\nLOADGEN {"requests": 10, "rate": 5.0}\n'
    assert bench.parse_client("echo", out) == {"requests": 10, "rate": 5.0}
    assert bench.parse_client("http", 'APPLOAD {"requests": 3}\n') == {"requests": 3}
    assert bench.parse_client("http", "APPLOAD-ERROR status 500\n") is None
    assert bench.parse_client("echo", None) is None


def stats(**kw):
    return dict({"connections": 1, "bytes_in": 0, "bytes_out": 0, "requests": 0}, **kw)


def test_echo_counts_must_equal_what_the_generator_sent_exactly():
    k = bench.ECHO_SIZE
    client = {"requests": 30}
    good = [stats(bytes_in=10 * k, bytes_out=10 * k), stats(bytes_in=20 * k, bytes_out=20 * k)]
    assert bench.check_counts("echo", client, good, 2) == []
    short = [stats(bytes_in=10 * k, bytes_out=10 * k), stats(bytes_in=19 * k, bytes_out=19 * k)]
    assert bench.check_counts("echo", client, short, 2)
    assert bench.check_counts("echo", client, good[:1], 2) == [
        "1 of 2 servers printed their counts"
    ]


def test_http_servers_must_have_answered_at_least_what_the_generator_counted():
    client = {"requests": 100}
    assert bench.check_counts("http", client, [stats(requests=60), stats(requests=45)], 2) == []
    assert bench.check_counts("http", client, [stats(requests=60), stats(requests=30)], 2)


def test_a_server_that_dies_of_a_signal_before_listening_is_a_crash(tmp_path):
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    with bench.runner.Server([sys.executable, "-c", kill], str(tmp_path / "out")) as srv:
        status, detail = bench.wait_ready([srv], 1, 20)
    assert status == "crash"
    assert "signal 9" in detail


def test_a_server_that_prints_its_failure_is_that_failure(tmp_path):
    say = f"print('SCALING-FAILED 0 {REFUSAL}'); raise SystemExit(3)"
    with bench.runner.Server([sys.executable, "-c", say], str(tmp_path / "out")) as srv:
        assert bench.wait_ready([srv], 1, 20) == ("refused", REFUSAL)


# ---- report.py -----------------------------------------------------------


def test_the_bound_of_the_ratio_counts_the_generators_share_of_the_cpus():
    # a server alone on its CPU at 10 µs/request (its generator 5 µs on the
    # other); two servers at 10 µs each and a generator at 5 µs/request
    # sharing both CPUs: 2 * 10 / 15
    assert report.bound(10.0, 5.0, 10.0, 5.0) == pytest.approx(4 / 3)
    assert report.bound(10.0, 0.0, 10.0, 0.0) == pytest.approx(2.0)
    # the generator slower than the server: it held the 1-server rate
    assert report.bound(5.0, 10.0, 5.0, 10.0) == pytest.approx(4 / 3)
    assert report.bound(None, 5.0, 10.0, 5.0) is None
    # 20,000 req/s at 25 µs each: half its CPU
    assert report.busy(20000.0, 25.0) == pytest.approx(0.5)


def sample(row, arrangement, loop, servers, rate, status="ok", detail=""):
    s = {"row": row, "arrangement": arrangement, "loop": loop, "servers": servers}
    s.update(round="1", status=status)
    if status == "ok":
        s.update(rate=rate, server_cpu_us=1e6 / rate, client_cpu_us=5.0, peak_rss_mib=30.0)
        s["peak_rss_mib"] *= servers if arrangement == "proc" else 1
    else:
        s["detail"] = detail
    return s


def test_the_report_gives_ratios_refusals_and_where_zloopgo_stands():
    cells = [("interp", "asyncio"), ("interp", "zloopgo"), ("proc", "uvloop")]
    samples = [
        sample("echo", "interp", "asyncio", 1, 1000.0),
        sample("echo", "interp", "asyncio", 2, 1800.0),
        sample("echo", "proc", "uvloop", 1, 2000.0),
        sample("echo", "proc", "uvloop", 2, 3000.0),
        sample("echo", "interp", "zloopgo", 1, 0, "refused", REFUSAL),
        sample("echo", "interp", "zloopgo", 2, 0, "refused", REFUSAL),
    ]
    opts = argparse.Namespace(
        heading="##", rows=["echo"], conns=32, duration=2.0, warmup=0.2, rounds=1,
        pin_server=["taskset", "-c", "1"], pin_client=["taskset", "-c", "0"],
        versions={"h11": "0.16.0"}, elapsed=1.0, load_start="0.10 0.20 0.30",
    )  # fmt: skip
    text = report.render(opts, cells, samples, {"rloop in processes": "not installed"})
    table = {}  # each arrangement's first line: the main table's row
    for line in text.splitlines():
        if "|" in line:
            table.setdefault(line.split(" | ")[0].strip("| "), line)
    # 2/1, its bound 2 * 1000 / (1e6 / 1800 + 5), and the 1 server saturated
    assert "| 1,800 | 1.80x | 3.57x | 1.00 |" in table["asyncio in interpreters"]
    assert "| refused | refused |" in table["zloopgo in interpreters"]
    assert "First with 2 servers: uvloop in processes (3,000 req/s)." in text
    assert f"zloopgo in interpreters: refused: {REFUSAL}." in text
    assert "| echo | zloopgo in interpreters | 2 | refused | 1 sample(s): " + REFUSAL in text
    assert "**rloop in processes**: not installed" in text
    assert "server on CPU 1 and the generator on CPU 0" in text
    assert "split" not in text  # no sample says how its connections were spread
    samples[1]["connections"], samples[3]["connections"] = [20, 12], [15, 17]
    assert report.split(samples, "echo") == [
        "SO_REUSEPORT's split of the 32 connections between 2 servers: the smaller share "
        "was 12–15 (median 15) over 2 samples."
    ]
    # zloopgo measured: its place and its memory against two processes
    samples[4:] = [
        sample("echo", "interp", "zloopgo", 1, 2500.0),
        sample("echo", "interp", "zloopgo", 2, 4500.0),
    ]
    assert report.standing(samples, "echo", cells)[1] == (
        "zloopgo in interpreters: 1 of 3 with 2 servers; its peak RSS / 2 processes' of: "
        "uvloop 0.50."
    )


# ---- server.py: the program, and one sample end to end -------------------


def start(arrangement, servers, app, loop="asyncio"):
    port = bench.runner.free_port()
    cmd = [sys.executable, "-m", "benchmark.scaling.server", "--arrangement", arrangement]
    cmd += ["--servers", str(servers), "--loop", loop, "--app", app, "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=SCRIPTS, stdout=subprocess.PIPE, text=True)
    lines = []
    while len([x for x in lines if x.startswith("SCALING-READY ")]) < servers:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    return proc, port, lines


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return proc.returncode, [json.loads(x[14:]) for x in out.splitlines() if "STATS" in x]


def echo_once(port, payload):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            assert chunk, "the server closed the connection"
            got += chunk
        return got


def http_twice(port):
    """Two keep-alive requests on one connection: the raw answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        got = b""
        while got.count(serve.JSON_BODY) < 2:
            chunk = s.recv(65536)
            assert chunk, "the server closed the connection"
            got += chunk
        return got


def check_arrangement(arrangement, servers, app):
    proc, port, lines = start(arrangement, servers, app)
    try:
        assert sorted(lines) == [f"SCALING-READY {i}\n" for i in range(servers)], lines
        for i in range(8):  # 8 connections: SO_REUSEPORT spreads them
            if app == "echo":
                payload = os.urandom(1024) + bytes([i])
                assert echo_once(port, payload) == payload
            else:
                got = http_twice(port)
                assert got.startswith(b"HTTP/1.1 200 ")
                assert got.count(b"HTTP/1.1 200 ") == 2
    finally:
        rc, counted = stop(proc)
    assert rc == 0
    assert sorted(s["index"] for s in counted) == list(range(servers))
    assert sum(s["connections"] for s in counted) == 8
    if app == "echo":
        assert sum(s["bytes_out"] for s in counted) == 8 * 1025
    else:
        assert sum(s["requests"] for s in counted) == 16


@needs_interpreters
@pytest.mark.parametrize("servers", [1, 2])
@pytest.mark.parametrize("app", ["echo", pytest.param("http", marks=needs_h11)])
def test_asyncio_in_interpreters_answers_on_the_shared_port(servers, app):
    check_arrangement("interp", servers, app)


@pytest.mark.parametrize("servers", [1, 2])
@pytest.mark.parametrize("app", ["echo", pytest.param("http", marks=needs_h11)])
def test_asyncio_in_this_process_answers_on_the_shared_port(servers, app):
    check_arrangement("thread", servers, app)


@needs_interpreters
def test_zloopgo_in_interpreters_either_serves_or_is_refused_with_the_import_error():
    proc, port, lines = start("interp", 2, "echo", loop="zloopgo")
    if all(x.startswith("SCALING-READY ") for x in lines):  # it loads there: it must serve
        try:
            assert echo_once(port, b"x" * 1024) == b"x" * 1024
        finally:
            assert stop(proc)[0] == 0
        return
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3
    status, detail = bench.failure_of("".join(lines) + out)
    assert status == "refused", detail
    assert detail.startswith("ImportError: ")


@pytest.mark.skipif(shutil.which("go") is None, reason="go builds the load generator")
def test_one_echo_sample_of_two_servers_is_measured_and_its_counts_agree(tmp_path):
    loadgen = tmp_path / "loadgen"
    subprocess.run(
        ["go", "build", "-o", loadgen, "./bench_uvloop/loadgen"], cwd=bench.ROOT, check=True
    )
    opts = argparse.Namespace(
        loadgen=str(loadgen), conns=4, duration=0.3, warmup=0.0, pin_server=[], pin_client=[]
    )
    t0 = time.monotonic()
    res = bench.run_sample(opts, "echo", "proc", "asyncio", 2, str(tmp_path))
    assert res["status"] == "ok", res
    assert time.monotonic() - t0 < 30
    assert res["rate"] > 0 and res["server_cpu_us"] > 0 and res["peak_rss_mib"] > 0
    assert sum(res["connections"]) == 4
    assert sum(res["per_server"]) == res["client"]["requests"]
