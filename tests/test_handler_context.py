"""What the loop's exception handler sees, dual-run: asyncio calls it from
inside `except BaseException as exc:` (Handle._run, a transport's
_fatal_error), so while it runs the callback's exception is the one being
handled. A handler that logs with logging.exception() or
traceback.print_exc(), or reads sys.exc_info(), sees it; an exception the
handler raises has it as its __context__, which the "Unhandled error in
exception handler" log then shows as "During handling of the above
exception...". zloopgo's adapter ran the handler with no exception
handled (capi/handle.c, zl_report_callback_exception; the transports'
capi/util.c, zl_call_handling).

Each source of a callback's exception (call_soon with the handle dropped
or kept, call_later, call_at, call_soon_threadsafe, a reader, a socket
transport's data_received, each in and out of debug mode) is observed with
a custom handler and with the default one."""

import asyncio
import io
import logging
import re
import socket
import sys
import traceback

import pytest


class Boom(Exception):
    pass


def _mask(text):
    return re.sub(r"0x[0-9a-f]+", "0x?", text)


def _last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _schedule_call_soon(loop, cb):
    loop.call_soon(cb)  # the handle dropped: zloopgo queues the call alone


def _schedule_call_soon_kept(loop, cb):
    return loop.call_soon(cb)


def _schedule_call_later(loop, cb):
    return loop.call_later(0, cb)


def _schedule_call_at(loop, cb):
    return loop.call_at(loop.time(), cb)


def _schedule_threadsafe(loop, cb):
    return loop.call_soon_threadsafe(cb)


def _schedule_reader(loop, cb):
    a, b = socket.socketpair()
    a.send(b"x")

    def on_readable():
        loop.remove_reader(b)
        a.close()
        b.close()
        cb()

    loop.add_reader(b, on_readable)


SOURCES = {
    "call_soon": _schedule_call_soon,
    "call_soon, handle kept": _schedule_call_soon_kept,
    "call_later": _schedule_call_later,
    "call_at": _schedule_call_at,
    "call_soon_threadsafe": _schedule_threadsafe,
    "add_reader": _schedule_reader,
}


def _raise_from(source, loop):
    """Runs a callback that raises Boom, scheduled by `source`, for a few
    iterations; returns what keeps the handle alive meanwhile."""

    def cb():
        raise Boom("from the callback")

    kept = SOURCES[source](loop, cb)
    for _ in range(3):
        loop.run_until_complete(asyncio.sleep(0))
    return kept


class _DataReceivedRaises(asyncio.Protocol):
    def data_received(self, data):
        raise Boom("from data_received")


def _raise_from_transport(loop):
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    transport, _ = loop.run_until_complete(loop.connect_accepted_socket(_DataReceivedRaises, ours))
    peer.send(b"data")
    for _ in range(5):
        loop.run_until_complete(asyncio.sleep(0.001))
    transport.close()
    peer.close()
    loop.run_until_complete(asyncio.sleep(0))


def _observing_handler(seen):
    logger = logging.getLogger("zloopgo.tests.handler")

    def handler(_loop, context):
        exc = context.get("exception")
        handled = sys.exc_info()[1]
        seen.append(("message", _mask(context["message"].split(" at ")[0])))
        seen.append(("exc_info is the exception", handled is exc and exc is not None))
        if sys.version_info >= (3, 11):
            seen.append(("sys.exception()", sys.exception() is exc))
        log = io.StringIO()
        stream = logging.StreamHandler(log)
        logger.addHandler(stream)
        logger.propagate = False
        try:
            logger.exception("logged")
        finally:
            logger.removeHandler(stream)
        seen.append(("logging.exception", _last_line(log.getvalue())))
        printed = io.StringIO()
        traceback.print_exc(file=printed)
        seen.append(("traceback.print_exc", _last_line(printed.getvalue())))
        try:
            raise KeyError("inside the handler")
        except KeyError as inner:
            seen.append(("__context__", inner.__context__ is exc and exc is not None))

    return handler


def _loop(loop_factory, debug):
    loop = loop_factory()
    loop.set_debug(debug)
    # debug mode's slow-callback warnings are not what is observed
    loop.slow_callback_duration = 100
    return loop


