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

The scheduling methods also run on a loop closed first (asyncio checks
its arguments' shape and a None deadline before the loop). The differences
_known lists are zloopgo's documented ones (one of them Windows'), each
checked to be exactly what it says."""

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


# Values made for deadlines (comparisons that raise, conversions that
# lie): they go to the scheduling methods and timer comparisons only. As a
# descriptor, IntHostile makes asyncio's selector fail (it looks the
# descriptor epoll reports up in a dict keyed by the object given to
# add_writer, which calls its __eq__), where zloopgo's table of ints does
# not: a kept difference, asserted by tests/test_bad_input.py.
DEADLINE_VALUES = {"FloatLtRaises", "IntHostile", "EqLtRaises", "FloatOnly", "-10**400"}


def _takes(slot, value):
    return value not in DEADLINE_VALUES or slot.startswith(("call_", "TimerHandle"))


def _cases():
    worker = _load_worker()
    cases = [
        [slot, value, debug]
        for slot in worker.SLOTS
        for value in worker.VALUES
        if _takes(slot, value)
        for debug in (False, True)
    ]
    # the scheduling methods on a closed loop too: asyncio checks its
    # arguments' shape, then `when` against None, before the loop
    cases += [
        [slot, value, debug, True]
        for slot in worker.SLOTS
        if slot.startswith("call_")
        for value in worker.VALUES
        for debug in (False, True)
    ]
    sample = int(os.environ.get("ZL_ARGFUZZ_SAMPLE", "0"))
    if sample:
        rng = random.Random(int(os.environ.get("ZL_ARGFUZZ_SEED", "0")))
        cases = rng.sample(cases, min(sample, len(cases)))
    return cases


# ERROR_INTERNAL_ERROR: Wine 8's CreateProcess now and then fails with it
# on a loaded machine, before the worker exists (no case has run)
_WINE_CREATEPROCESS_FAILURE = 1359


def _start_worker(chunk):
    def run():
        return subprocess.run(
            [sys.executable, str(WORKER)],
            input="".join(json.dumps(c) + "\n" for c in chunk),
            capture_output=True,
            text=True,
            timeout=CHUNK_TIMEOUT,
            check=False,
        )

    for _ in range(2):
        try:
            return run()
        except OSError as exc:
            if getattr(exc, "winerror", None) != _WINE_CREATEPROCESS_FAILURE:
                raise
    return run()


def _run_chunk(chunk):
    proc = _start_worker(chunk)
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
    # Windows: add_reader/add_writer of a descriptor select() cannot watch
    # there (a pipe, a standard handle's number, any int not a socket's:
    # WSAENOTSOCK) or beyond a C int: asyncio's selector loop takes it and
    # its next select() raises, leaving the loop unusable; zloopgo refuses
    # it at the call, as asyncio's epoll and kqueue loops refuse what they
    # cannot watch on Unix (docs/compatibility.md, "Windows").
    if (
        sys.platform == "win32"
        and slot.startswith(("add_reader(", "add_writer("))
        and a["call"] == ["returned", "None"]
        and a["ran"][0] == "run raised"
        and z["call"][0] == "raised"
        and z["ran"] == ["ran"]
        and (
            z["call"][1:3] == a["ran"][1:3]
            or (
                a["ran"][1:2] == ["OSError"]
                and a["ran"][2].startswith("[WinError 10038]")
                and z["call"][1] == "PermissionError"
            )
        )
    ):
        return "Windows: add_reader/add_writer refuse at the call what select() fails on"
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
        for (slot, value, debug, *closed), out in _run_chunk(cases[start : start + CHUNK]):
            a, z = out["asyncio"], out["zloopgo"]
            if a == z:
                continue
            why = _known(slot, value, debug, a, z)
            if why is not None:
                known[why] = known.get(why, 0) + 1
                continue
            where = f"{slot} <- {value} (debug={debug}{', closed' if closed else ''})"
            differences.append(f"{where}:\n  asyncio {a}\n  zloopgo {z}")
    assert not differences, f"{len(differences)} of {len(cases)} differ:\n" + "\n".join(
        differences[:40]
    )


def test_the_known_difference_is_what_it_says():
    ((_, out),) = _run_chunk([["set_debug", "BoolRaises", False]])
    a, z = out["asyncio"], out["zloopgo"]
    assert a["call"][0] == "returned" and z["call"][0] == "raised"
    assert _known("set_debug", "BoolRaises", False, a, z) is not None


@pytest.mark.parametrize(
    "slot, value, closed",
    [
        ("call_at(when)", "'1'", False),
        ("call_at(when)", "Opaque", False),
        ("call_at(when)", "IndexRaises", False),
        ("call_later(delay)", "complex", False),
        ("call_at(when)", "10**400", False),
        ("call_at(when)", "FloatLtRaises", False),
        ("call_at(when)", "EqLtRaises", False),
        ("call_at(when)", "'1'", True),
        ("call_soon(callback=)", "noop", False),
        ("call_at(when=, callback=)", "0", True),
    ],
)
def test_deadlines_and_signatures_asyncio_takes(slot, value, closed):
    # Until 2026-12-06 zloopgo refused at the call a deadline asyncio takes
    # and fails on only when its heap or run loop compares it, converted it
    # before checking the loop, and bound its arguments itself: each such
    # case is now asyncio's, call and run.
    ((_, out),) = _run_chunk([[slot, value, False, closed]])
    assert out["zloopgo"] == out["asyncio"]
    if slot.startswith("call_at(when)") and not closed:
        assert out["asyncio"]["call"][0] == "returned", out  # the case shows what it says
