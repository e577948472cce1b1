"""The hostile machines by name: each one's program generator
(`generate(rng)` -> a JSON program) and runner (`run(program, loop_name,
journal)` -> (observations, notes), in a worker)."""

import importlib
import sys

# name -> module (in tests/hostile/ or a differential test module of tests/)
MODULES = {
    "handles": "hostile.handles",
    "files": "hostile.files",
    "datagram": "hostile.datagram",
    "sockops": "hostile.sockops",
    "pipes": "hostile.pipes",
    "natives": "hostile.natives",
}


# What a machine drives that Windows does not have, by machine: it is not
# run there (tests/test_hostile.py).
ABSENT_ON_WINDOWS = {
    # connect_read_pipe over a POSIX pipe, a socket pair and a
    # pseudo-terminal (test_pipe_diff's programs): Windows has no
    # pseudo-terminal and no non-blocking pipe, and zloopgo's Windows pipes
    # are asyncio's proactor code (zloopgo/_winpipes.py), which
    # tests/test_subprocess_pipes.py compares
    "pipes": "POSIX pipes and pseudo-terminals (test_pipe_diff's programs)",
}


# Differences Windows' reference loop shows that are not zloopgo's, by
# name: predicates on a Difference (reference first) and its program. A
# search under Wine does not count a difference one of them takes
# (tests/test_hostile.py); on Linux none applies.
KNOWN_ON_WINDOWS = {
    # asyncio's SelectorEventLoop: a socket closed while it is registered
    # (a cancelled sock_sendall's writer whose remove_writer raised, the
    # socket given to a transport) makes its next select() raise
    # WSAENOTSOCK (WSAEOPNOTSUPP once a canary's file or pipe holds the
    # value), and its loop is done; epoll drops a closed descriptor,
    # and so do zloopgo's AFD polls (test_sock_ops_diff's docstring,
    # docs/compatibility.md "Windows"). asyncio's program stops there (its
    # loop's close, then the harness error at the end of its
    # observations) where zloopgo's goes on: the two agree up to it
    "asyncio's select() fails on a socket closed while registered": lambda d, program: (
        any(_select_failed(e) for e in d.ref[d.index :])
        and not any(e[0] == "harness error" for e in d.other)
    ),
    # Wine's select() never reports a UDP socket whose ICMP error is
    # pending (its peer gone) readable, where zloopgo's AFD poll does: in
    # the step asyncio's loop records nothing more, zloopgo's reads the
    # endpoint (running what the read runs: a max_size trap, overrides)
    # and meets the error (test_datagram_diff's _known, docs/compatibility.md
    # "Windows"; 2 of seed 1's first 13 datagram programs met it)
    "Wine: select() does not report a pending ICMP error readable": lambda d, program: (
        program.get("machine") == "datagram"
        and d.a is not None
        and d.a[0] == "state"
        and any(_icmp_error_read(e) for e in _to_next_state(d.other, d.index))
    ),
    # asyncio's SelectorEventLoop: select() is given handle values, so a
    # socket closed while a receive or send waits on it (its reader or
    # writer still registered) is watched no more, but the handle value
    # is: the canary's socket that takes the value next, its bait waiting,
    # is ready, and the stale callback runs on the closed socket object,
    # whose task fails with WSAENOTSOCK. epoll drops a closed descriptor,
    # and zloopgo's AFD poll is the socket's own, so there the task goes
    # on waiting, as on asyncio's Linux loops (docs/compatibility.md
    # "Windows"; sockops program 5 of seed 1). Without a socket on the
    # value it is the case above: select() raises WSAENOTSOCK
    "asyncio's select() watches a closed socket's handle value, reused": lambda d, program: (
        program.get("machine") == "sockops" and _stale_callback_on_reused_value(d)
    ),
}

# What a class derived from the loop records of asyncio's steps
# (test_sock_ops_diff.Overrides): the stale callback and its clean-up.
_OVERRIDE_CALLS = (
    "_sock_recv",
    "_sock_recv_into",
    "_sock_sendall",
    "remove_reader",
    "remove_writer",
)
WSAENOTSOCK = 10038


def _step_record(obs, start):
    """The first step record (a sockops step's observation: the step, its
    result, the tasks' outcomes, the order they finished in, what is
    watched) from start, and the entries before it."""
    for i in range(start, len(obs)):
        entry = obs[i]
        if isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], list):
            return entry, obs[start:i]
    return None, obs[start:]


def _closes_ours(entry):
    return (isinstance(entry, list) and entry[:1] == [["close_ours"]]) or (
        isinstance(entry, list) and entry[:2] == ["op", "close_ours"]
    )


def _stale_callback_on_reused_value(d):
    """Whether, in the step where the two part, asyncio's loop alone ran
    waiting operations' callbacks for our socket after it was closed:
    every outcome that differs is a WSAENOTSOCK failure on asyncio's
    where zloopgo's task still waits, and asyncio records nothing else
    beyond the derived loop's calls of those callbacks."""
    ref, ref_before = _step_record(d.ref, d.index)
    other, other_before = _step_record(d.other, d.index)
    if ref is None or other is None or ref[0] != other[0] or ref[1] != other[1]:
        return False
    if not any(_closes_ours(e) for e in d.ref[: d.index] + ref_before + [ref]):
        return False
    if ref[4] != other[4] or len(ref[2]) != len(other[2]):
        return False
    failed = [number for number, (r, o) in enumerate(zip(ref[2], other[2], strict=True)) if r != o]
    if not failed or not all(
        other[2][n] == "waiting"
        and isinstance(ref[2][n], list)
        and ref[2][n][:2] == ["OSError", WSAENOTSOCK]
        for n in failed
    ):
        return False
    if [n for n in ref[3] if n not in failed] != other[3]:
        return False
    return [e for e in ref_before if e not in _OVERRIDE_CALLS] == other_before


def _to_next_state(obs, start):
    for entry in obs[start:]:
        if entry[0] == "state":
            return
        yield entry


def _icmp_error_read(entry):
    return (entry[:2] == ["handler", "Fatal read error on datagram transport"]) or (
        entry[1:3] in (["error", "ConnectionRefusedError"], ["error", "ConnectionResetError"])
    )


def _select_failed(entry):
    # WSAENOTSOCK when nothing holds the closed socket's value; when a
    # canary's file or pipe took it, Wine's select() answers WSAEOPNOTSUPP
    # (scripts/wine/probe_select_reused_value.py)
    return entry[0] == "harness error" and any(
        f"[WinError {code}]" in str(entry[1]) for code in (10038, 10045)
    )


def known_on_windows(diff, program):
    """The name of the KNOWN_ON_WINDOWS difference diff is, or None."""
    if sys.platform != "win32":
        return None
    for name, known in KNOWN_ON_WINDOWS.items():
        if known(diff, program):
            return name
    return None


def available():
    """The machines whose objects this platform has, by name."""
    absent = ABSENT_ON_WINDOWS if sys.platform == "win32" else {}
    return sorted(name for name in MODULES if name not in absent)


def module(name):
    return importlib.import_module(MODULES[name])


def generate(name, rng):
    return module(name).generate(rng)


def run(program, loop_name, journal=None):
    return module(program["machine"]).run(program, loop_name, journal)
