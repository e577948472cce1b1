"""Run one CPython asyncio test module on zloopgo (the child of run.py).

Usage: python _child.py MODULE EVENTS_FILE [HANG_AFTER_SECONDS]

ZLCONF_SKIP_IDS (comma-separated test ids) leaves those tests out: run.py
resumes a module that hung or crashed this way.

With ZLCONF_LOOP=asyncio in the environment it runs the module on asyncio's
own loops instead, untouched (no swap, no adapters, no bindings), still
recording every test's outcome and loops: the reference a baseline of what
fails on any loop somewhere (Windows CPython under Wine) is taken from.

Swaps asyncio's loop factories for zloopgo's, checks that the swap took
effect, then runs ``test.test_asyncio.MODULE`` with unittest and writes one
JSON object per line to EVENTS_FILE (flushed per test, so a parent that
kills a hung child still knows what finished and what was running).

For every test it records which loops the test created and ran:
``zloopgo`` (a zloopgo Loop), or the class names of any other loop, which
in these modules are test doubles (test_utils.TestLoop, a mocked
BaseEventLoop) or a SelectorEventLoop the test built on purpose.
"""

import asyncio
import faulthandler
import importlib
import json
import os
import sys
import time
import traceback
import typing
import unittest
from asyncio import base_events, events

import network  # this directory (sys.path[0])

import zloopgo
from zloopgo._loop import Loop


class _Tracker:
    def __init__(self):
        self.reset()

    def reset(self):
        self.zl_created = 0
        self.zl_ran = 0
        self.factory_calls = 0
        self.other_created = set()
        self.other_ran = set()

    def snapshot(self):
        return {
            "zl_created": self.zl_created,
            "zl_ran": self.zl_ran,
            "factory_calls": self.factory_calls,
            "other_created": sorted(self.other_created),
            "other_ran": sorted(self.other_ran),
        }

    def kind(self):
        if self.zl_created or self.zl_ran:
            return "zloopgo"
        if self.other_created or self.other_ran:
            return "double"
        return "none"


TRACK = _Tracker()

# asyncio's policy by names that do not warn on 3.14+ (deprecated there).
get_policy = getattr(events, "_get_event_loop_policy", None) or events.get_event_loop_policy
BaseDefaultPolicy = (
    getattr(events, "_BaseDefaultEventLoopPolicy", None) or events.BaseDefaultEventLoopPolicy
)


def zloopgo_factory():
    """asyncio.new_event_loop, swapped: a zloopgo Loop, unless a test has
    installed a policy of its own (test_runners' TestPolicy makes mocked
    loops on purpose); that policy is asked, as asyncio would ask it."""
    policy = get_policy()
    if not isinstance(policy, BaseDefaultPolicy):
        return policy.new_event_loop()
    return make_zloopgo()


def make_zloopgo():
    TRACK.factory_calls += 1
    return zloopgo.new_event_loop()


def default_policy_class():
    """This system's default policy class, by its 3.14 name or its older one
    (unix_events' on POSIX, windows_events' proactor policy on Windows)."""
    if sys.platform == "win32":
        from asyncio import windows_events as platform_events
    else:
        from asyncio import unix_events as platform_events
    return (
        getattr(platform_events, "_DefaultEventLoopPolicy", None)
        or platform_events.DefaultEventLoopPolicy
    )


STOCK = os.environ.get("ZLCONF_LOOP") == "asyncio"


def install_swap():
    """Make every default path to a new loop produce a zloopgo Loop."""
    asyncio.new_event_loop = zloopgo_factory
    events.new_event_loop = zloopgo_factory
    # Policies made after a test module's tearDownModule resets the policy
    # (and the one asyncio creates lazily) also make zloopgo loops.
    default_policy_class()._loop_factory = staticmethod(zloopgo_factory)
    zloopgo.install()


def install_tracking():
    """Count the loops each test creates and runs, by kind."""
    orig_init = base_events.BaseEventLoop.__init__

    def tracked_init(self, *args, **kwargs):
        if isinstance(self, Loop):
            TRACK.zl_created += 1
        else:
            TRACK.other_created.add(type(self).__name__)
        orig_init(self, *args, **kwargs)

    base_events.BaseEventLoop.__init__ = tracked_init

    orig_base_run = base_events.BaseEventLoop.run_forever

    def tracked_base_run(self):
        if isinstance(self, Loop):
            TRACK.zl_ran += 1
        else:
            TRACK.other_ran.add(type(self).__name__)
        return orig_base_run(self)

    base_events.BaseEventLoop.run_forever = tracked_base_run

    orig_zl_run = Loop.run_forever

    def tracked_zl_run(self):
        TRACK.zl_ran += 1
        return orig_zl_run(self)

    Loop.run_forever = tracked_zl_run


