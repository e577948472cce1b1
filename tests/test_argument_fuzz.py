"""Every argument that goes from Python into the adapter's C code, fuzzed
against asyncio: each method slot of tests/_argfuzz_worker.py gets every
odd value there (negative, zero, huge, float, NaN, infinities, bool, None,
strings, objects whose __index__, __float__, __bool__ or fileno() raise or
lie, real, closed and regular-file descriptors, ...), in debug mode and
out of it, and the exception type and message of the call, what it
returned and what the next iteration did must be asyncio's.

The cases run in worker subprocesses, in chunks with a timeout each, so a
crash or a hang is a failure naming its chunk. By default every slot meets
every value (a few thousand cases); ZL_ARGFUZZ_SAMPLE=N runs a random
sample of N instead (seeded by ZL_ARGFUZZ_SEED).

The differences listed in KNOWN are zloopgo's documented ones, each
checked to be exactly what it says: where asyncio accepts a value and
fails on it only later, zloopgo refuses it at the call."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("_argfuzz_worker.py")
CHUNK = 400
CHUNK_TIMEOUT = 240


def _load_worker():
    sys.path.insert(0, str(WORKER.parent))
    try:
        import _argfuzz_worker
    finally:
        sys.path.pop(0)
    return _argfuzz_worker


def _cases():
    worker = _load_worker()
    cases = [
        [slot, value, debug]
        for slot in worker.SLOTS
        for value in worker.VALUES
        for debug in (False, True)
    ]
    sample = int(os.environ.get("ZL_ARGFUZZ_SAMPLE", "0"))
    if sample:
        rng = random.Random(int(os.environ.get("ZL_ARGFUZZ_SEED", "0")))
        cases = rng.sample(cases, min(sample, len(cases)))
    return cases


def _run_chunk(chunk):
    proc = subprocess.run(
        [sys.executable, str(WORKER)],
        input="".join(json.dumps(c) + "\n" for c in chunk),
        capture_output=True,
        text=True,
        timeout=CHUNK_TIMEOUT,
        check=False,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    if proc.returncode != 0:
        done = len(results)
        raise AssertionError(
            f"worker exit {proc.returncode} at case {chunk[done] if done < len(chunk) else '?'}"
            f"\n{proc.stderr[-3000:]}"
        )
    return results


def _known(slot, value, debug, a, z):
    """Why a difference is zloopgo's documented one, or None."""
    # asyncio keeps any deadline object in its heap and fails only when its
    # run loop compares it or computes `when - time()`; zloopgo converts the
    # deadline to a float at the call, and raises what that conversion
    # raises. Only where asyncio's run then fails.
    if (
        slot in ("call_at(when)", "call_later(delay)")
        and a["call"][0] == "returned"
        and a["ran"][:2] in (["run raised", "TypeError"], ["run raised", "OverflowError"])
        and z["call"][0] == "raised"
        and z["ran"] == ["ran"]
    ):
        return "a deadline that is not a real number"
    # An int deadline beyond a float's range: asyncio fails on it once it
    # computes a wait from it (OverflowError from its run loop), zloopgo at
    # the call.
    if (
        slot == "call_at(when)"
        and a["call"][0] == "returned"
        and z["call"][:2] == ["raised", "OverflowError"]
        and value in ("10**400",)
    ):
        return "an int deadline too large for a float"
    # set_debug(x): asyncio stores x and asks bool(x) wherever it checks
    # debug mode (the next iteration raises what __bool__ raises); zloopgo
    # asks once, at set_debug(), which raises it.
    if (
        slot == "set_debug"
        and a["call"][0] == "returned"
        and a["ran"][0] == "run raised"
        and z["call"][:2] == ["raised", a["ran"][1]]
    ):
        return "the debug flag's truth taken when it is set"
    return None


def test_every_argument_the_adapter_takes_behaves_as_on_asyncio():
    cases = _cases()
    differences, known = [], {}
    for start in range(0, len(cases), CHUNK):
        for (slot, value, debug), out in _run_chunk(cases[start : start + CHUNK]):
            a, z = out["asyncio"], out["zloopgo"]
            if a == z:
                continue
            why = _known(slot, value, debug, a, z)
            if why is not None:
                known[why] = known.get(why, 0) + 1
                continue
            differences.append(f"{slot} <- {value} (debug={debug}):\n  asyncio {a}\n  zloopgo {z}")
    assert not differences, f"{len(differences)} of {len(cases)} differ:\n" + "\n".join(
        differences[:40]
    )


@pytest.mark.parametrize(
    "slot, value",
    [("call_at(when)", "'1'"), ("call_at(when)", "Opaque"), ("call_at(when)", "IndexRaises")]
    + [("call_later(delay)", "complex"), ("call_at(when)", "10**400")]
    + [("set_debug", "BoolRaises")],
)
def test_the_known_differences_are_what_they_say(slot, value):
    # What asyncio accepts and fails on only later, zloopgo refuses at the call.
    ((_, out),) = _run_chunk([[slot, value, False]])
    a, z = out["asyncio"], out["zloopgo"]
    assert a["call"][0] == "returned"
    assert z["call"][0] == "raised" and z["ran"] == ["ran"]
    assert _known(slot, value, False, a, z) is not None
