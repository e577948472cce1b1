"""Small helpers the test modules share: the two loops of the dual-run
tests (FACTORIES, SCRIPT_FACTORIES), running one loop iteration,
scheduling through each call_* method, a zloopgo loop that closes itself,
a free port, a transport over a socketpair, scripts run in a fresh interpreter (for
what may hang or must exit), and the descriptor canary's tallies."""

import asyncio
import collections
import contextlib
import os
import pkgutil
import socket
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import zloopgo

SCHEDULERS = ["call_soon", "call_soon_threadsafe", "call_later", "call_at"]

# The two loops every dual-run test runs on, by the name tests give them:
# the dotted name of what makes one, which a subprocess script (run_script)
# evaluates as `factory`, and (FACTORIES) what it names, for the fixtures
# of conftest.py.
SCRIPT_FACTORIES = {
    "asyncio": "asyncio.SelectorEventLoop",
    "zloopgo": "zloopgo.new_event_loop",
}
FACTORIES = {name: pkgutil.resolve_name(path) for name, path in SCRIPT_FACTORIES.items()}

# The folder holding the zloopgo this run imported: the checkout with an
# editable install, site-packages with scripts/gil-off's installed build.
# A child interpreter that must import the same zloopgo gets it on
# PYTHONPATH (the checkout's own package has no engine for that venv).
ZLOOPGO_HOME = Path(zloopgo.__file__).resolve().parent.parent

FOREIGN_CALL = "Non-thread-safe operation invoked on an event loop other than the current one"


def engine_without_gil():
    """Whether the engine runs without the GIL: scripts/gil-off's test-only
    build (GIL_OFF_TEST_BUILD) on a free-threaded Python. Every other build
    runs with the GIL (docs/compatibility.md)."""
    from zloopgo import _engine

    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return free_threaded and getattr(_engine, "GIL_OFF_TEST_BUILD", 0) == 1


def refuses_foreign_calls(loop):
    """Whether `loop` refuses its non-thread-safe methods from another
    thread while it runs: zloopgo's loops where the engine runs without
    the GIL (per-loop ownership, docs/compatibility.md)."""
    return isinstance(loop, zloopgo.Loop) and engine_without_gil()


# The two loops of the dual-run tests of pipes and subprocesses: on Windows
# asyncio's reference there is its ProactorEventLoop (the default), as its
# SelectorEventLoop has neither.
PIPE_SCRIPT_FACTORIES = (
    {**SCRIPT_FACTORIES, "asyncio": "asyncio.ProactorEventLoop"}
    if sys.platform == "win32"
    else SCRIPT_FACTORIES
)
PIPE_FACTORIES = {name: pkgutil.resolve_name(path) for name, path in PIPE_SCRIPT_FACTORIES.items()}


def _under_wine():
    """Whether this is Windows as Wine runs it (its ntdll exports
    wine_get_version): a test names what Wine cannot show by this."""
    if sys.platform != "win32":
        return False
    import ctypes

    return hasattr(ctypes.WinDLL("ntdll"), "wine_get_version")


UNDER_WINE = _under_wine()


def run_once(loop):
    """One iteration: asyncio documents that stop() before run_forever()
    polls once with a zero timeout, runs what is ready and returns."""
    loop.stop()
    loop.run_forever()


def schedule(loop, method, callback, *args, **kwargs):
    """Schedule callback(*args) to run at the next iteration through `method`."""
    if method in ("call_soon", "call_soon_threadsafe"):
        return getattr(loop, method)(callback, *args, **kwargs)
    if method == "call_later":
        return loop.call_later(0, callback, *args, **kwargs)
    return loop.call_at(loop.time(), callback, *args, **kwargs)


@contextlib.contextmanager
def zloop():
    """A zloopgo loop, closed afterwards."""
    lp = zloopgo.new_event_loop()
    try:
        yield lp
    finally:
        lp.close()


class Recorder(asyncio.Protocol):
    """Keeps what arrives in `got`: each data_received's bytes, and None
    for eof_received (which then lets the transport close)."""

    def __init__(self):
        self.got = []

    def data_received(self, data):
        self.got.append(data)

    def eof_received(self):
        self.got.append(None)


def free_port():
    """A loopback TCP port nothing listens on at the moment of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def accepted_pair(loop):
    """A transport with a Recorder on one end of a socketpair, through
    connect_accepted_socket; returns (transport, recorder.got, the blocking
    other end)."""
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    transport, recorder = await loop.connect_accepted_socket(Recorder, ours)
    return transport, recorder.got, peer


def read_until_eof(peer, timeout=5.0):
    """Everything a blocking peer socket receives until EOF (or a reset, or
    `timeout` seconds without data)."""
    peer.settimeout(timeout)
    chunks = []
    while True:
        try:
            b = peer.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks)


def run_script(loop_name, body, timeout=60, env=None, args=(), factories=SCRIPT_FACTORIES):
    """Run `body` in a fresh interpreter with `factory` making a loop of
    `loop_name` (as `factories` names it), with `env`'s variables added to
    this process's and `args` before -c; returns the CompletedProcess (a
    hang is a TimeoutExpired)."""
    code = (
        "import asyncio, errno, os, signal, socket, sys, threading, time\n"
        "import zloopgo\n"
        f"factory = {factories[loop_name]}\n" + textwrap.dedent(body)
    )
    return subprocess.run(
        [sys.executable, *args, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env is not None else None,
    )


def check(proc, *expected_lines):
    """The script exited 0 and printed each expected line."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    for line in expected_lines:
        assert line in lines, f"missing {line!r} in\n{proc.stdout}\n{proc.stderr}"


def assert_same_observations(label, steps, observe, *args, runs=3, context=2, known=None):
    """observe(loop_name, *args) -> a list of observations, for "asyncio"
    and "zloopgo"; fails unless some run, of up to `runs`, gives both the same
    or a difference that known(asyncio's, zloopgo's) names (it returns why,
    which is returned; None otherwise). A difference the code makes shows in
    every run, while one the kernel's timing makes (a loaded machine
    deferring loopback work) does not come back. The failure shows the
    steps and the observations around the first difference."""
    for _ in range(runs):
        want, got = observe("asyncio", *args), observe("zloopgo", *args)
        if got == want:
            return None
        why = None if known is None else known(want, got)
        if why is not None:
            return why
    first = next(
        (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
        min(len(want), len(got)),
    )
    around = slice(max(0, first - context), first + context)
    raise AssertionError(
        f"{label} differs at observation {first} in each of {runs} runs:\nsteps: {steps}\n"
        f"asyncio: {want[around]}\nzloopgo: {got[around]}"
    )


def canary_tallies():
    """What the descriptor canary's fills met, per loop: added to by a
    dual-run harness's observe (tally_canary), reported by
    report_canary_tallies."""
    return {name: collections.Counter() for name in FACTORIES}


def tally_canary(tallies, loop_name, canary):
    tallies[loop_name].update(canary.tally())


def report_canary_tallies(label, tallies, capsys):
    """Prints, past pytest's capture, what the canary's fills met on each
    loop (hostile.canary.Canary.tally: landed, taken by another handle,
    gave up), and fails unless it landed on each: a canary that never
    lands checks nothing."""
    lines = [
        f"{label}: the canary landed on {tally['landed']} of the {sum(tally.values())}"
        f" freed numbers its fills met on {name} (another handle took {tally['taken']},"
        f" gave up on {tally['gave_up']})"
        for name, tally in tallies.items()
    ]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert all(tally["landed"] > 0 for tally in tallies.values()), tallies
