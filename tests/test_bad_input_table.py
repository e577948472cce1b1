"""One table of bad input to the public event-loop API, run on asyncio and
zloopgo, in debug and non-debug mode.

Each row calls one method with a wrong type or value and says what asyncio
does: the exception class and a pattern the message must match (it names
the problem), or, where asyncio accepts the value, the behaviour that
follows (a NaN delay fires, an infinite one never does, an error reaches
the exception handler). The asyncio runs prove the table; the zloopgo runs
hold zloopgo to it. Where asyncio checks only in debug mode, a row gives
the non-debug outcome separately; both loops must do what the row says.
After every row the loop must still run a coroutine, a call_soon
round trip, a timer and a descriptor callback.
"""

import asyncio
import concurrent.futures
import dataclasses
import inspect
import math
import os
import re
import signal
import socket
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

LOCALHOST = "127.0.0.1"
RUN_TIMEOUT = 5.0


def noop(*args):
    pass


async def coro_func():
    pass


# ---- expectations ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Expect:
    exc: type | None  # None: the call must not raise
    words: str = ""  # regex (case-insensitive) the message must contain
    handler: str | None = None  # regex every exception-handler message matches
    check: Callable[..., Any] | None = None  # check(loop, res, result) after the call


# the words of a row whose exception has no message (3.10's bare assert)
EMPTY_MESSAGE = "^$"


def raises(exc, words):
    return Expect(exc, words)


def ok(check=None, handler=None):
    return Expect(None, check=check, handler=handler)


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    call: Callable[..., Any]  # call(loop, res): the bad call, or a coroutine that makes it
    debug: Expect  # asyncio's outcome in debug mode
    nodebug: Expect | None = None  # asyncio's outcome without it (None: the same)

    def expect(self, debug):
        if debug:
            return self.debug
        return self.nodebug if self.nodebug is not None else self.debug


def case(id, call, exc, words="", **kw):
    return Case(id, call, Expect(exc, words) if exc is not None else ok(), **kw)


# ---- resources a row needs, closed after it ---------------------------------


class Res:
    def __init__(self, loop):
        self.loop = loop
        self.fired = []
        self.closers = []
        self.value = None

    def later(self, fn):
        self.closers.append(fn)

    def sock(self, *args, blocking=True, **kwargs):
        s = socket.socket(*args, **kwargs)
        s.setblocking(blocking)
        self.later(s.close)
        return s

    def pair(self, blocking=False):
        a, b = socket.socketpair()
        a.setblocking(blocking)
        self.later(a.close)
        self.later(b.close)
        return a, b

    def listener(self):
        s = self.sock()
        s.bind((LOCALHOST, 0))
        s.listen()
        return s

    def closed_fd(self):
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        return r

    def binary_file(self, data=b""):
        f = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        f.write(data)
        f.seek(0)
        self.later(f.close)
        return f

    def text_file(self):
        f = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by close()
        self.later(f.close)
        return f

    async def transport(self):
        """A client transport connected to a server on 127.0.0.1."""
        srv = await self.loop.create_server(asyncio.Protocol, LOCALHOST, 0)
        port = srv.sockets[0].getsockname()[1]
        tr, _ = await self.loop.create_connection(asyncio.Protocol, LOCALHOST, port)

        async def close():
            tr.close()
            srv.close()
            await srv.wait_closed()

        self.later(close)
        self.value = tr
        return tr

    def close(self):
        for fn in reversed(self.closers):
            r = fn()
            if inspect.isawaitable(r):
                self.loop.run_until_complete(r)


# ---- row helpers ----------------------------------------------------------


def timer(method, value):
    def call(loop, res):
        return getattr(loop, method)(value, res.fired.append, "fired")

    return call


def fires(loop, res, handle):
    loop.run_until_complete(asyncio.sleep(0.02))
    assert res.fired == ["fired"]


def never_fires(loop, res, handle):
    loop.run_until_complete(asyncio.sleep(0.02))
    assert res.fired == []
    assert not handle.cancelled()
    handle.cancel()


def set_default_executor_warns(executor):
    def call(loop, res):
        with pytest.warns(DeprecationWarning, match="not an instance of ThreadPoolExecutor"):
            loop.set_default_executor(executor)

    return call


