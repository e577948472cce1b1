"""probes/callgrind_costs.py and probes/instructions.py's --split: code
inlined from another source file counts in the object it ran in. The
callgrind file is written here; valgrind is not needed."""

from .. import callgrind_costs, instructions

PYTHON = "/usr/bin/python3.14"
ASYNCPG = "/venv/lib/python3.14/site-packages/asyncpg/protocol/protocol.so"
ZLOOPGO = "/venv/lib/python3.14/site-packages/zloopgo/_zloopgo.so"

# The interpreter calls asyncpg's data_received, which runs code inlined
# from a header (fi=, then fe= back to its own file), then zloopgo's
# adapter, whose hand-over is inlined from zl.h; callgrind_annotate lists
# the inlined lines as "header:function" without the object.
INLINED = f"""version: 1
creator: callgrind-3.24.0
positions: line
events: Ir
summary: 1000

ob=(1) {PYTHON}
fl=(1) ./Python/ceval.c
fn=(1) _PyEval_EvalFrameDefault
10 100
cob=(2) {ASYNCPG}
cfi=(2) asyncpg/protocol/protocol.c
cfn=(2) __pyx_f_data_received
calls=1 20
11 700

ob=(2)
fl=(2)
fn=(2)
20 150
fi=(3) asyncpg/pgproto/frb.h
21 400
fe=(2)
22 50

ob=(3) {ZLOOPGO}
fl=(4) capi/ready.c
fn=(3) zl_entry_run_release
30 60
fi=(5) capi/zl.h
31 200
fe=(4)
32 40
"""


def test_inlined_lines_count_in_their_function_and_object():
    costs = callgrind_costs.own_costs(INLINED)
    assert costs == {
        (PYTHON, "./Python/ceval.c", "_PyEval_EvalFrameDefault"): 100,
        (ASYNCPG, "asyncpg/protocol/protocol.c", "__pyx_f_data_received"): 600,
        (ZLOOPGO, "capi/ready.c", "zl_entry_run_release"): 300,
    }


def test_split_files_inlined_code_by_its_object(tmp_path):
    out = tmp_path / "callgrind.out"
    out.write_text(INLINED)
    parts = instructions.split(str(out))
    assert parts["python"] == 100
    assert parts["adapter (C)"] == 300
    # asyncpg's extension is neither the interpreter nor a loop's
    assert parts["other"] == 600
    assert parts["another loop's"] == 0
    assert sum(parts.values()) == 1000


def test_a_rivals_object_is_another_loops_and_a_drivers_is_not():
    rival = "/venv/lib/python3.14/site-packages/uvloop/loop.cpython-314-x86_64-linux-gnu.so"
    assert instructions.part_of(f"uvloop/loop.c:__pyx_f_run [{rival}]") == "another loop's"
    assert instructions.part_of(f"asyncpg/protocol/protocol.c:f [{ASYNCPG}]") == "other"
    # zloopgo's own object is split into its adapter and its engine
    assert instructions.part_of(f"capi/ready.c:zl_run [{ZLOOPGO}]") == "adapter (C)"
