"""CPython's socket, server and subprocess conformance tests, bound to zloopgo.

CPython binds its loop-agnostic mixins to concrete loops at the bottom of
each module (``EPollEventLoopTests(UnixEventLoopTestsMixin,
SubprocessTestsMixin, test_utils.TestCase)`` with ``create_event_loop``
returning ``asyncio.SelectorEventLoop(...)``, ``SelectorStartServerTests``
with ``new_loop``, ...). ``BINDINGS`` does the same with the hook returning
a zloopgo Loop, and names the module's other test classes that run as they
are (with asyncio.new_event_loop swapped by _child.py). The bound classes
get the CPython module as ``__module__``, so their test ids read
``test.test_asyncio.MODULE.ZloopgoXxxTests.test_yyy``.

Modules not in ``BINDINGS`` (test_streams, test_unix_events,
test_subprocess, test_ssl) run whole, with the swap; ``ADAPTERS`` puts the few
classes that build an ``asyncio.SelectorEventLoop`` on purpose on zloopgo.

Everything here talks to loopback only (127.0.0.1, ::1, Unix sockets,
socketpairs, pipes); nothing is resource-gated in these modules.
"""

import errno
import inspect
import os
import sys
import unittest


def _bind(mod, name, bases, hook, factory, extra=None):
    def make(self):
        return factory()

    ns = {hook: make, "__module__": mod.__name__, "__qualname__": name}
    ns.update(extra or {})
    return type(name, bases, ns)


def _sock_lowlevel(mod, factory):
    from test.test_asyncio import utils as test_utils

    return [
        _bind(
            mod,
            "ZloopgoSockTests",
            (mod.BaseSockTestsMixin, test_utils.TestCase),
            "create_event_loop",
            factory,
        )
    ]


def _server(mod, factory):
    # SelectorStartServerTests carries the Unix variant itself
    # (test_start_unix_server_1), so it is copied onto the binding.
    extra = {}
    unix = getattr(mod.SelectorStartServerTests, "test_start_unix_server_1", None)
    if unix is not None:
        extra["test_start_unix_server_1"] = unix
    bound = _bind(
        mod,
        "ZloopgoStartServerTests",
        (mod.BaseStartServer, unittest.TestCase),
        "new_loop",
        factory,
        extra,
    )
    # IsolatedAsyncioTestCase classes: their loop comes from the swap.
    rest = [getattr(mod, n) for n in ("TestServer2", "UnixServerCleanupTests") if hasattr(mod, n)]
    return [bound, *rest]


def _buffered_proto(mod, factory):
    return [
        _bind(
            mod,
            "ZloopgoBufferedProtocolTests",
            (mod.BaseTestBufferedProtocol, unittest.TestCase),
            "new_loop",
            factory,
        )
    ]


def _sendfile(mod, factory):
    from test.test_asyncio import utils as test_utils

    return [
        _bind(
            mod,
            "ZloopgoSendfileTests",
            (mod.SendfileTestsBase, test_utils.TestCase),
            "create_event_loop",
            factory,
        )
    ]


def _events(mod, factory):
    from test.test_asyncio import utils as test_utils

    # As EPollEventLoopTests: UnixEventLoopTestsMixin attaches a child
    # watcher (3.11-3.13; 3.14 has no watchers and binds EventLoopTestsMixin
    # itself) and SubprocessTestsMixin adds subprocess_exec/shell.
    mixin = getattr(mod, "UnixEventLoopTestsMixin", None) or mod.EventLoopTestsMixin
    bound = _bind(
        mod,
        "ZloopgoEventLoopTests",
        (mixin, mod.SubprocessTestsMixin, test_utils.TestCase),
        "create_event_loop",
        factory,
        _without_raw_pty(mixin),
    )
    rest = [_events_rest(getattr(mod, n)) for n in _EVENTS_REST if hasattr(mod, n)]
    pipes = getattr(mod, "UnixPipeObjectSupportTests", None)
    if pipes is not None:  # 3.14+: its setUp builds an asyncio.SelectorEventLoop
        rest.append(_with_loop(pipes, factory))
    return [bound, *rest]


def _without_raw_pty(mixin):
    """test_bidirectional_pty puts a pseudo-terminal's slave in raw mode
    (tty.setraw) before any loop runs. Under qemu-user (scripts/arm64's
    aarch64 root) tcgetattr on that slave fails with ENOSYS, qemu
    implementing no TCGETS there, so the test errors on every loop: where
    tcgetattr fails so, it is skipped, with that reason; everywhere else
    (tcgetattr works, or no pty at all: the test's own skip) it runs."""
    test = getattr(mixin, "test_bidirectional_pty", None)
    if test is None or not _tcgetattr_on_a_pty_is_enosys():
        return {}
    reason = (
        "tcgetattr on a pty's slave fails with ENOSYS here (qemu-user has "
        + "no TCGETS for it), so tty.setraw raises before the loop runs"
    )
    return {"test_bidirectional_pty": unittest.skip(reason)(test)}


