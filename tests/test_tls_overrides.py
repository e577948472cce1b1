"""What a program puts in place of a method that TLS's native record path
would otherwise step over runs, as on asyncio (issue 39, row 10).

asyncio's SSLProtocol calls self._sslobj.read(n) and .write(data), and its
own methods (self._do_read(), self._do_write(), self._process_outgoing(),
the _control_* marks, 3.14's and 3.13.15's _is_transport_closing) by name, so a method
set on the instance (tracing, mock.patch.object), on a subclass or on
ssl.SSLObject runs. zloopgo's native path called the _ssl object and its
own steps directly and skipped them. Both loops run the same TLS echo with
the same methods traced; the calls each side sees must be the same."""

import asyncio
import contextlib
import ssl
import sys
from asyncio import sslproto
from unittest import mock

import pytest
from helpers import FACTORIES

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="3.10's SSLProtocol (the old one) has none of these methods"
)

# the methods of asyncio's SSLProtocol that the native path takes itself
PROTOCOL_METHODS = [
    "_do_read",
    "_do_read__copied",
    "_do_write",
    "_process_outgoing",
    "_control_app_writing",
    "_control_ssl_reading",
]
# _SSLProtocolTransport.is_closing() asks it: 3.14, and 3.13's later patch
# releases (3.13.15; not 3.13.0), so asyncio's class tells
if hasattr(sslproto.SSLProtocol, "_is_transport_closing"):
    PROTOCOL_METHODS.append("_is_transport_closing")


def traced(log, side, name, method):
    def call(*args):
        log.append((side, name))
        return method(*args)

    return call


def trace_instance(log, side, proto, where, patches):
    """Each traced method set on the instance, as a program would: by
    assignment on the SSL object, by mock.patch.object on the protocol."""
    if where == "sslobj":
        for name in ("read", "write"):
            setattr(proto._sslobj, name, traced(log, side, name, getattr(proto._sslobj, name)))
    else:
        for name in PROTOCOL_METHODS:
            tracer = traced(log, side, name, getattr(proto, name))
            patches.enter_context(mock.patch.object(proto, name, tracer))


def echo_log(loop_name, tls_contexts, where, rounds=3):
    server_ctx, client_ctx = tls_contexts
    loop = FACTORIES[loop_name]()
    log = []

    async def main():
        served = loop.create_future()

        async def echo(reader, writer):
            served.set_result(writer)
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        server_writer = await served
        await asyncio.sleep(0.01)  # the handshake's last records are read
        with contextlib.ExitStack() as patches:
            if where == "SSLObject class":
                patched = traced(log, "any", "read", ssl.SSLObject.read)
                patches.enter_context(mock.patch.object(ssl.SSLObject, "read", patched))
            else:
                for side, w in (("client", writer), ("server", server_writer)):
                    trace_instance(log, side, w.transport._ssl_protocol, where, patches)
            for i in range(rounds):
                log.append(("round", i))
                writer.write(b"x" * 1024)
                await writer.drain()
                assert await reader.readexactly(1024) == b"x" * 1024
                await asyncio.sleep(0.01)
        log.append(("closing",))
        writer.close()
        await writer.wait_closed()
        server.close()
        await server.wait_closed()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return log


@pytest.mark.parametrize("where", ["sslobj", "protocol", "SSLObject class"])
def test_methods_put_in_place_of_the_native_steps_run(tls_contexts, where):
    want = echo_log("asyncio", tls_contexts, where)
    assert len([c for c in want if c[0] != "round"]) > 3 * 2, want  # the traces saw calls
    assert echo_log("zloopgo", tls_contexts, where) == want
