"""The worker of tests/test_argument_fuzz.py: calls one loop method with
odd arguments on stock asyncio and on zloopgo and prints what each did.

Every argument the adapter's C code takes from Python (descriptor numbers,
delays, deadlines, callbacks, contexts, sizes, limits, flags, names) is
named by a method *slot* (`SLOTS`) and a *value* (`VALUES`); a case is a
slot and a value name. For each case read from stdin (one JSON list
`[slot, value, debug]` per line) it makes a fresh loop of each kind, makes
the call, then runs one iteration, and prints one JSON line: the case and,
per loop, the outcome of the call (the exception's type and message, or
what it returned, summarised) and what the iteration did (exception
handler calls, an exception out of the loop). A case `[slot, value, debug,
true]` makes the call on a loop closed first. It runs in a subprocess so
that a crash or a hang in the adapter fails the test instead of the suite.
It knows asyncio's public loop API; nothing of zloopgo's internals.
"""

import os

# The small ints among the values (IntSub(3), AI_NUMERICHOST == 4) are
# descriptor numbers too. They must name the worker's own descriptors, the
# same on both loops, never one a loop opened for itself (asyncio's
# self-pipe, zloopgo's eventfd), whose numbers differ between Pythons:
# pipes opened before any import (the Go runtime opens descriptors when
# zloopgo is imported) take the lowest numbers, for the whole run.
if __name__ == "__main__":  # not when the test imports the tables
    _LOW_DESCRIPTORS = [end for _ in range(4) for end in os.pipe()]
    assert min(_LOW_DESCRIPTORS) == 3, "the worker starts with descriptors 0-2 only"

import asyncio
import contextlib
import contextvars
import decimal
import fractions
import json
import math
import re
import socket
import sys
import tempfile

import zloopgo

# ---- values -----------------------------------------------------------------


class IntSub(int):
    def __repr__(self):
        return f"IntSub({int(self)})"


class FloatSub(float):
    def __repr__(self):
        return f"FloatSub({float(self)!r})"


class Opaque:
    """An object that is nothing in particular (a fixed repr)."""

    def __repr__(self):
        return "<Opaque>"


class IndexRaises:
    def __index__(self):
        raise ValueError("index raises")

    def __repr__(self):
        return "<IndexRaises>"


class IndexLies:
    def __index__(self):
        return "three"  # the lie under test

    def __repr__(self):
        return "<IndexLies>"


class FloatRaises:
    def __float__(self):
        raise ValueError("float raises")

    def __repr__(self):
        return "<FloatRaises>"


class BoolRaises:
    def __bool__(self):
        raise ValueError("bool raises")

    def __repr__(self):
        return "<BoolRaises>"


class AddRaises:
    """A delay: float + it raises."""

    def __radd__(self, other):
        raise ValueError("add raises")

    def __repr__(self):
        return "<AddRaises>"


class Fileno:
    """An object whose fileno() returns `value` (or raises it)."""

    def __init__(self, value):
        self.value = value

    def fileno(self):
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value

    def __repr__(self):
        return f"<Fileno {self.value!r}>"


class FloatLtRaises(float):
    """A float whose comparisons raise: asyncio's heap and run loop call them."""

    def _raise(self, other):
        raise ValueError("comparison raises")

    __lt__ = __le__ = __gt__ = __ge__ = _raise

    def __repr__(self):
        return "FloatLtRaises()"


class IntHostile(int):
    """An int whose __index__, __float__ and __eq__ raise."""

    def __index__(self):
        raise ValueError("index raises")

    def __float__(self):
        raise ValueError("float raises")

    def __eq__(self, other):
        raise ValueError("eq raises")

    __hash__ = int.__hash__

    def __repr__(self):
        return f"IntHostile({int(self)})"


class EqLtRaises:
    """Converts to a float, but every comparison raises."""

    def __float__(self):
        return 0.001

    def _raise(self, other):
        raise ValueError("comparison raises")

    __eq__ = __lt__ = __le__ = __gt__ = __ge__ = _raise
    __hash__ = object.__hash__

    def __repr__(self):
        return "<EqLtRaises>"


class FloatOnly:
    """Converts to a float and compares with nothing."""

    def __float__(self):
        return 0.001

    def __repr__(self):
        return "<FloatOnly>"


class CallRaises:
    def __call__(self, *args):
        raise ValueError("call raises")

    def __repr__(self):
        return "<CallRaises>"


def noop(*args):
    pass