@pytest.mark.parametrize("debug", [False, True], ids=["", "debug"])
@pytest.mark.parametrize("source", [*SOURCES, "data_received"])
def test_a_custom_handler_runs_with_the_exception_handled(loop_factory, source, debug):
    loop = _loop(loop_factory, debug)
    seen = []
    loop.set_exception_handler(_observing_handler(seen))
    try:
        if source == "data_received":
            _raise_from_transport(loop)
        else:
            kept = _raise_from(source, loop)
            del kept
    finally:
        loop.close()
    assert seen[1] == ("exc_info is the exception", True), seen
    assert ("logging.exception", f"{__name__}.Boom: {_what(source)}") in seen, seen
    assert ("traceback.print_exc", f"{__name__}.Boom: {_what(source)}") in seen, seen
    assert ("__context__", True) in seen, seen
    if sys.version_info >= (3, 11):
        assert ("sys.exception()", True) in seen, seen


def _what(source):
    return "from data_received" if source == "data_received" else "from the callback"


def _logged_by_default_handler(loop_factory, source, raising_handler):
    """The asyncio logger's records while a callback raises, with the
    default handler or a custom one that raises: (message's first line,
    the traceback's last line, whether the handler's exception is chained
    to the callback's)."""
    loop = _loop(loop_factory, False)
    if raising_handler:

        def handler(_loop, context):
            raise KeyError("inside the handler")

        loop.set_exception_handler(handler)
    out = io.StringIO()
    stream = logging.StreamHandler(out)
    logger = logging.getLogger("asyncio")
    logger.addHandler(stream)
    try:
        if source == "data_received":
            _raise_from_transport(loop)
        else:
            kept = _raise_from(source, loop)
            del kept
    finally:
        logger.removeHandler(stream)
        loop.close()
    text = out.getvalue()
    first = _mask(text.splitlines()[0].split(" at ")[0]) if text else ""
    return (
        first,
        _last_line(text),
        "During handling of the above exception, another exception occurred" in text,
    )


@pytest.mark.parametrize("raising_handler", [False, True], ids=["default", "handler raises"])
@pytest.mark.parametrize("source", [*SOURCES, "data_received"])
def test_the_logged_report_is_asyncios(source, raising_handler):
    from helpers import FACTORIES

    want = _logged_by_default_handler(FACTORIES["asyncio"], source, raising_handler)
    got = _logged_by_default_handler(FACTORIES["zloopgo"], source, raising_handler)
    assert got == want
    # the check can fail: asyncio chains the handler's exception to the
    # callback's, and logs what it logs
    assert want[2] is raising_handler, want
    assert want[0], want


@pytest.mark.parametrize("source", [s for s in SOURCES if s != "add_reader"])
def test_an_exception_raised_in_c_code_has_a_traceback(loop_factory, source):
    # The callback is a C function that raises before any Python frame
    # runs. asyncio's Handle._run is a Python frame, so the exception
    # still has a traceback and a log of it starts with "Traceback (most
    # recent call last):"; zloopgo's had none (tests/hostile found it).
    loop = _loop(loop_factory, False)
    seen = []

    def handler(_loop, context):
        exc = context["exception"]
        log = io.StringIO()
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=log)
        seen.append((type(exc).__name__, exc.__traceback__ is not None, log.getvalue()))

    loop.set_exception_handler(handler)
    try:
        SOURCES[source](loop, len)  # len() with no argument: TypeError
        for _ in range(3):
            loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    assert [(name, has_tb) for name, has_tb, _ in seen] == [("TypeError", True)]
    assert seen[0][2].startswith("Traceback (most recent call last):"), seen[0][2]


class _UnfillableBuffer(asyncio.BufferedProtocol):
    def get_buffer(self, sizehint):
        return [0]  # recv_into() cannot fill a list

    def buffer_updated(self, nbytes):
        pass


def test_an_exception_a_native_read_raises_has_a_traceback(loop_factory):
    # recv_into() refusing the buffer raises in C on zloopgo's native read;
    # asyncio's passes through _read_ready__get_buffer's frame, so the
    # "Fatal read error" report's exception has a traceback there too.
    loop = _loop(loop_factory, False)
    seen = []
    loop.set_exception_handler(
        lambda _loop, context: seen.append(
            (
                context["message"],
                type(context["exception"]).__name__,
                context["exception"].__traceback__ is not None,
            )
        )
    )
    ours, peer = socket.socketpair()
    try:
        ours.setblocking(False)
        loop.run_until_complete(loop.connect_accepted_socket(_UnfillableBuffer, ours))
        peer.send(b"data")
        for _ in range(5):
            loop.run_until_complete(asyncio.sleep(0.001))
    finally:
        peer.close()
        loop.close()
    assert seen == [("Fatal read error on socket transport", "TypeError", True)]