def _tcgetattr_on_a_pty_is_enosys():
    try:
        import termios

        master, slave = os.openpty()
    except (ImportError, AttributeError, OSError):
        return False
    try:
        termios.tcgetattr(slave)
    except termios.error as e:
        return e.args[0] == errno.ENOSYS
    finally:
        os.close(master)
        os.close(slave)
    return False


def _with_loop(cls, factory):
    """cls with a zloopgo loop in place of the SelectorEventLoop its setUp
    makes (the code under test is the same asyncio code on both)."""

    def setUp(self):
        super(cls, self).setUp()
        self.loop = factory()
        self.addCleanup(self.loop.close)

    return type(
        cls.__name__,
        (cls,),
        {"setUp": setUp, "__module__": cls.__module__, "__qualname__": cls.__qualname__},
    )


def _events_rest(cls):
    """Up to 3.12 test_get_event_loop_new_process runs a loop in a worker
    that ProcessPoolExecutor forks from a process whose zloopgo engine has
    started: zloopgo raises its documented RuntimeError there (README,
    "fork()"), and the failed test leaves its pool unshut, so the
    interpreter hangs at exit (stock asyncio does too when that worker
    fails). Skipped there, with that reason; 3.13's version uses
    forkserver and runs."""
    test = getattr(cls, "test_get_event_loop_new_process", None)
    if test is None or "forkserver" in inspect.getsource(test):
        return cls
    reason = (
        "zloopgo-limitation: the worker is forked after the Go engine started "
        + "(RuntimeError, README 'fork()'); the failed test then hangs at exit"
    )
    return type(
        cls.__name__,
        (cls,),
        {
            "test_get_event_loop_new_process": unittest.skip(reason)(test),
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
        },
    )


# test_events' classes that are not bound to a loop class: handles, timers,
# policies and get_event_loop (their loops come from the swap).
_EVENTS_REST = (
    "HandleTests",
    "TimerTests",
    "AbstractEventLoopTests",
    "PolicyTests",
    "TestPyGetEventLoop",
    "TestCGetEventLoop",
    "TestServer",
    "TestAbstractServer",
)


def _sslproto(mod, factory):
    # SslProtoHandshakeTests makes its loop with asyncio.new_event_loop (swapped).
    bound = _bind(
        mod,
        "ZloopgoStartTLSTests",
        (mod.BaseStartTLS, unittest.TestCase),
        "new_loop",
        factory,
    )
    return [mod.SslProtoHandshakeTests, bound]


def _windows_events(mod, factory):
    """Windows only. Its loop-generic classes: Ctrl+C ending run_forever
    and a loop run from a thread not the main one (asyncio.new_event_loop,
    swapped), and the pipe-object checks of connect_read_pipe /
    connect_write_pipe (a ProactorEventLoop in setUp: a zloopgo loop,
    whose pipes are the proactor's code). ProactorTests exercise the
    IocpProactor itself (loop._proactor's accept_pipe, wait_for_handle,
    its cancellation), not a loop method; WinPolicyTests, asyncio's own
    policies' loop classes."""
    rest = [getattr(mod, n) for n in ("ProactorLoopCtrlC", "ProactorMultithreading")]
    pipes = mod.ProactorPipeObjectSupportTests

    def setUp(self):
        # its setUp with a zloopgo loop for the ProactorEventLoop
        unittest.TestCase.setUp(self)
        self.loop = factory()
        self.addCleanup(self.loop.close)
        self.errors = []
        self.loop.set_exception_handler(lambda loop, context: self.errors.append(context))

    bound = type(
        pipes.__name__,
        (pipes,),
        {"setUp": setUp, "__module__": pipes.__module__, "__qualname__": pipes.__qualname__},
    )
    return [*rest, bound]


# module -> function(module, loop factory) returning the TestCase classes to run
BINDINGS = {
    "test_sock_lowlevel": _sock_lowlevel,
    "test_server": _server,
    "test_buffered_proto": _buffered_proto,
    "test_sendfile": _sendfile,
    "test_events": _events,
    "test_sslproto": _sslproto,
}
if sys.platform == "win32":
    BINDINGS["test_windows_events"] = _windows_events


def load(mod, factory):
    """The suite for a bound module: its bound classes, in definition order."""
    loader = unittest.defaultTestLoader
    classes = BINDINGS[mod.__name__.rsplit(".", 1)[-1]](mod, factory)
    return unittest.TestSuite(loader.loadTestsFromTestCase(c) for c in classes)
