"""benchmark/apps without servers: which latency samples the application
rows run and which of them a row's figure is, and the report's tables
built from given samples. No process is started and no time is read."""

import types

from ..apps import bench, report
from ..apps.rows import SERVER_ROWS

ROWS = list(SERVER_ROWS["uvicorn"][:2])  # JSON, single query


def _opts(**kw):
    base = {
        "warmup": 0.15,
        "latency_duration": 0.4,
        "latency_samples": 3,
        "loads": [0.5, 0.9],
        "rounds": 1,
        "duration": 0.5,
        "contenders": ["asyncio", "zloopgo", "uvloop"],
        "servers": ["uvicorn"],
        "heading": "##",
        "skipped": "",
        "pin_server": ["taskset", "-c", "0"],
        "pin_client": ["taskset", "-c", "1"],
        "versions": {},
        "services": "PostgreSQL x, Redis y",
        "hung": {},
    }
    base.update(kw)
    return types.SimpleNamespace(**base)


def _live(*loops):
    return {loop: (8000 + i, 100 + i) for i, loop in enumerate(loops)}


def test_latency_samples_rotate_the_rows_and_skip_a_rate_above_the_loops_maximum(monkeypatch):
    ran = []

    def fake_load(opts, server, port, pid, row, rate, duration, warmup):
        ran.append((row[0], round(rate), warmup))
        return {"status": "ok", "rate": rate, "p99_us": 100.0}

    monkeypatch.setattr(bench, "load", fake_load)
    base = {"JSON serialization": 1000.0, "single query": 200.0}
    # this loop reaches 600/s on JSON: 50% (500/s) runs, 90% (900/s) does not
    ceilings = {"zloopgo": {"JSON serialization": 600.0, "single query": None}}
    got = bench.measure_latency(_opts(), "uvicorn", ROWS, base, ceilings, _live("zloopgo"))
    got = got["zloopgo"]
    assert ran == [("JSON serialization", 500, 0.15)] + [("JSON serialization", 500, 0.05)] * 2
    saturated = [s for s in got if s["status"] == "saturated"]
    assert [(s["row"], s["load"]) for s in saturated] == [
        ("JSON serialization", 0.9),
        ("single query", 0.5),
        ("single query", 0.9),
    ]
    assert "no maximum measured" in saturated[1]["detail"]
    assert "600/s" in saturated[0]["detail"]
    assert [s["sample"] for s in got if s["status"] == "ok"] == [1, 2, 3]


def test_the_rows_of_a_latency_pass_are_rotated_between_samples(monkeypatch):
    order = []
    monkeypatch.setattr(
        bench,
        "load",
        lambda *a: order.append(a[4][0]) or {"status": "ok", "p99_us": 1.0, "rate": 1.0},
    )
    base = {"JSON serialization": 10.0, "single query": 10.0}
    ceilings = {"zloopgo": dict.fromkeys(base, 100.0)}
    opts = _opts(loads=[0.5])
    bench.measure_latency(opts, "uvicorn", ROWS, base, ceilings, _live("zloopgo"))
    assert order == ["JSON serialization", "single query", "single query"] + [
        "JSON serialization",
        "JSON serialization",
        "single query",
    ]


def test_every_loop_takes_a_row_before_the_next_row_starts_in_rotated_order(monkeypatch):
    ports = {}
    order = []

    def fake_load(opts, server, port, pid, row, rate, duration, warmup):
        order.append((row[0], ports[port]))
        return {"status": "ok", "rate": 1.0, "p99_us": 1.0}

    monkeypatch.setattr(bench, "load", fake_load)
    live = _live("asyncio", "zloopgo", "uvloop")
    ports.update({port: loop for loop, (port, _) in live.items()})
    got = bench.measure_throughput(_opts(), "uvicorn", ROWS, live)
    assert order == [
        ("JSON serialization", "asyncio"),
        ("JSON serialization", "zloopgo"),
        ("JSON serialization", "uvloop"),
        ("single query", "zloopgo"),
        ("single query", "uvloop"),
        ("single query", "asyncio"),
    ]
    assert [s["row"] for s in got["uvloop"]] == ["JSON serialization", "single query"]
    # the latency pass interleaves the loops within each (row, rate) too
    order.clear()
    base = {"JSON serialization": 10.0, "single query": 10.0}
    ceilings = {loop: dict.fromkeys(base, 100.0) for loop in live}
    opts = _opts(loads=[0.5], latency_samples=1)
    bench.measure_latency(opts, "uvicorn", ROWS, base, ceilings, live)
    assert [row for row, _ in order] == ["JSON serialization"] * 3 + ["single query"] * 3
    assert [loop for _, loop in order][3:] == ["zloopgo", "uvloop", "asyncio"]