def kept_as_default_executor(exc, words):
    # the loop kept it: run_in_executor(None, ...) hands it the call; then a
    # real pool goes back in, so the loop can run and close
    def check(loop, res, result):
        with pytest.raises(exc, match=words):
            loop.run_in_executor(None, noop)
        pool = concurrent.futures.ThreadPoolExecutor(1)
        res.later(pool.shutdown)
        loop.set_default_executor(pool)

    return check


def schedule_non_callable(method):
    def call(loop, res):
        if method == "call_later":
            return loop.call_later(0, 42)
        if method == "call_at":
            return loop.call_at(loop.time(), 42)
        return getattr(loop, method)(42)

    return call


def runs_briefly(loop, res, result):
    loop.run_until_complete(asyncio.sleep(0.01))


def with_transport(fn):
    async def call(loop, res):
        tr = await res.transport()
        result = fn(loop, res, tr)
        if inspect.isawaitable(result):  # sendfile
            result = await result
        return result

    return call


def transport_closing(loop, res, result):
    loop.run_until_complete(asyncio.sleep(0.01))
    assert res.value.is_closing()


def writelines_left_buffered(loop, res, result):
    tr = res.value
    assert tr.get_write_buffer_size() == (1 if sys.version_info >= (3, 15) else 0)
    tr.abort()
    loop.run_until_complete(asyncio.sleep(0))


def blocking_sock_call(method):
    """Each call would return at once on a blocking socket too, so the
    non-debug run (where asyncio does not check) cannot hang."""

    async def call(loop, res):
        if method == "sock_recv":
            a, b = res.pair(blocking=True)
            b.send(b"x")
            return await loop.sock_recv(a, 1)
        if method == "sock_recv_into":
            a, b = res.pair(blocking=True)
            b.send(b"x")
            return await loop.sock_recv_into(a, bytearray(1))
        if method == "sock_sendall":
            a, _ = res.pair(blocking=True)
            return await loop.sock_sendall(a, b"x")
        if method == "sock_accept":
            lst = res.listener()
            res.later(socket.create_connection(lst.getsockname()).close)
            conn, _ = await loop.sock_accept(lst)
            conn.close()
            return None
        if method == "sock_connect":
            lst = res.listener()
            return await loop.sock_connect(res.sock(), lst.getsockname())
        if method == "sock_sendfile":
            a, _ = res.pair(blocking=True)
            return await loop.sock_sendfile(a, res.binary_file())
        raise AssertionError(method)

    return call


def signal_delivered_to_handler(loop, res, result):
    os.kill(os.getpid(), signal.SIGUSR1)
    loop.run_until_complete(asyncio.sleep(0.05))
    assert loop.remove_signal_handler(signal.SIGUSR1) is True


def add_signal(sig, callback):
    def call(loop, res):
        loop.add_signal_handler(sig, callback)
        res.later(lambda: loop.remove_signal_handler(sig))

    return call


def returns(value):
    def check(loop, res, result):
        assert result == value

    return check


NOT_NON_BLOCKING = Expect(ValueError, "the socket must be non-blocking")
FD_METHODS = ["add_reader", "add_writer", "remove_reader", "remove_writer"]


def fd_call(method, fd):
    def call(loop, res):
        value = fd(res) if callable(fd) else fd
        if method.startswith("add_"):
            return getattr(loop, method)(value, noop)
        return getattr(loop, method)(value)

    return call


def fd_of_transport(method):
    async def call(loop, res):
        tr = await res.transport()
        fd = tr.get_extra_info("socket").fileno()
        if method.startswith("add_"):
            return getattr(loop, method)(fd, noop)
        return getattr(loop, method)(fd)

    return call


def sub_exec(*args, **kwargs):
    def call(loop, res):
        return loop.subprocess_exec(asyncio.SubprocessProtocol, *args, **kwargs)

    return call


CASES = []

# ---- call_soon / call_later / call_at / call_soon_threadsafe ----------------

for _method, _value, _expect in [
    ("call_later", math.nan, fires),
    ("call_later", -math.inf, fires),
    ("call_later", -5, fires),
    ("call_later", -1e300, fires),
    ("call_later", math.inf, never_fires),
    ("call_later", 1e300, never_fires),
    ("call_later", sys.float_info.max, never_fires),
    ("call_later", 2**63, never_fires),
    ("call_later", 10**30, never_fires),
    ("call_at", math.nan, fires),
    ("call_at", -math.inf, fires),
    ("call_at", -5.0, fires),
    ("call_at", math.inf, never_fires),
    ("call_at", 1e300, never_fires),
    ("call_at", 2**63, never_fires),
]:
    CASES.append(Case(f"{_method}-{_value!r}", timer(_method, _value), ok(check=_expect)))

