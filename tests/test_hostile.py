"""Generated hostile programs (issue 39, tests/hostile/): callbacks,
arguments, buffers and overrides that re-enter the loop from their
special methods, cancellation at every await, the descriptor canary and
what the exception handler sees, over handles and timers, files,
datagrams, the sock_* methods, read pipes and the objects whose methods
are native (class swaps, bare instances, subclasses; the transports' are in
tests/test_transport_differential.py, which draws from the same
vocabulary). Each program runs on asyncio and on zloopgo in worker
processes of their own, with PYTHONMALLOC=debug (a use after free
crashes) and a journal (a crash is compared where it happened); every
observation must be the same.

The fixed run: PROGRAMS[machine] programs per machine from seed
ZL_HOSTILE_SEED ("1"), scaled by ZL_HOSTILE_EXAMPLES (a total; 400 by
default, shared as SHARE says); set it higher for a long run (e.g.
5000), or use the command line (`python -m tests.hostile --help`).
ZL_HOSTILE_AGAINST=asyncio runs asyncio against itself (what the harness
costs, whether it is deterministic). A failure prints the program
`search.minimize` shrank it to (at most ZL_HOSTILE_SHRINK runs), the
difference, and the command that replays it.

test_known_programs replays the minimal programs of issue 39's rows 1-7
that the generator found on the code that issue reviewed
(tests/hostile/known/, each with a note; docs/hostile.md has how many
programs each took), and those of the differences it found that issue
39 does not list (tests/hostile/found/): every one must now show no
difference.
test_the_harness_agrees_with_itself runs a few programs per machine on
asyncio twice: a difference there is the harness's.
test_late_records_are_the_late_threads_own checks the harness alone: what
a trap called in another thread records is kept apart from what the
loop's thread records meanwhile; test_a_step_lets_go_of_what_finished_frames_held
that what a kept traceback's frames held is finalized in its step.
"""

import gc
import glob
import importlib.util
import json
import operator
import os
import sys
import threading

import pytest
from hostile import bugs, machines, search, vocab
from hostile.host import Host
from transport_diff import compare

SEED = os.environ.get("ZL_HOSTILE_SEED", "1")
AGAINST = os.environ.get("ZL_HOSTILE_AGAINST", "zloopgo")
TOTAL = int(os.environ.get("ZL_HOSTILE_EXAMPLES", "400"))
# each machine's share of the programs (what one program costs differs:
# files and pipes wait for threads and children, handles do not)
SHARE = {
    "handles": 0.3,
    "files": 0.13,
    "datagram": 0.13,
    "sockops": 0.18,
    "pipes": 0.13,
    "natives": 0.13,
}
SELF_CHECK = 4
COMPANION_EXAMPLES = int(os.environ.get("ZL_HOSTILE_COMPANION_EXAMPLES", "12"))
MACHINES = machines.available()  # on Windows, not machines.ABSENT_ON_WINDOWS
KNOWN = [
    path
    for folder in ("known", "found")
    for path in sorted(
        glob.glob(os.path.join(os.path.dirname(__file__), "hostile", folder, "*.json"))
    )
]


@pytest.fixture(scope="module")
def pair():
    with search.pair(against=AGAINST) as p:
        yield p


def _not_known(diff, program):
    """Whether a difference counts: on Windows, not one of
    machines.KNOWN_ON_WINDOWS (none applies elsewhere)."""
    return machines.known_on_windows(diff, program) is None


def _fail(found, pair, tmp_path):
    program, diff, notes = search.minimize(pair, found, accept=_not_known)
    path = tmp_path / "program.json"
    path.write_text(json.dumps(program, indent=1))
    pytest.fail(
        f"{pair.names[1]} differs from {pair.names[0]} ({found.machine}, seed {SEED}, "
        f"program {found.index + 1}; issue 39 bugs it shows: {bugs.which(diff, program) or 'none'})"
        f"\n{json.dumps(program)}\n{diff.describe(notes)}\n"
        f"replay: python -m tests.hostile --replay {path} --show",
        pytrace=False,
    )