async def coro_func():
    pass


def _pipe_read():
    r, w = os.pipe()
    _KEEP.append(w)
    _CLOSE.extend((r, w))
    return r


def _regular_file():
    f = tempfile.TemporaryFile()  # noqa: SIM115 - closed when its case is done
    _KEEP.append(f)
    return f.fileno()


def _closed_fd():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    return r


def _closed_socket():
    s = socket.socket()
    s.close()
    return s


def _open_socket():
    a, b = socket.socketpair()
    _KEEP.extend((a, b))
    return a


_KEEP = []  # objects a value needs alive until its case is done
_CLOSE = []  # descriptors to close then

# name -> a function making the value (a fresh one for each loop)
VALUES = {
    "0": lambda: 0,
    "1": lambda: 1,
    "-1": lambda: -1,
    "2**31-1": lambda: 2**31 - 1,
    "2**31": lambda: 2**31,
    "2**63": lambda: 2**63,
    "-2**63-1": lambda: -(2**63) - 1,
    "10**30": lambda: 10**30,
    "10**400": lambda: 10**400,
    "-10**400": lambda: -(10**400),
    "0.0": lambda: 0.0,
    "-0.0": lambda: -0.0,
    "0.5": lambda: 0.5,
    "-0.5": lambda: -0.5,
    "1e308": lambda: 1e308,
    "1e-320": lambda: 1e-320,
    "inf": lambda: math.inf,
    "-inf": lambda: -math.inf,
    "nan": lambda: math.nan,
    "True": lambda: True,
    "False": lambda: False,
    "None": lambda: None,
    "'1'": lambda: "1",
    "''": lambda: "",
    "b'1'": lambda: b"1",
    "bytearray": lambda: bytearray(b"abc"),
    "memoryview": lambda: memoryview(b"abc"),
    "strided memoryview": lambda: memoryview(b"abcdef")[::2],
    "[]": list,
    "()": lambda: (),
    "Opaque": Opaque,
    "Decimal": lambda: decimal.Decimal("0.1"),
    "Fraction": lambda: fractions.Fraction(1, 3),
    "complex": lambda: complex(1, 0),
    "IntSub": lambda: IntSub(3),
    "FloatSub": lambda: FloatSub(0.001),
    "IndexRaises": IndexRaises,
    "IndexLies": IndexLies,
    "FloatRaises": FloatRaises,
    "BoolRaises": BoolRaises,
    "AddRaises": AddRaises,
    "FloatLtRaises": lambda: FloatLtRaises(0.001),
    "IntHostile": lambda: IntHostile(1),
    "EqLtRaises": EqLtRaises,
    "FloatOnly": FloatOnly,
    "noop": lambda: noop,
    "CallRaises": CallRaises,
    "coroutine function": lambda: coro_func,
    "coroutine": coro_func,
    "Context": contextvars.Context,
    "pipe read end": _pipe_read,
    "regular file": _regular_file,
    "closed fd": _closed_fd,
    "closed socket": _closed_socket,
    "open socket": _open_socket,
    "Fileno(-1)": lambda: Fileno(-1),
    "Fileno(2**31)": lambda: Fileno(2**31),
    "Fileno('3')": lambda: Fileno("3"),
    "Fileno raises": lambda: Fileno(OSError(9, "fileno raises")),
    "'127.1'": lambda: "127.1",  # a name to sendto() and the resolver, answered without DNS
    "'127.0.0.1'": lambda: "127.0.0.1",
    "'::1'": lambda: "::1",
    "b'127.0.0.1'": lambda: b"127.0.0.1",
    "('127.0.0.1', 80)": lambda: ("127.0.0.1", 80),
    "('::1', 80, 0, 0)": lambda: ("::1", 80, 0, 0),
    "('127.0.0.1', 80, 1)": lambda: ("127.0.0.1", 80, 1),
    "('127.0.0.1',)": lambda: ("127.0.0.1",),
    "('127.0.0.1', 'x')": lambda: ("127.0.0.1", "x"),
    "AF_INET": lambda: socket.AF_INET,
    "SOCK_STREAM": lambda: socket.SOCK_STREAM,
    "AI_NUMERICHOST": lambda: socket.AI_NUMERICHOST,
    "NI_NUMERICHOST": lambda: socket.NI_NUMERICHOST,
}

# ---- slots ------------------------------------------------------------------


async def _run_coroutine(loop, coro):
    return await coro