CASES += [
    case("call_later-10**400", timer("call_later", 10**400), OverflowError, "too large|float"),
    # asyncio keeps an int deadline as it is, beyond a float's range too:
    # it fires a past one and never a far one; zloopgo orders them as -inf
    # and +inf (docs/compatibility.md: asyncio's run loop also raises
    # OverflowError once such a deadline is the earliest and it would wait)
    Case("call_at-10**400", timer("call_at", 10**400), ok(check=never_fires)),
    Case("call_at--10**400", timer("call_at", -(10**400)), ok(check=fires)),
    case("call_later-str", timer("call_later", "1"), TypeError, "str"),
]
if sys.version_info >= (3, 11):
    CASES += [
        case("call_later-None", timer("call_later", None), TypeError, "delay must not be None"),
        case("call_at-None", timer("call_at", None), TypeError, "when cannot be None"),
    ]
else:
    # 3.10 has no None checks: call_later's time() + None fails in the
    # addition, and call_at's TimerHandle asserts `when is not None`
    CASES += [
        case(
            "call_later-None",
            timer("call_later", None),
            TypeError,
            r"unsupported operand type\(s\) for \+: 'float' and 'NoneType'",
        ),
        case("call_at-None", timer("call_at", None), AssertionError, EMPTY_MESSAGE),
    ]
for _method in ["call_soon", "call_soon_threadsafe", "call_later", "call_at"]:
    CASES.append(
        Case(
            f"{_method}-non-callable",
            schedule_non_callable(_method),
            raises(TypeError, r"a callable object was expected by call_\w+\(\), got 42"),
            # asyncio checks in debug mode only; the error reaches the handler
            nodebug=ok(check=runs_briefly, handler=r"Exception in callback 42\(\)"),
        )
    )

# ---- running, tasks, executors, handlers, factories ---------------------

CASES += [
    case("run_until_complete-int", lambda lp, r: lp.run_until_complete(42), TypeError, "awaitable"),
    case(
        "run_until_complete-coroutine-function",
        lambda lp, r: lp.run_until_complete(coro_func),
        TypeError,
        "awaitable",
    ),
    case("create_task-int", lambda lp, r: lp.create_task(42), TypeError, "coroutine was expected"),
    case(
        "create_task-coroutine-function",
        lambda lp, r: lp.create_task(coro_func),
        TypeError,
        "coroutine was expected",
    ),
    # without debug mode asyncio's executor fails to call it; in debug mode
    # run_in_executor checks first
    case(
        "run_in_executor-non-callable",
        lambda lp, r: lp.run_in_executor(None, 42),
        TypeError,
        "callable",
    ),
    case(
        "run_in_executor-not-an-executor",
        lambda lp, r: lp.run_in_executor(42, noop),
        AttributeError,
        "submit",
    ),
    case(
        "set_exception_handler-non-callable",
        lambda lp, r: lp.set_exception_handler(42),
        TypeError,
        "callable",
    ),
    case(
        "set_task_factory-non-callable",
        lambda lp, r: lp.set_task_factory(42),
        TypeError,
        "callable",
    ),
]
if sys.version_info >= (3, 11):
    CASES += [
        case(
            "set_default_executor-int",
            lambda lp, r: lp.set_default_executor(42),
            TypeError,
            "ThreadPoolExecutor",
        ),
        case(
            "set_default_executor-not-a-thread-pool",
            lambda lp, r: lp.set_default_executor(concurrent.futures.Executor()),
            TypeError,
            "ThreadPoolExecutor",
        ),
    ]
else:
    # 3.10 warns (DeprecationWarning) and keeps the executor anyway
    CASES += [
        Case(
            "set_default_executor-int",
            set_default_executor_warns(42),
            ok(check=kept_as_default_executor(AttributeError, "submit")),
        ),
        Case(
            "set_default_executor-not-a-thread-pool",
            set_default_executor_warns(concurrent.futures.Executor()),
            ok(check=kept_as_default_executor(NotImplementedError, "")),
        ),
    ]

# ---- descriptors ----------------------------------------------------------

