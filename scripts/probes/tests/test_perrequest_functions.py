"""probes/perrequest_functions.py: callgrind's output format read into each
function's own instructions (compressed names, a call's inclusive cost
not counted in its caller), the kept files found by the names
probes/perrequest.py gives them, and the functions that moved between
repetitions listed first. The callgrind files are written here; valgrind
is not needed."""

import types

from .. import callgrind_costs, perrequest, perrequest_functions

PYTHON = "/usr/bin/python3.14"
ZLOOPGO = "/venv/lib/python3.14/site-packages/zloopgo/_zloopgo.so"


def callgrind_file(eval_cost, run_once_cost):
    """A callgrind output: the interpreter's eval loop (eval_cost own, in
    two lines around a call) calling the engine's RunOnce (run_once_cost
    own), with name compression as callgrind writes it."""
    first, second = eval_cost - eval_cost // 4, eval_cost // 4
    return f"""version: 1
creator: callgrind-3.24.0
pid: 4242
positions: line
events: Ir
summary: {eval_cost + run_once_cost}

ob=(1) {PYTHON}
fl=(1) ./Python/ceval.c
fn=(1) _PyEval_EvalFrameDefault
10 {first}
cob=(2) {ZLOOPGO}
cfi=(2) core/loop.go
cfn=(2) github.com/zloopgo/core.(*Loop).RunOnce
calls=3 20
12 {run_once_cost}
+1 {second}

ob=(2)
fl=(2)
fn=(2)
20 {run_once_cost}
"""


def test_own_costs_count_each_function_without_its_callees():
    costs = callgrind_costs.own_costs(callgrind_file(800, 300))
    assert costs == {
        (PYTHON, "./Python/ceval.c", "_PyEval_EvalFrameDefault"): 800,
        (ZLOOPGO, "core/loop.go", "github.com/zloopgo/core.(*Loop).RunOnce"): 300,
    }
    parts = {where[2]: perrequest_functions.part(where) for where in costs}
    assert parts == {
        "_PyEval_EvalFrameDefault": "python",
        "github.com/zloopgo/core.(*Loop).RunOnce": "engine (Go)",
    }


def test_the_positions_line_says_which_column_is_the_cost():
    text = callgrind_file(800, 300).replace("positions: line", "positions: instr line")
    text = text.replace("\n10 ", "\n0x10 10 ").replace("\n12 ", "\n0x12 12 ")
    text = text.replace("\n+1 ", "\n+2 +1 ").replace("\n20 ", "\n0x20 20 ")
    costs = callgrind_costs.own_costs(text)
    assert sorted(costs.values()) == [300, 800]


def write_runs(where, runs):
    """Kept files as perrequest --keep names them: runs is a list of
    ((eval, run_once) for 50 requests, (eval, run_once) for 100)."""
    opts = types.SimpleNamespace(measure="instructions")
    row = perrequest.SERVER_ROWS["aiohttp"][2]  # 20 queries
    for run, (once, twice) in enumerate(runs, start=1):
        for requests, costs in ((50, once), (100, twice)):
            name = perrequest.out_name(opts, "aiohttp", row, "zloopgo", requests, run)
            (where / name).write_text(callgrind_file(*costs))


def test_kept_files_are_found_by_cell_run_and_requests(tmp_path):
    write_runs(tmp_path, [((800, 300), (1800, 800))] * 2)
    (tmp_path / "not-a-count.txt").write_text("")
    found = perrequest_functions.cells(str(tmp_path))
    assert list(found) == ["aiohttp-queries-zloopgo"]
    assert sorted(found["aiohttp-queries-zloopgo"]) == [1, 2]
    assert sorted(found["aiohttp-queries-zloopgo"][2]) == [50, 100]


def test_the_function_that_moved_between_runs_comes_first(tmp_path):
    # per request: the eval loop 20 in both runs; RunOnce 10, then 16
    write_runs(tmp_path, [((800, 300), (1800, 800)), ((800, 300), (1800, 1100))])
    lines = perrequest_functions.report(str(tmp_path), top=5).splitlines()
    assert lines[0] == "aiohttp-queries-zloopgo: 2 runs, own instructions per request"
    parts = {line.split()[0]: line.split()[-4:] for line in lines[2:4]}
    assert parts == {"python": ["20", "20", "20", "0"], "engine": ["10", "13", "16", "6"]}
    movers = [line.split() for line in lines[5:]]
    assert movers[0][:4] == ["6", "10", "13", "16"]
    assert movers[0][-1] == "github.com/zloopgo/core.(*Loop).RunOnce"
    assert movers[1][:4] == ["0", "20", "20", "20"]


def test_a_cell_with_one_complete_run_is_not_compared(tmp_path):
    write_runs(tmp_path, [((800, 300), (1800, 800))] * 2)
    (tmp_path / "instructions-aiohttp-queries-zloopgo-100-run2.out").unlink()
    report = perrequest_functions.report(str(tmp_path), top=5)
    assert report == "aiohttp-queries-zloopgo: 1 complete run(s), nothing to compare"


def test_threads_other_than_the_loops_count_apart(tmp_path):
    # --threads: each run in files -01 (the loop's thread) and -02
    opts = types.SimpleNamespace(measure="instructions")
    row = perrequest.SERVER_ROWS["aiohttp"][2]
    for run, other in ((1, 300), (2, 700)):
        for requests, scale in ((50, 1), (100, 2)):
            name = perrequest.out_name(opts, "aiohttp", row, "zloopgo", requests, run)
            (tmp_path / f"{name}-01").write_text(callgrind_file(800 * scale, 100 * scale))
            (tmp_path / f"{name}-02").write_text(callgrind_file(0, other * scale))
    lines = perrequest_functions.report(str(tmp_path), top=5).splitlines()
    parts = {line[:18].strip(): line[18:].split() for line in lines[2:5]}
    assert parts == {
        "python": ["16", "16", "16", "0"],
        "engine (Go)": ["2", "2", "2", "0"],
        "other threads": ["6", "10", "14", "8"],
    }
    assert lines[6].split()[:4] == ["8", "6", "10", "14"]
    assert lines[6].endswith("other threads: github.com/zloopgo/core.(*Loop).RunOnce")