def probe_swap():
    """Check, before the module runs, each way a test gets a loop."""
    seen = {}

    lp = asyncio.new_event_loop()
    seen["asyncio.new_event_loop"] = type(lp).__module__ + "." + type(lp).__qualname__
    lp.close()

    async def running():
        await asyncio.sleep(0)
        t = type(asyncio.get_running_loop())
        return t.__module__ + "." + t.__qualname__

    seen["asyncio.run"] = asyncio.run(running())
    if hasattr(asyncio, "Runner"):
        with asyncio.Runner() as r:
            seen["asyncio.Runner"] = r.run(running())

    lp = get_policy().new_event_loop()
    seen["policy.new_event_loop"] = type(lp).__module__ + "." + type(lp).__qualname__
    lp.close()

    if hasattr(unittest, "IsolatedAsyncioTestCase"):

        class Probe(unittest.IsolatedAsyncioTestCase):
            async def test_probe(self):
                seen["IsolatedAsyncioTestCase"] = await running()

        res = unittest.TestResult()
        Probe("test_probe").run(res)
        if not res.wasSuccessful():
            seen["IsolatedAsyncioTestCase"] = "probe failed: " + repr(res.errors + res.failures)

    want = Loop.__module__ + "." + Loop.__qualname__
    ok = all(v == want for v in seen.values())
    asyncio.set_event_loop(None)
    return ok, seen


def _adapt_runners(mod):
    """test_runners' BaseTest hands its TestPolicy a mocked BaseEventLoop;
    hand it a zloopgo Loop with the same shutdown_asyncgens probe."""

    def new_loop(self):
        loop = make_zloopgo()
        loop.shutdown_ag_run = False
        shutdown = loop.shutdown_asyncgens

        async def shutdown_asyncgens():
            loop.shutdown_ag_run = True
            await shutdown()

        loop.shutdown_asyncgens = shutdown_asyncgens
        return loop

    mod.BaseTest.new_loop = new_loop


def _adapt_pep492(mod):
    """test_pep492's BaseTest runs on a BaseEventLoop with a mocked
    selector; run it on a zloopgo Loop instead."""

    def setUp(self):
        super(mod.BaseTest, self).setUp()
        self.loop = make_zloopgo()
        self.set_event_loop(self.loop)

    mod.BaseTest.setUp = setUp


def _adapt_unix_events(mod):
    """test_unix_events' signal and Unix-socket tests build an
    asyncio.SelectorEventLoop in setUp; build a zloopgo Loop instead (the
    code under test, add_signal_handler and create_unix_server/connection,
    is the same asyncio code on both)."""

    def adapt(cls):
        def setUp(self):
            super(cls, self).setUp()
            self.loop = make_zloopgo()
            self.set_event_loop(self.loop)

        cls.setUp = setUp

    for name in ("SelectorEventLoopSignalTests", "SelectorEventLoopUnixSocketTests"):
        if hasattr(mod, name):
            adapt(getattr(mod, name))


def _adapt_subprocess(mod):
    """On Windows test_subprocess binds its SubprocessMixin to an
    asyncio.ProactorEventLoop built in setUp (SubprocessProactorTests);
    build a zloopgo Loop instead (its subprocesses are the proactor's
    code, zloopgo/_winpipes.py). Elsewhere its classes take their loop
    from the swap and nothing is adapted."""
    cls = getattr(mod, "SubprocessProactorTests", None)
    if cls is None:
        return False

    def setUp(self):
        super(cls, self).setUp()
        self.loop = make_zloopgo()
        self.set_event_loop(self.loop)

    cls.setUp = setUp


def _adapt_taskgroups(mod):
    """3.14's test_taskgroups names asyncio.EventLoop as its loop_factory
    (bound when the module is imported): use a zloopgo Loop."""

    def eager():
        loop = make_zloopgo()
        loop.set_task_factory(asyncio.eager_task_factory)
        return loop

    for name, factory in (("TestTaskGroup", make_zloopgo), ("TestEagerTaskTaskGroup", eager)):
        cls = getattr(mod, name, None)
        if cls is not None and "loop_factory" in vars(cls):
            cls.loop_factory = staticmethod(factory)


# Modules whose tests build their loop from a test double on purpose, and
# pass unchanged on a real loop once given one (checked on 3.11 and 3.13).
ADAPTERS = {
    "test_runners": (
        _adapt_runners,
        "BaseTest.new_loop (a mocked BaseEventLoop handed to the test's policy) returns a "
        + "zloopgo Loop",
    ),
    "test_pep492": (
        _adapt_pep492,
        "BaseTest.setUp (a BaseEventLoop with a mocked selector) uses a zloopgo Loop",
    ),
    "test_taskgroups": (
        _adapt_taskgroups,
        "TestTaskGroup and TestEagerTaskTaskGroup (loop_factory asyncio.EventLoop, 3.14+) use "
        + "a zloopgo Loop",
    ),
    "test_subprocess": (
        _adapt_subprocess,
        "SubprocessProactorTests (Windows: an asyncio.ProactorEventLoop in setUp) uses a "
        + "zloopgo Loop",
    ),
    "test_unix_events": (
        _adapt_unix_events,
        "SelectorEventLoopSignalTests and SelectorEventLoopUnixSocketTests (an "
        + "asyncio.SelectorEventLoop in setUp) use a zloopgo Loop",
    ),
}