for _method in FD_METHODS:
    CASES += [
        case(
            f"{_method}-negative", fd_call(_method, -1), ValueError, "Invalid file descriptor: -1"
        ),
        case(f"{_method}-str", fd_call(_method, "3"), ValueError, "Invalid file object"),
        case(f"{_method}-float", fd_call(_method, 1.5), ValueError, "Invalid file object"),
        case(f"{_method}-no-fileno", fd_call(_method, object()), ValueError, "Invalid file object"),
        case(f"{_method}-None", fd_call(_method, None), ValueError, "Invalid file object"),
        case(
            f"{_method}-transport-fd", fd_of_transport(_method), RuntimeError, "used by transport"
        ),
    ]
    if _method.startswith("add_"):
        CASES += [
            case(f"{_method}-closed", fd_call(_method, Res.closed_fd), OSError, "Bad file"),
            case(f"{_method}-2**40", fd_call(_method, 2**40), OverflowError, "too large|range"),
        ]
    else:
        # asyncio's remove_* answer False for a descriptor nobody watches
        CASES += [
            Case(f"{_method}-closed", fd_call(_method, Res.closed_fd), ok(check=returns(False))),
            Case(f"{_method}-2**40", fd_call(_method, 2**40), ok(check=returns(False))),
        ]


def _add_writer_non_callable(loop, res):
    a, _ = res.pair()
    res.later(lambda: loop.remove_writer(a))
    return loop.add_writer(a, 42)


# asyncio accepts any callback; calling it fails in the exception handler
CASES.append(
    Case(
        "add_writer-non-callable",
        _add_writer_non_callable,
        ok(check=runs_briefly, handler=r"Exception in callback 42\(\)"),
    )
)

# ---- low-level socket operations ------------------------------------------

for _method in [
    "sock_recv",
    "sock_recv_into",
    "sock_sendall",
    "sock_accept",
    "sock_connect",
    "sock_sendfile",
]:
    # asyncio checks for a blocking socket in debug mode only
    CASES.append(Case(f"{_method}-blocking", blocking_sock_call(_method), NOT_NON_BLOCKING, ok()))


def _nb_pair(res):
    return res.pair()[0]


CASES += [
    case(
        "sock_recv-not-a-socket",
        lambda lp, r: lp.sock_recv(42, 1),
        AttributeError,
        "'int' object has no attribute",
    ),
    case(
        "sock_sendall-not-a-socket",
        lambda lp, r: lp.sock_sendall(42, b"x"),
        AttributeError,
        "'int' object has no attribute",
    ),
    case(
        "sock_accept-not-a-socket",
        lambda lp, r: lp.sock_accept(42),
        AttributeError,
        "'int' object has no attribute",
    ),
    case(
        "sock_connect-not-a-socket",
        lambda lp, r: lp.sock_connect(42, (LOCALHOST, 1)),
        AttributeError,
        "'int' object has no attribute",
    ),
    case(
        "sock_sendall-str",
        lambda lp, r: lp.sock_sendall(_nb_pair(r), "x"),
        TypeError,
        "bytes-like object is required, not 'str'",
    ),
    case(
        "sock_sendall-int",
        lambda lp, r: lp.sock_sendall(_nb_pair(r), 42),
        TypeError,
        "bytes-like object is required, not 'int'",
    ),
    case(
        "sock_sendall-list",
        lambda lp, r: lp.sock_sendall(_nb_pair(r), [b"x"]),
        TypeError,
        "bytes-like object is required, not 'list'",
    ),
    case(
        "sock_recv-negative",
        lambda lp, r: lp.sock_recv(_nb_pair(r), -1),
        ValueError,
        "negative buffersize",
    ),
    case(
        "sock_recv_into-bytes",
        lambda lp, r: lp.sock_recv_into(_nb_pair(r), b"xx"),
        TypeError,
        "read-write",
    ),
    case(
        "sock_connect-port-70000",
        lambda lp, r: lp.sock_connect(r.sock(blocking=False), (LOCALHOST, 70000)),
        OverflowError,
        "port must be 0-65535",
    ),
    case(
        "sock_connect-port-abc",
        lambda lp, r: lp.sock_connect(r.sock(blocking=False), (LOCALHOST, "abc")),
        socket.gaierror,
        "Servname not supported",
    ),
    case(
        "sock_sendfile-text-file",
        lambda lp, r: lp.sock_sendfile(_nb_pair(r), r.text_file()),
        ValueError,
        "binary mode",
    ),
    case(
        "sock_sendfile-datagram-socket",
        lambda lp, r: lp.sock_sendfile(
            r.sock(type=socket.SOCK_DGRAM, blocking=False), r.binary_file()
        ),
        ValueError,
        "only SOCK_STREAM",
    ),
]