def _transport_call(loop, action):
    """action(transport) on a transport over a socketpair of this loop."""
    ours, peer = socket.socketpair()
    _KEEP.extend((ours, peer))
    ours.setblocking(False)
    transport, _ = loop.run_until_complete(loop.connect_accepted_socket(asyncio.Protocol, ours))
    _KEEP.append(transport)
    return action(transport)


def _set_max_size(transport, v):
    transport.max_size = v
    return transport


# slot -> call(loop, value); the value goes where the slot's name says
SLOTS = {
    "call_soon(callback)": lambda lp, v: lp.call_soon(v),
    "call_soon(noop, arg)": lambda lp, v: lp.call_soon(noop, v),
    "call_soon(context=)": lambda lp, v: lp.call_soon(noop, context=v),
    "call_soon_threadsafe(callback)": lambda lp, v: lp.call_soon_threadsafe(v),
    "call_soon_threadsafe(context=)": lambda lp, v: lp.call_soon_threadsafe(noop, context=v),
    "call_later(delay)": lambda lp, v: lp.call_later(v, noop),
    "call_later(0, callback)": lambda lp, v: lp.call_later(0, v),
    "call_later(context=)": lambda lp, v: lp.call_later(0, noop, context=v),
    "call_at(when)": lambda lp, v: lp.call_at(v, noop),
    "call_at(now, callback)": lambda lp, v: lp.call_at(lp.time(), v),
    # asyncio's signatures: keywords for positional parameters, an
    # unexpected keyword, a missing argument
    "call_soon(callback=)": lambda lp, v: lp.call_soon(callback=v),
    "call_soon(noop, x=)": lambda lp, v: lp.call_soon(noop, x=v),
    "call_soon_threadsafe(callback=)": lambda lp, v: lp.call_soon_threadsafe(callback=v),
    "call_later(delay=, callback=)": lambda lp, v: lp.call_later(delay=v, callback=noop),
    "call_later(delay) alone": lambda lp, v: lp.call_later(v),
    "call_at(when=, callback=)": lambda lp, v: lp.call_at(when=v, callback=noop),
    "call_at(when, noop, callback=)": lambda lp, v: lp.call_at(v, noop, callback=noop),
    "add_reader(fd)": lambda lp, v: lp.add_reader(v, noop),
    "add_writer(fd)": lambda lp, v: lp.add_writer(v, noop),
    "add_reader(pipe, callback)": lambda lp, v: lp.add_reader(_pipe_read(), v),
    "remove_reader(fd)": lambda lp, v: lp.remove_reader(v),
    "remove_writer(fd)": lambda lp, v: lp.remove_writer(v),
    "create_task(coro)": lambda lp, v: lp.create_task(v),
    "create_task(name=)": lambda lp, v: lp.create_task(coro_func(), name=v),
    "set_task_factory": lambda lp, v: lp.set_task_factory(v),
    "set_debug": lambda lp, v: (lp.set_debug(v), lp.get_debug())[1],
    "getaddrinfo(host)": lambda lp, v: lp.run_until_complete(lp.getaddrinfo(v, 80)),
    "getaddrinfo(port)": lambda lp, v: lp.run_until_complete(lp.getaddrinfo("127.0.0.1", v)),
    "getaddrinfo(family=)": lambda lp, v: lp.run_until_complete(
        lp.getaddrinfo("127.0.0.1", 80, family=v)
    ),
    "getaddrinfo(type=)": lambda lp, v: lp.run_until_complete(lp.getaddrinfo("127.1", 80, type=v)),
    "getaddrinfo(proto=)": lambda lp, v: lp.run_until_complete(
        lp.getaddrinfo("127.1", 80, proto=v)
    ),
    "getaddrinfo(flags=)": lambda lp, v: lp.run_until_complete(
        lp.getaddrinfo("127.1", 80, flags=v)
    ),
    "getnameinfo(sockaddr)": lambda lp, v: lp.run_until_complete(lp.getnameinfo(v)),
    "getnameinfo(flags)": lambda lp, v: lp.run_until_complete(lp.getnameinfo(("127.0.0.1", 80), v)),
    "TimerHandle < value": lambda lp, v: lp.call_later(10, noop) < v,
    "TimerHandle == value": lambda lp, v: lp.call_later(10, noop) == v,
    "transport.write": lambda lp, v: _transport_call(lp, lambda t: t.write(v)),
    "transport.writelines": lambda lp, v: _transport_call(lp, lambda t: t.writelines([v, v])),
    "transport.max_size": lambda lp, v: _transport_call(lp, lambda t: _set_max_size(t, v)),
    "set_write_buffer_limits(high=)": lambda lp, v: _transport_call(
        lp, lambda t: (t.set_write_buffer_limits(high=v), t.write(b"x" * 100))
    ),
    "set_write_buffer_limits(low=)": lambda lp, v: _transport_call(
        lp, lambda t: (t.set_write_buffer_limits(low=v), t.write(b"x" * 100))
    ),
}