def test_a_server_that_died_turns_its_ok_samples_into_its_fate_and_keeps_failed_starts():
    fleet = types.SimpleNamespace(
        fates={"uvloop": {"status": "crash", "detail": "server exited with -11 during the run"}},
        failed={"rloop": [{"row": "JSON serialization", "status": "error", "detail": "x"}]},
    )
    measured = {
        "zloopgo": [{"row": "JSON serialization", "status": "ok", "rate": 5.0}],
        "uvloop": [{"row": "JSON serialization", "status": "ok", "rate": 4.0}],
    }
    got = bench.gather(fleet, measured, server="uvicorn", round="1", part="throughput")
    status = {s["loop"]: s["status"] for s in got}
    assert status == {"zloopgo": "ok", "uvloop": "crash", "rloop": "error"}
    assert all(s["server"] == "uvicorn" and s["part"] == "throughput" for s in got)


def _lat(loop, p99, sample, row="JSON serialization", load=0.9):
    return {
        "part": "latency",
        "server": "uvicorn",
        "row": row,
        "loop": loop,
        "load": load,
        "status": "ok",
        "target": 900.0,
        "sample": sample,
        "rate": 900.0,
        "p50_us": p99 / 4,
        "p99_us": p99,
        "p999_us": p99 * 2,
        "max_us": p99 * 3,
        "late": 0,
    }


def test_a_cells_latency_figure_is_its_median_p99_sample():
    found = [_lat("zloopgo", 5000, 1), _lat("zloopgo", 700, 2), _lat("zloopgo", 900, 3)]
    found += [_lat("uvloop", 800, 1), _lat("uvloop", 600, 2)]
    fig = report.latency_figures(found, 0.9)
    assert fig[("uvicorn", "JSON serialization", "zloopgo")]["sample"] == 3
    # an even count: the lower of the middle two
    assert fig[("uvicorn", "JSON serialization", "uvloop")]["p99_us"] == 600


def _thr(loop, rate, cpu, row="JSON serialization"):
    return {
        "part": "throughput",
        "server": "uvicorn",
        "row": row,
        "loop": loop,
        "status": "ok",
        "rate": rate,
        "server_cpu_us": cpu,
        "server_busy": 0.5,
        "round": "1",
    }


def test_the_report_ranks_server_cpu_per_request_lowest_first_and_shows_the_median_p99():
    found = [_thr("asyncio", 1000, 90.0), _thr("zloopgo", 1500, 50.0), _thr("uvloop", 1400, 60.0)]
    found += [_lat("asyncio", 3000, 1), _lat("zloopgo", 5000, 1), _lat("zloopgo", 700, 2)]
    found += [_lat("zloopgo", 900, 3), _lat("uvloop", 800, 1)]
    text = report.markdown(_opts(loads=[0.9]), found, {}, 1.0)
    cpu_table = text.split("Server CPU time per request")[1].split("\n\n")[1]
    json_row = next(line for line in cpu_table.splitlines() if "JSON serialization" in line)
    cells = [c.strip() for c in json_row.strip("|").split("|")]
    # asyncio, zloopgo, uvloop; zloopgo vs asyncio, vs uvloop; place
    assert cells[2:] == ["90.0", "50.0", "60.0", "1.80x", "1.20x", "1st of 3"]
    busy_table = text.split("Server busy:")[1].split("\n\n")[1]
    assert "| uvicorn | JSON serialization | 50% | 50% | 50% |" in busy_table
    p99_table = text.split("p99 latency at 90%")[1].split("\n\n")[1]
    json_row = next(line for line in p99_table.splitlines() if "JSON serialization" in line)
    cells = [c.strip() for c in json_row.strip("|").split("|")]
    assert cells[3:6] == ["3,000", "900", "800"]