# ---- transports -----------------------------------------------------------


def asyncio_write_wants():
    """What asyncio's socket transport's write() says it wants of a
    non-bytes argument, read from this Python's asyncio: the wording changed
    within 3.13's patch releases (3.13.0 "bytes-like object", 3.13.15 and
    3.14 "bytes, bytearray, or memoryview object"). Its check comes before
    anything reads the transport, so no transport is needed."""
    from asyncio import selector_events

    with pytest.raises(TypeError) as caught:
        selector_events._SelectorSocketTransport.write(None, 0)
    return re.fullmatch(r"data argument must be a (.+), not 'int'", str(caught.value)).group(1)


WRITE_WANTS = asyncio_write_wants()

CASES += [
    case(
        "transport.write-str",
        with_transport(lambda lp, r, tr: tr.write("abc")),
        TypeError,
        f"{WRITE_WANTS}, not 'str'",
    ),
    case(
        "transport.write-int",
        with_transport(lambda lp, r, tr: tr.write(42)),
        TypeError,
        f"{WRITE_WANTS}, not 'int'",
    ),
    case(
        "transport.write-list",
        with_transport(lambda lp, r, tr: tr.write([b"a"])),
        TypeError,
        f"{WRITE_WANTS}, not 'list'",
    ),
    case(
        "transport.write-None",
        with_transport(lambda lp, r, tr: tr.write(None)),
        TypeError,
        f"{WRITE_WANTS}, not 'NoneType'",
    ),
    case(
        "transport.write-empty-str",
        with_transport(lambda lp, r, tr: tr.write("")),
        TypeError,
        f"{WRITE_WANTS}, not 'str'",
    ),
    # 3.15's writelines buffers the items before the bad one and then raises,
    # with no writer registered: the byte stays buffered (the transport
    # could never finish closing, so the row aborts it); before 3.15
    # nothing is buffered.
    Case(
        "transport.writelines-str-item",
        with_transport(lambda lp, r, tr: tr.writelines([b"a", "b"])),
        Expect(TypeError, "bytes-like object", check=writelines_left_buffered),
    ),
    case(
        "transport.write-after-write_eof",
        with_transport(lambda lp, r, tr: (tr.write_eof(), tr.write(b"x"))),
        RuntimeError,
        r"after write_eof\(\)",
    ),
    case(
        "transport.writelines-after-write_eof",
        with_transport(lambda lp, r, tr: (tr.write_eof(), tr.writelines([b"x"]))),
        RuntimeError,
        r"after write_eof\(\)",
    ),
    # asyncio drops data written after close() (it counts the writes)
    case(
        "transport.write-after-close",
        with_transport(lambda lp, r, tr: (tr.close(), tr.write(b"x"))),
        None,
    ),
    case(
        "transport.write-str-after-close",
        with_transport(lambda lp, r, tr: (tr.close(), tr.write("x"))),
        TypeError,
        f"{WRITE_WANTS}, not 'str'",
    ),
    # asyncio accepts any memoryview; send() refuses a non-contiguous one,
    # which is a fatal error on the transport, reported to the handler
    Case(
        "transport.write-non-contiguous-memoryview",
        with_transport(lambda lp, r, tr: tr.write(memoryview(b"abcd")[::2])),
        ok(check=transport_closing, handler="Fatal write error on socket transport"),
    ),
    case(
        "transport.set_write_buffer_limits-high-below-low",
        with_transport(lambda lp, r, tr: tr.set_write_buffer_limits(high=1, low=5)),
        ValueError,
        r"high \(1\) must be >= low \(5\)",
    ),
    case(
        "sendfile-not-a-file",
        with_transport(lambda lp, r, tr: lp.sendfile(tr, 42)),
        AttributeError,
        "readinto",
    ),
    case(
        "sendfile-text-file",
        with_transport(lambda lp, r, tr: lp.sendfile(tr, r.text_file())),
        ValueError,
        "binary mode",
    ),
    case(
        "sendfile-negative-offset",
        with_transport(lambda lp, r, tr: lp.sendfile(tr, r.binary_file(), -1)),
        ValueError,
        "offset must be a non-negative integer",
    ),
    case(
        "sendfile-zero-count",
        with_transport(lambda lp, r, tr: lp.sendfile(tr, r.binary_file(), 0, 0)),
        ValueError,
        "count must be a positive integer",
    ),
    case(
        "sendfile-float-offset",
        with_transport(lambda lp, r, tr: lp.sendfile(tr, r.binary_file(), 1.5)),
        TypeError,
        "offset must be a non-negative integer",
    ),
    case(
        "sendfile-closed-transport",
        with_transport(lambda lp, r, tr: (tr.close(), lp.sendfile(tr, r.binary_file()))[1]),
        RuntimeError,
        "Transport is closing",
    ),
]