@pytest.mark.timeout(600)
@pytest.mark.parametrize("machine", MACHINES)
def test_zloopgo_matches_asyncio(pair, machine, tmp_path):
    examples = max(1, round(TOTAL * SHARE[machine]))
    found = search.search(pair, machine, SEED, examples, accept=_not_known)
    if found is not None:
        _fail(found, pair, tmp_path)


@pytest.mark.skipif(
    importlib.util.find_spec("concurrent.interpreters") is None,
    reason="needs concurrent.interpreters (CPython 3.14+)",
)
@pytest.mark.timeout(600)
@pytest.mark.parametrize("machine", MACHINES)
def test_zloopgo_matches_asyncio_beside_another_interpreter(machine, tmp_path):
    """The generated programs again, a few per machine, while an isolated
    interpreter of each worker streams checksummed data through a loop of
    its own with gc.set_threshold(1) (host.start_companion): on zloopgo two
    module objects are alive, in two interpreters with their own GILs,
    and the descriptor canary watches every close."""
    with search.pair(against=AGAINST, companion=True) as p:
        found = search.search(
            p, machine, f"{SEED}-companion", COMPANION_EXAMPLES, accept=_not_known
        )
        if found is not None:
            _fail(found, p, tmp_path)


@pytest.mark.parametrize("path", KNOWN, ids=[os.path.basename(p)[:-5] for p in KNOWN])
def test_known_programs(pair, path):
    with open(path) as f:
        program = json.load(f)
    diff, notes = search.run_pair(pair, program)
    if diff is not None:
        pytest.fail(
            f"{program['note']}\n{diff.describe(notes)}\n"
            f"replay: python -m tests.hostile --replay {os.path.relpath(path)} --show",
            pytrace=False,
        )


@pytest.mark.parametrize("machine", MACHINES)
def test_the_harness_agrees_with_itself(machine, tmp_path):
    with search.pair(against="asyncio") as p:
        found = search.search(p, machine, f"{SEED}-self", SELF_CHECK)
        if found is not None:
            _fail(found, p, tmp_path)


def test_late_records_are_the_late_threads_own():
    """A file call's trap runs in asyncio's executor thread (files.py:
    its records are "late", compared at the end in a fixed order) while
    the loop's thread records the program's next step: that step mark is
    the loop thread's, not late (files program 12 of found9, on 3.14: a
    1 ms timeout, the trap's __index__ collecting, the "step 1" mark
    among the late records when the collection took long). Here the
    collection runs a finalizer that holds the trap's thread inside the
    trap until the loop's thread has recorded."""
    host = Host({}, "asyncio")
    trap = vocab.Trap(host, ["trap", 1, {"__index__": [["collect"]]}, {"__index__": 0}])
    trap._late = 5  # the number of the call whose argument it is
    inside, recorded = threading.Event(), threading.Event()

    class Finalized:
        def __del__(self):
            inside.set()
            recorded.wait(30)

    gc.disable()
    try:
        garbage = Finalized()
        garbage.cycle = garbage
        del garbage
        worker = threading.Thread(target=operator.index, args=(trap,))
        worker.start()
        assert inside.wait(30)
        host.rec(["step", 1])
        recorded.set()
        worker.join(30)
    finally:
        gc.enable()
    assert host.obs == [["step", 1]]
    host.flush_late()
    assert host.obs == [["step", 1], ["late", [["act", "collect", None], ["trap", 1, "__index__"]]]]
    # a trap of a call that was cancelled or timed out: not compared
    host.late.append((5, ["trap", 1, "__index__"]))
    host.flush_late(lambda number: number != 5)
    assert len(host.obs) == 2
    assert host.notes["late, not compared"] == [["trap", 1, "__index__"]]