# ---- running a case ---------------------------------------------------------


def _summary(result):
    """What a call returned, without addresses or loop-specific types (a
    handle counts by the asyncio class it is an instance of, as a program
    checking it would see it)."""
    if result is None or isinstance(result, (bool, int, float, str)):
        return repr(result)
    if isinstance(result, asyncio.TimerHandle):
        return "TimerHandle"
    if isinstance(result, asyncio.Handle):
        return "Handle"
    if isinstance(result, asyncio.Task):
        return "Task"
    if isinstance(result, asyncio.BaseTransport):
        return "transport"
    if isinstance(result, (list, tuple)):
        return type(result).__name__ + "[" + ",".join(_summary(r) for r in result) + "]"
    return type(result).__name__


def _exception(exc):
    # an object's address differs between two objects made alike
    # (Windows' reprs print addresses in upper-case hex)
    return [type(exc).__name__, re.sub(r"0x[0-9a-fA-F]+", "0x?", str(exc))]


# WSAENOTCONN: see _new_loop
_WINE_SOCKETPAIR_RACE = 10057


def _new_loop(factory):
    """factory(): both loops make a socket pair for their self-pipe, on
    Windows by CPython's socketpair fallback (listen, connect and accept on
    127.0.0.1, then compare the two ends' addresses). Under Wine 8 that
    comparison now and then finds the connected socket not connected yet
    (getpeername fails with WSAENOTCONN), on asyncio's loop as on
    zloopgo's, before any argument is passed: Wine's, so made again."""
    for _ in range(5):
        try:
            return factory()
        except OSError as exc:
            if sys.platform != "win32" or exc.winerror != _WINE_SOCKETPAIR_RACE:
                raise
    return factory()


def run_case(factory, slot, value, debug, closed=False):
    loop = _new_loop(factory)
    handler_calls = []
    loop.set_exception_handler(
        lambda _lp, ctx: handler_calls.append(
            [ctx.get("message", ""), type(ctx.get("exception")).__name__]
        )
    )
    loop.set_debug(debug)
    if closed:  # which check comes first: the loop's or the argument's
        loop.close()
    try:
        call = ["returned", _summary(SLOTS[slot](loop, value))]
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        call = ["raised", *_exception(exc)]
    try:
        loop.stop()
        loop.run_forever()
        ran = ["ran"]
    except BaseException as exc:  # noqa: BLE001 - the outcome under test
        ran = ["run raised", *_exception(exc)]
    if asyncio.iscoroutine(value):
        value.close()
    for task in asyncio.all_tasks(loop):
        task.cancel()
    try:
        for obj in _KEEP:
            if isinstance(obj, asyncio.BaseTransport):
                obj.abort()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
    except BaseException as exc:  # noqa: BLE001 - recorded, not hidden
        ran.append("close raised " + type(exc).__name__)
    return {"call": call, "ran": ran, "handler": handler_calls}


def release_values():
    for obj in _KEEP:
        if hasattr(obj, "close") and not isinstance(obj, asyncio.BaseTransport):
            obj.close()
    for fd in _CLOSE:
        with contextlib.suppress(OSError):
            os.close(fd)
    _KEEP.clear()
    _CLOSE.clear()


# values that one call uses up: each loop gets its own
_SINGLE_USE = {"coroutine"}


def main():
    factories = {"asyncio": asyncio.SelectorEventLoop, "zloopgo": zloopgo.new_event_loop}
    for line in sys.stdin:
        slot, value_name, debug, *closed = json.loads(line)
        # one value for both loops, so that its repr (and a descriptor's
        # number) in messages is the same
        value = VALUES[value_name]()
        out = {}
        for name, factory in factories.items():
            if value_name in _SINGLE_USE:
                value = VALUES[value_name]()
            out[name] = run_case(factory, slot, value, debug, *closed)
        release_values()
        print(json.dumps([[slot, value_name, debug, *closed], out]), flush=True)


if __name__ == "__main__":
    main()