# ---- connections, servers, endpoints --------------------------------------
# (create_server(backlog="x") is left out: asyncio itself leaks the bound
# socket when listen() refuses the backlog)

P = asyncio.Protocol
CASES += [
    case(
        "create_connection-port--1",
        lambda lp, r: lp.create_connection(P, LOCALHOST, -1),
        OverflowError,
        "port must be 0-65535",
    ),
    case(
        "create_connection-port-70000",
        lambda lp, r: lp.create_connection(P, LOCALHOST, 70000),
        OverflowError,
        "port must be 0-65535",
    ),
    case(
        "create_connection-port-abc",
        lambda lp, r: lp.create_connection(P, LOCALHOST, "abc"),
        socket.gaierror,
        "Servname not supported",
    ),
    case(
        "create_connection-host-not-str",
        lambda lp, r: lp.create_connection(P, 42, 1),
        TypeError,
        "int",
    ),
    case(
        "create_connection-host-and-sock",
        lambda lp, r: lp.create_connection(P, LOCALHOST, 1, sock=r.sock()),
        ValueError,
        "host/port and sock can not be specified at the same time",
    ),
    case(
        "create_connection-neither",
        lambda lp, r: lp.create_connection(P),
        ValueError,
        "host and port was not specified and no sock specified",
    ),
    case(
        "create_connection-datagram-sock",
        lambda lp, r: lp.create_connection(P, sock=r.sock(type=socket.SOCK_DGRAM)),
        ValueError,
        "A Stream Socket was expected",
    ),
    case(
        "create_connection-ssl_handshake_timeout-without-ssl",
        lambda lp, r: lp.create_connection(P, LOCALHOST, 1, ssl_handshake_timeout=1),
        ValueError,
        "ssl_handshake_timeout is only meaningful with ssl",
    ),
    case(
        "create_connection-server_hostname-without-ssl",
        lambda lp, r: lp.create_connection(P, LOCALHOST, 1, server_hostname="x"),
        ValueError,
        "server_hostname is only meaningful with ssl",
    ),
    case(
        "create_connection-local_addr-port-70000",
        lambda lp, r: lp.create_connection(P, LOCALHOST, 1, local_addr=(LOCALHOST, 70000)),
        OverflowError,
        "port must be 0-65535",
    ),
    case(
        "create_server-port--1",
        lambda lp, r: lp.create_server(P, LOCALHOST, -1),
        OverflowError,
        "port must be 0-65535",
    ),
    case(
        "create_server-port-70000",
        lambda lp, r: lp.create_server(P, LOCALHOST, 70000),
        OverflowError,
        "port must be 0-65535",
    ),
    case(
        "create_server-port-abc",
        lambda lp, r: lp.create_server(P, LOCALHOST, "abc"),
        socket.gaierror,
        "Servname not supported",
    ),
    case(
        "create_server-ssl_handshake_timeout-without-ssl",
        lambda lp, r: lp.create_server(P, LOCALHOST, 0, ssl_handshake_timeout=1),
        ValueError,
        "ssl_handshake_timeout is only meaningful with ssl",
    ),
    case(
        "create_server-datagram-sock",
        lambda lp, r: lp.create_server(P, sock=r.sock(type=socket.SOCK_DGRAM)),
        ValueError,
        "A Stream Socket was expected",
    ),
    case(
        "create_unix_connection-path-and-sock",
        lambda lp, r: lp.create_unix_connection(P, "/nonexistent", sock=r.sock(socket.AF_UNIX)),
        ValueError,
        "path and sock can not be specified at the same time",
    ),
    case(
        "create_unix_connection-neither",
        lambda lp, r: lp.create_unix_connection(P),
        ValueError,
        "no path and sock were specified",
    ),
    case(
        "create_unix_server-path-and-sock",
        lambda lp, r: lp.create_unix_server(P, "/nonexistent", sock=r.sock(socket.AF_UNIX)),
        ValueError,
        "path and sock can not be specified at the same time",
    ),
    case(
        "create_unix_server-neither",
        lambda lp, r: lp.create_unix_server(P),
        ValueError,
        "path was not specified, and no sock specified",
    ),
    case(
        "create_datagram_endpoint-local-port-70000",
        lambda lp, r: lp.create_datagram_endpoint(
            asyncio.DatagramProtocol, local_addr=(LOCALHOST, 70000)
        ),
        OverflowError,
        "port must be 0-65535",
    ),
    case(
        "create_datagram_endpoint-stream-sock",
        lambda lp, r: lp.create_datagram_endpoint(asyncio.DatagramProtocol, sock=r.sock()),
        ValueError,
        "(UDP|datagram) socket was expected",
    ),
    case(
        "connect_accepted_socket-not-a-socket",
        lambda lp, r: lp.connect_accepted_socket(P, 42),
        AttributeError,
        "'int' object has no attribute",
    ),
]