def first_line(err):
    exctype, value, _tb = err
    text = str(value).strip()
    line = text.splitlines()[0] if text else ""
    return f"{exctype.__name__}: {line}" if line else exctype.__name__


def format_err(err):
    return "".join(traceback.format_exception(*err))[-6000:]


class StreamingResult(unittest.TestResult):
    """Writes one JSON line per finished test; ranks outcomes
    error > fail > skip > pass (cleanup errors turn a pass into an error)."""

    RANK: typing.ClassVar[dict] = {"pass": 0, "xfail": 0, "skip": 1, "fail": 2, "error": 3}

    def __init__(self, emit):
        super().__init__()
        self.emit = emit
        self.cur = None

    def _set(self, outcome, err=None, note=""):
        cur = self.cur
        if cur is None:
            return
        worse = self.RANK[outcome] > self.RANK[cur["outcome"]]
        if worse or (outcome == cur["outcome"] and not cur["message"]):
            cur["outcome"] = outcome
            cur["message"] = (note + (first_line(err) if err is not None else ""))[:300]
            if err is not None:
                cur["traceback"] = format_err(err)

    def startTest(self, test):
        super().startTest(test)
        TRACK.reset()
        self.cur = {
            "event": "test",
            "id": test.id(),
            "outcome": "pass",
            "message": "",
            "t0": time.monotonic(),
        }
        self.emit(event="start", id=test.id())

    def stopTest(self, test):
        super().stopTest(test)
        cur, self.cur = self.cur, None
        cur["seconds"] = round(time.monotonic() - cur.pop("t0"), 3)
        cur["loops"] = TRACK.snapshot()
        cur["kind"] = TRACK.kind()
        self.emit(**cur)

    def _fixture_error(self, test, err, outcome):
        # setUpModule/setUpClass/tearDown*Module errors arrive outside
        # startTest/stopTest, on an _ErrorHolder.
        self.emit(
            event="test",
            id=getattr(test, "description", str(test)),
            outcome=outcome,
            message=first_line(err)[:300],
            traceback=format_err(err),
            seconds=0.0,
            loops=TRACK.snapshot(),
            kind="fixture",
        )

    def addError(self, test, err):
        super().addError(test, err)
        if self.cur is None:
            self._fixture_error(test, err, "error")
        else:
            self._set("error", err)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set("fail", err)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._set("fail" if failed else "error", err, note=f"{subtest._subDescription()}: ")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        if self.cur is None:
            self.emit(
                event="test",
                id=str(test),
                outcome="skip",
                message=reason[:300],
                seconds=0.0,
                loops=TRACK.snapshot(),
                kind="fixture",
            )
        else:
            self._set("skip", note=reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set("xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set("fail", note="unexpected success")


def without(suite, ids):
    """suite less the tests whose id is in ids (run.py's resumed run after a
    hang or a crash: the tests that already have an outcome)."""
    kept = unittest.TestSuite()
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            kept.addTest(without(test, ids))
        elif test.id() not in ids:
            kept.addTest(test)
    return kept


def run(modname, emit):
    if STOCK:
        emit(event="swap", ok=None, seen={}, stock=True, python=sys.version.split()[0])
    else:
        install_swap()
    install_tracking()
    if not STOCK:
        ok, seen = probe_swap()
        emit(event="swap", ok=ok, seen=seen, python=sys.version.split()[0])
    TRACK.reset()

    full = f"test.test_asyncio.{modname}"
    try:
        mod = importlib.import_module(full)
        if modname in ADAPTERS and os.environ.get("ZLCONF_NO_ADAPT") != "1" and not STOCK:
            adapt, how = ADAPTERS[modname]
            if adapt(mod) is not False:  # False: nothing to adapt on this platform
                emit(event="adapted", how=how)
        if modname in network.BINDINGS and not STOCK:
            suite = network.load(mod, make_zloopgo)
        else:
            suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
    except Exception:  # noqa: BLE001 - an import error is a result
        err = sys.exc_info()
        emit(
            event="test",
            id=full,
            outcome="error",
            message="import: " + first_line(err),
            traceback=format_err(err),
            seconds=0.0,
            loops=TRACK.snapshot(),
            kind="fixture",
        )
        emit(event="done")
        return
    skip = os.environ.get("ZLCONF_SKIP_IDS")
    if skip:
        suite = without(suite, set(skip.split(",")))
    t0 = time.monotonic()
    suite.run(StreamingResult(emit))
    emit(event="done", seconds=round(time.monotonic() - t0, 3))


def main():
    if len(sys.argv) > 3:
        faulthandler.dump_traceback_later(float(sys.argv[3]), exit=False)
    with open(sys.argv[2], "w", buffering=1) as out:

        def emit(**kw):
            out.write(json.dumps(kw) + "\n")
            out.flush()

        run(sys.argv[1], emit)
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
