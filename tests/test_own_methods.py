"""zloopgo's Python classes own descriptors of the C methods they inherit
(capi/util.c, zl_own_methods), so that CPython's specialized calls of a C
method apply to loop.call_soon, transport.write and the rest: the same C
functions run. What must not change with it: a method a class overrides
stays the override, a descriptor refuses what is not an instance of its
class, and the loop's own clock is still read without a call
(capi/clock.c compares the method, not the descriptor) while a
replacement is still called."""

import asyncio
import inspect
import time
from unittest import mock

import pytest

import zloopgo
from zloopgo import _datagram, _engine, _loop, _tls, _transports

OWNING_CLASSES = [
    (_loop.Loop, _engine.LoopCore),
    (_transports.SocketTransport, _engine.StreamFastPaths),
    (_datagram.DatagramTransport, _engine.DatagramFastPaths),
]
if _tls.NATIVE_TLS:
    OWNING_CLASSES += [
        (_tls.SSLProtocol, _engine.TLSFastPaths),
        (_tls._SSLProtocolTransport, _engine.TLSTransportFastPaths),
    ]


MUST_OWN = {
    "Loop": {
        "call_soon",
        "call_later",
        "call_at",
        "time",
        "create_future",
        "create_task",
        "is_running",
    },
    "SocketTransport": {"write", "is_closing", "_read_ready", "_read_ready__data_received"},
    "DatagramTransport": {"sendto", "_read_ready"},
    "SSLProtocol": set(),
    "_SSLProtocolTransport": {"write"},
}


@pytest.mark.parametrize(("cls", "base"), OWNING_CLASSES, ids=lambda c: c.__name__)
def test_each_inherited_c_method_is_the_class_own_descriptor(cls, base):
    method_descriptor = type(_engine.LoopCore.__dict__["call_soon"])
    names = [n for n, v in vars(base).items() if type(v) is method_descriptor]
    assert names
    owned = set()
    for name in names:
        found = inspect.getattr_static(cls, name)
        if type(found) is not method_descriptor:
            # a Python override wins (none of these classes has one now;
            # test_a_subclass_override_is_kept_and_called covers the case)
            continue
        assert found.__objclass__ is cls, name
        assert found.__qualname__ == f"{cls.__name__}.{name}"
        assert found.__doc__ == vars(base)[name].__doc__
        owned.add(name)
    assert MUST_OWN[cls.__name__] <= owned
    # a second call finds nothing left to own
    assert _engine.own_methods(cls) == []


def test_a_subclass_override_is_kept_and_called():
    calls = []

    class Counting(zloopgo.Loop):
        def call_soon(self, callback, *args, context=None):
            calls.append(callback)
            return super().call_soon(callback, *args, context=context)

    owned = _engine.own_methods(Counting)
    assert "call_soon" not in owned and "call_later" in owned
    assert vars(Counting)["call_later"].__objclass__ is Counting
    loop = Counting()
    try:
        loop.call_soon(loop.stop)
        loop.run_forever()
        fired = []
        loop.call_later(0, fired.append, 1)  # the owned copy: LoopCore's code
        loop.run_until_complete(asyncio.sleep(0.01))
    finally:
        loop.close()
    assert calls[0] == loop.stop and fired == [1]


def test_the_descriptor_refuses_what_is_not_its_class():
    with pytest.raises(TypeError, match="'Loop' objects"):
        vars(zloopgo.Loop)["call_soon"](object(), print)
    loop = zloopgo.new_event_loop()
    try:  # LoopCore's own descriptor still applies to a Loop
        _engine.LoopCore.call_soon(loop, loop.stop)
        loop.run_forever()
    finally:
        loop.close()


@pytest.mark.parametrize("bad", [_engine.LoopCore, int, "Loop", None])
def test_own_methods_takes_only_a_python_class(bad):
    with pytest.raises(TypeError, match="expected a class defined in Python"):
        _engine.own_methods(bad)


def test_the_loops_own_clock_stays_native_and_a_replacement_is_seen():
    loop = zloopgo.new_event_loop()
    try:
        assert zloopgo.stats(loop)["clock_native"] is True
        with mock.patch.object(loop, "time", lambda: 5.0):
            assert zloopgo.stats(loop)["clock_native"] is False
        assert zloopgo.stats(loop)["clock_native"] is True
        with mock.patch.object(type(loop), "time", lambda self: 7.0):
            assert loop.time() == 7.0
            assert zloopgo.stats(loop)["clock_native"] is False
        assert zloopgo.stats(loop)["clock_native"] is True
        assert abs(loop.time() - time.monotonic()) < 1
    finally:
        loop.close()