# ---- name resolution ------------------------------------------------------

CASES += [
    case(
        "getaddrinfo-port-not-a-service",
        lambda lp, r: lp.getaddrinfo(LOCALHOST, "nosuchservice"),
        socket.gaierror,
        "Servname not supported",
    ),
    case(
        "getaddrinfo-port--1",
        lambda lp, r: lp.getaddrinfo(LOCALHOST, -1),
        socket.gaierror,
        "Servname not supported",
    ),
    case(
        "getaddrinfo-port-list",
        lambda lp, r: lp.getaddrinfo(LOCALHOST, [80]),
        OSError,
        "Int or String expected",
    ),
    case(
        "getaddrinfo-host-int",
        lambda lp, r: lp.getaddrinfo(42, 80),
        TypeError,
        "argument 1 must be str",
    ),
    case(
        "getnameinfo-not-a-tuple",
        lambda lp, r: lp.getnameinfo(LOCALHOST),
        TypeError,
        "must be a tuple",
    ),
    case(
        "getnameinfo-port-str",
        lambda lp, r: lp.getnameinfo((LOCALHOST, "x")),
        TypeError,
        "integer",
    ),
    case(
        "getnameinfo-flags-str",
        lambda lp, r: lp.getnameinfo((LOCALHOST, 80), "x"),
        TypeError,
        "integer",
    ),
    case(
        "getnameinfo-4-tuple-for-ipv4",
        lambda lp, r: lp.getnameinfo((LOCALHOST, 80, 0, 0), 0),
        OSError,
        "IPv4 sockaddr must be 2 tuple",
    ),
]

# ---- signals --------------------------------------------------------------

CASES += [
    case(
        "add_signal_handler-1000", add_signal(1000, noop), ValueError, "invalid signal number 1000"
    ),
    case("add_signal_handler-0", add_signal(0, noop), ValueError, "invalid signal number 0"),
    case("add_signal_handler--1", add_signal(-1, noop), ValueError, "invalid signal number -1"),
    case("add_signal_handler-str", add_signal("SIGUSR1", noop), TypeError, "sig must be an int"),
    case(
        "add_signal_handler-SIGKILL",
        add_signal(signal.SIGKILL, noop),
        RuntimeError,
        "sig 9 cannot be caught",
    ),
    case(
        "add_signal_handler-coroutine-function",
        add_signal(signal.SIGUSR1, coro_func),
        TypeError,
        r"coroutines cannot be used with add_signal_handler\(\)",
    ),
    # asyncio accepts a non-callable; calling it fails in the exception handler
    Case(
        "add_signal_handler-non-callable",
        add_signal(signal.SIGUSR1, 42),
        ok(check=signal_delivered_to_handler, handler=r"Exception in callback 42\(\)"),
    ),
    case(
        "remove_signal_handler-1000",
        lambda lp, r: lp.remove_signal_handler(1000),
        ValueError,
        "invalid signal number 1000",
    ),
    case(
        "remove_signal_handler-str",
        lambda lp, r: lp.remove_signal_handler("x"),
        TypeError,
        "sig must be an int",
    ),
    Case(
        "remove_signal_handler-not-installed",
        lambda lp, r: lp.remove_signal_handler(signal.SIGUSR2),
        ok(check=returns(False)),
    ),
]