def test_a_step_lets_go_of_what_finished_frames_held():
    """An exception kept after its call returned (asyncio's `_fatal_error`
    hands it to a `connection_lost` that waits in a loop's queue) holds
    the frame it was raised in and, through f_back, the caller's frame,
    with the caller's locals: natives seed 40, a bytes subclass that
    asyncio's TLS `write` frame held to the program's end, where zloopgo's
    native methods give an exception one frame with no caller. The step's collection clears finished
    frames first (`hostile.host.release_finished_frames`), so the object's
    `__del__` runs in the step; frames still running, and a suspended
    generator's, are left as they are."""
    host = Host({}, "asyncio")
    kept = []

    def read():  # a Python method of asyncio's that catches and keeps
        try:
            raise AttributeError("get_buffer")
        except AttributeError as exc:
            kept.append(exc)

    def write(data):  # its caller, the user's object in a local
        read()

    def suspended():
        yield 1
        yield 2

    gen = suspended()
    next(gen)
    gc.disable()
    try:
        write(vocab.Trap(host, ["trap", 1, {"__del__": []}, {}]))
        host.collect_step()
        assert host.finalized == [["trap", 1, "__del__"]]
        assert host.obs == []
        assert len(kept) == 1 and kept[0].__traceback__.tb_frame.f_back.f_code.co_name == "write"
        assert next(gen) == 2
    finally:
        gc.enable()


def test_a_select_failure_on_a_closed_or_reused_value_is_named():
    """machines.KNOWN_ON_WINDOWS' select() failure: asyncio's observations
    end in the harness error of its select(), WSAENOTSOCK for a closed
    socket's value, or WSAEOPNOTSUPP once a canary's file or pipe took
    the value (under Wine, sockops program 2 of seed 1 since the canary
    fills every freed value); any other error is not it."""
    name = "asyncio's select() fails on a socket closed while registered"
    known = machines.KNOWN_ON_WINDOWS[name]
    before = [["own send", "bytes"], [["close_ours"], None, [], [], [False, False]]]

    def case(error, other_tail=(["end"],)):
        ref = before + [["loop closed"], ["harness error", error]]
        other = before + [[["close_ours"], None, [], [], [False, False]], *other_tail]
        return known(compare.first_difference(ref, other), {"machine": "sockops"})

    assert case("OSError: [WinError 10038] Windows Error 0x2736")
    assert case("OSError: [WinError 10045] Windows Error 0x273d")
    assert not case("OSError: [WinError 10054] Windows Error 0x2746")
    assert not case("OSError: [WinError 10045] x", other_tail=(["harness error", "y"],))


def test_a_stale_callback_on_a_reused_handle_value_is_named_alone():
    """machines.KNOWN_ON_WINDOWS' reused-value case, on the shape sockops
    program 5 of seed 1 showed under Wine (two receives waiting, our
    socket closed: asyncio's select() watches the canary socket that took
    the handle value and runs the reader, whose receive fails with
    WSAENOTSOCK; zloopgo's still waits), and not on its neighbours."""
    name = "asyncio's select() watches a closed socket's handle value, reused"
    known = machines.KNOWN_ON_WINDOWS[name]
    enotsock = ["OSError", 10038, "[WinError 10038] Windows Error 0x2736"]
    before = [
        [["recv", 1], None, ["waiting"], [], [True, False]],
        [["recv_into", "bytearray"], None, ["waiting", "waiting"], [], [True, False]],
    ]

    def case(
        step=("close_ours",),
        failed=enotsock,
        still="waiting",
        extra=("_sock_recv_into", "remove_reader"),
        machine="sockops",
    ):
        ref = before + list(extra) + [[list(step), None, ["waiting", failed], [1], [False, False]]]
        other = before + [[list(step), None, ["waiting", still], [], [False, False]]]
        if still != "waiting":
            other[-1][3] = [1]
        diff = compare.first_difference(ref, other)
        return known(diff, {"machine": machine}), diff

    taken, diff = case()
    assert taken
    assert machines.known_on_windows(diff, {"machine": "sockops"}) == (
        name if sys.platform == "win32" else None
    )
    assert case(extra=())[0]  # a loop not derived records no calls
    assert not case(machine="datagram")[0]
    assert not case(step=("peer_send", 1))[0]  # our socket still open
    assert not case(failed=["OSError", 10054, "reset"])[0]
    assert not case(failed="cancelled")[0]
    assert not case(still=enotsock, failed=["OSError", 10038, "other text"])[0]
    assert not case(extra=("_sock_recv_into", ["handler", "x", None]))[0]
