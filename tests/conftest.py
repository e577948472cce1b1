"""Dual-run fixtures: every test that takes `loop` (or `loop_factory`) runs
once on stock asyncio and once on zloopgo, so each proves that zloopgo
matches asyncio's behaviour.

A test fails if the loop's exception handler is called and the test did
not say it expected that (uvloop's test base does the same): read
`loop_errors` to take the contexts the handler received.
"""

import asyncio
import gc
import os
import signal
import ssl

import pytest
from helpers import FACTORIES

# The suite must not depend on the signal dispositions it inherits: a shell
# that starts it in the background (`nohup scripts/test &`) leaves SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler. Python's
# own handler is put back, so that this process and the interpreters it
# starts (exec gives them SIGINT's default disposition, and with it
# Python's handler) behave as when started from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Nor on an inherited switch of zloopgo's slow-callback reports: the tests
# that want it turn it on (tests/test_slow_callbacks.py).
os.environ.pop("ZLOOPGO_SLOW_CALLBACKS", None)


def pytest_addoption(parser):
    parser.addoption(
        "--only-loop",
        choices=sorted(FACTORIES),
        help="run the dual-run tests on this loop only (scripts/test's sanitizer stage: "
        "asyncio's half of a test exercises none of zloopgo's native code)",
    )
    parser.addini(
        "alarm_floor",
        default="0",
        help="seconds: no test's own pytest-timeout alarm (a timeout mark) is shorter "
        "than this (scripts/arm64: under emulation a mark sized for this machine's "
        "speed is no longer a hang detector; 0, the default, changes no mark)",
    )


def _raise_alarms_to_the_floor(config, items):
    """A test's timeout mark is its hang detector, sized for a native
    machine; under qemu-user (scripts/arm64's alarm_floor) the same work
    takes 5-20x longer, and a mark shorter than the run's alarm would fail
    a test that is only slow. Marks are replaced, never shortened."""
    floor = float(config.getini("alarm_floor"))
    if floor <= 0:
        return
    for item in items:
        mark = item.get_closest_marker("timeout")
        seconds = None if mark is None else (mark.args or [mark.kwargs.get("timeout")])[0]
        if seconds is not None and float(seconds) < floor:
            item.add_marker(pytest.mark.timeout(floor), append=False)


def pytest_collection_modifyitems(config, items):
    _raise_alarms_to_the_floor(config, items)
    only = config.getoption("--only-loop")
    if only is None:
        return
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        (dropped if params.get("loop_name", only) != only else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(params=sorted(FACTORIES))
def loop_name(request):
    return request.param


@pytest.fixture
def loop_factory(loop_name):
    return FACTORIES[loop_name]


@pytest.fixture
def loop_errors():
    """Exception-handler contexts the test expects; the test must read them."""
    return []


@pytest.fixture
def loop(loop_factory, loop_errors, request):
    lp = loop_factory()
    unexpected = []
    expecting = "loop_errors" in request.fixturenames

    def handler(_loop, context):
        (loop_errors if expecting else unexpected).append(context)

    lp.set_exception_handler(handler)
    try:
        yield lp
    finally:
        if not lp.is_closed():
            if not lp.is_running():
                lp.run_until_complete(lp.shutdown_asyncgens())
            lp.close()
        asyncio.set_event_loop(None)
    assert not unexpected, f"unexpected exception handler calls: {unexpected}"


@pytest.fixture(scope="session")
def tls_contexts():
    """(server, client) SSLContexts for "localhost", from a test CA."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


@pytest.fixture
def collect_often():
    """The collector runs at every allocation of a container (generation 0
    at threshold 1) for the test's length: a handle or callback freed
    early shows at once."""
    threshold = gc.get_threshold()
    gc.set_threshold(1)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