# ---- subprocesses ---------------------------------------------------------

CASES += [
    case(
        "subprocess_exec-universal_newlines",
        sub_exec("true", universal_newlines=True),
        ValueError,
        "universal_newlines must be False",
    ),
    case("subprocess_exec-shell", sub_exec("true", shell=True), ValueError, "shell must be False"),
    case("subprocess_exec-bufsize", sub_exec("true", bufsize=1), ValueError, "bufsize must be 0"),
    case("subprocess_exec-text", sub_exec("true", text=True), ValueError, "text must be False"),
    case(
        "subprocess_exec-encoding",
        sub_exec("true", encoding="utf-8"),
        ValueError,
        "encoding must be None",
    ),
    case(
        "subprocess_exec-program-int",
        sub_exec(42),
        TypeError,
        "expected str, bytes or os.PathLike object",
    ),
    case(
        "subprocess_exec-missing-program",
        sub_exec("/nonexistent/zloopgo-no-such-program"),
        FileNotFoundError,
        "No such file",
    ),
    case(
        "subprocess_shell-list",
        lambda lp, r: lp.subprocess_shell(asyncio.SubprocessProtocol, ["true"]),
        ValueError,
        "cmd must be a string",
    ),
    case(
        "subprocess_shell-universal_newlines",
        lambda lp, r: lp.subprocess_shell(
            asyncio.SubprocessProtocol, "true", universal_newlines=True
        ),
        ValueError,
        "universal_newlines must be False",
    ),
]


# ---- the test -------------------------------------------------------------


def assert_loop_works(loop):
    async def probe():
        await asyncio.sleep(0)
        fut = loop.create_future()
        loop.call_soon(fut.set_result, "soon")
        assert await fut == "soon"
        fut = loop.create_future()
        loop.call_later(0.001, fut.set_result, "later")
        assert await fut == "later"
        a, b = socket.socketpair()
        try:
            fut = loop.create_future()
            loop.add_reader(a, lambda: fut.done() or fut.set_result(a.recv(10)))
            b.send(b"ping")
            assert await fut == b"ping"
            assert loop.remove_reader(a) is True
        finally:
            a.close()
            b.close()
        assert await asyncio.sleep(0, "done") == "done"

    assert not loop.is_closed()
    assert not loop.is_running()
    loop.run_until_complete(asyncio.wait_for(probe(), RUN_TIMEOUT))


@pytest.mark.parametrize("debug", [False, True], ids=["nodebug", "debug"])
@pytest.mark.parametrize("row", CASES, ids=[c.id for c in CASES])
def test_bad_input(loop, loop_errors, debug, row):
    loop.set_debug(debug)
    expect = row.expect(debug)
    res = Res(loop)
    raised = result = None
    try:
        try:
            result = row.call(loop, res)
            if inspect.isawaitable(result):
                result = loop.run_until_complete(asyncio.wait_for(result, RUN_TIMEOUT))
        except Exception as exc:  # noqa: BLE001 - the class is compared below
            raised = exc
        if expect.exc is None:
            assert raised is None, f"asyncio raises nothing here; got {raised!r}"
        else:
            assert raised is not None, f"expected {expect.exc.__name__}, nothing raised"
            assert type(raised) is expect.exc, f"expected {expect.exc.__name__}, got {raised!r}"
            message = str(raised)
            assert message or expect.words == EMPTY_MESSAGE, "empty message"
            assert re.search(expect.words, message, re.IGNORECASE), (
                f"message {message!r} does not match {expect.words!r}"
            )
        if expect.check is not None:
            expect.check(loop, res, result)
    finally:
        del raised
        res.close()
    assert_loop_works(loop)
    messages = [ctx.get("message") for ctx in loop_errors]
    if expect.handler is None:
        assert not loop_errors, f"unexpected exception handler calls: {loop_errors}"
    else:
        assert messages, f"expected an exception handler call matching {expect.handler!r}"
        for m in messages:
            assert re.search(expect.handler, m), f"handler message {m!r}"
