"""zloopgo and CPython's subinterpreters (issue 41). The module keeps
process-wide Python objects still (docs/architecture.md, "State: per
process, per interpreter, per loop"), so it must refuse every interpreter
but the main one, isolated (its own GIL: Py_mod_multiple_interpreters) or
legacy (sharing the main GIL: the module's exec refuses it), rather than
hand it the main interpreter's objects, or overwrite them with its own.
asyncio itself runs in both kinds: each scenario runs the same program on
asyncio first, as the reference. The main interpreter's loops keep running
afterwards. Each scenario runs in its own process: a mix-up of two
interpreters' objects may crash."""

import importlib.util

import pytest
from helpers import check, run_script

# Runs `program` (which sets `outcome`) in a new subinterpreter of the kind
# asked for; the outcome comes back through a file, as subinterpreters share
# no objects.
SUBINTERPRETER = """
import os, tempfile
outcome_file = os.path.join(tempfile.mkdtemp(), "outcome")
PROGRAM = '''
import asyncio, sys
outcome = "unset"
try:
    import zloopgo
    async def main():
        await asyncio.sleep(0.001)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop.call_later(0.001, fut.set_result, 21)
        return await fut * 2
    loop = LOOP
    try:
        outcome = "ran %d" % loop.run_until_complete(main())
    finally:
        loop.close()
except ImportError as exc:
    outcome = "ImportError: %s" % exc
with open(OUTCOME_FILE, "w") as f:
    f.write(outcome)
'''
def in_subinterpreter(kind, loop_code):
    program = PROGRAM.replace("LOOP", loop_code).replace("OUTCOME_FILE", repr(outcome_file))
    if kind == "legacy":
        import _testcapi
        assert _testcapi.run_in_subinterp(program) == 0
    else:
        from concurrent import interpreters
        interp = interpreters.create()
        try:
            interp.exec(program)
        finally:
            interp.close()
    with open(outcome_file) as f:
        return f.read()

async def in_main():
    await asyncio.sleep(0.001)
    return "main ran"
"""

LOOP_CODE = {"asyncio": "asyncio.SelectorEventLoop()", "zloopgo": "zloopgo.new_event_loop()"}

KINDS = [
    pytest.param(
        "legacy",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("_testcapi") is None
            or not hasattr(importlib.import_module("_testcapi"), "run_in_subinterp"),
            reason="needs _testcapi.run_in_subinterp (a legacy subinterpreter)",
        ),
    ),
    pytest.param(
        "isolated",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("concurrent.interpreters") is None,
            reason="needs concurrent.interpreters (3.14+)",
        ),
    ),
]

# CPython's message for isolated interpreters, and the start of the
# module's own for legacy ones
REFUSED = "ImportError: module zloopgo._engine does not support loading in subinterpreters"


def expected(loop_name, kind):
    """What the subinterpreter's program reports: asyncio runs there; zloopgo
    refuses to load (docs/compatibility.md)."""
    return "ran 42" if loop_name == "asyncio" else "refused"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("loop_name", ["asyncio", "zloopgo"])
@pytest.mark.parametrize("main_first", [True, False], ids=["main-first", "sub-first"])
def test_a_subinterpreter_runs_asyncio_and_is_refused_zloopgo(loop_name, kind, main_first):
    """Whether the main interpreter imported zloopgo (and ran a loop) first
    or not, the subinterpreter gets asyncio's result or zloopgo's refusal,
    and the main interpreter's zloopgo loop runs after it."""
    body = SUBINTERPRETER + (
        f"""
if {main_first}:
    print(zloopgo.new_event_loop().run_until_complete(in_main()))
outcome = in_subinterpreter({kind!r}, {LOOP_CODE[loop_name]!r})
print("sub: refused" if outcome.startswith({REFUSED!r}) else "sub: " + outcome)
loop = zloopgo.new_event_loop()
print(loop.run_until_complete(in_main()))
loop.close()
"""
    )
    proc = run_script("zloopgo", body, timeout=120)
    check(proc, "sub: " + expected(loop_name, kind), "main ran")


def test_the_module_imported_again_makes_a_working_loop_type():
    """Multi-phase init runs the module's exec again when it is imported
    again (deleted from sys.modules), making a second LoopCore and collector
    hook: loops of both modules work side by side (each with its module's
    asyncio objects and 3.14's _ThreadSafeHandle runner), with handles
    referenced from elsewhere and a collection."""
    body = """
import gc
first = zloopgo.new_event_loop()
for name in [n for n in sys.modules if n == "zloopgo" or n.startswith("zloopgo.")]:
    del sys.modules[name]
import zloopgo as again
second = again.new_event_loop()
async def work(tag):
    loop = asyncio.get_running_loop()
    kept = [loop.call_soon(lambda: None) for _ in range(3)]  # referenced from elsewhere
    gc.collect()
    fut = loop.create_future()
    loop.call_later(0.001, fut.set_result, tag)
    other = threading.Thread(target=loop.call_soon_threadsafe, args=(kept.append, None))
    other.start()
    other.join()
    await loop.create_task(asyncio.sleep(0.01))
    return await fut, len(kept), loop.time() > 0
for loop in (first, second):
    print(loop.run_until_complete(work(type(loop).__module__)))
    loop.close()
"""
    proc = run_script("zloopgo", body)
    check(proc, "('zloopgo._loop', 4, True)")
    assert proc.stdout.splitlines().count("('zloopgo._loop', 4, True)") == 2, proc.stdout
