"""zloopgo's TLS connection: asyncio.sslproto's SSLProtocol, which stays the
state machine (handshake, shutdown, timeouts, errors, every message), with
the methods that run for every record once the connection is up native
(capi/tls.c), and the _SSLProtocolTransport the application writes to
with write and is_closing native.

On Pythons whose sslproto the native methods were checked against (3.11 to
3.15; tests/test_asyncio_internals.py pins their source) `protocol_class`
is zloopgo's subclass, and `start_tls` is asyncio's BaseEventLoop.start_tls
making it; elsewhere both are asyncio's own. This module knows sslproto's
classes and asyncio's start_tls; of the loop only what start_tls uses.
"""

import sys
from asyncio import base_events, sslproto

from . import _engine

try:
    import ssl
except ImportError:  # a Python built without it: asyncio's refusals stand
    ssl = None

NATIVE_TLS = ssl is not None and (3, 11) <= sys.version_info[:2] <= (3, 15)
# 3.14 made _SSLProtocolTransport.is_closing() ask the socket transport too,
# and so did a 3.13 patch release (3.13.15; not 3.13.0): asyncio's class tells
_IS_CLOSING_ASKS_TRANSPORT = hasattr(sslproto.SSLProtocol, "_is_transport_closing")
# 3.14 and 3.13's later patch releases (gh-142352; 3.13.15, not 3.13.0):
# start_tls on the server side hands what a
# StreamReaderProtocol's reader already holds to the SSL protocol
_START_TLS_MOVES_BUFFER = (
    "StreamReaderProtocol" in base_events.BaseEventLoop.start_tls.__code__.co_names
)


class _SSLProtocolTransport(_engine.TLSTransportFastPaths, sslproto._SSLProtocolTransport):
    """The transport a TLS connection's application holds: asyncio's."""

    # what the native write and is_closing read, in slots whose offsets the
    # adapter records: reading one is then a load
    __slots__ = ("_closed", "_ssl_protocol")


class SSLProtocol(_engine.TLSFastPaths, sslproto.SSLProtocol):
    """asyncio's SSLProtocol, its per-record methods native."""

    # The attributes the native methods read for every record, in slots
    # whose offsets the adapter records (asyncio's __init__ sets each).
    __slots__ = (
        "_app_protocol",
        "_app_protocol_is_buffer",
        "_app_reading_paused",
        "_app_writing_paused",
        "_incoming",
        "_incoming_high_water",
        "_incoming_low_water",
        "_outgoing",
        "_outgoing_high_water",
        "_outgoing_low_water",
        "_ssl_buffer",
        "_ssl_buffer_view",
        "_ssl_reading_paused",
        "_ssl_writing_paused",
        "_sslobj",
        "_state",
        "_transport",
        "_write_backlog",
        "_write_buffer_size",
        # set (by the native setattr) once a method the native steps stand
        # for is set on the instance: they then look it up each time
        "_zl_replaced",
    )

    def _get_app_transport(self):
        # asyncio's, making zloopgo's _SSLProtocolTransport
        if self._app_transport is None:
            if self._app_transport_created:
                raise RuntimeError("Creating _SSLProtocolTransport twice")
            self._app_transport = _SSLProtocolTransport(self._loop, self)
            self._app_transport_created = True
        return self._app_transport


async def start_tls(
    self,
    transport,
    protocol,
    sslcontext,
    *,
    server_side=False,
    server_hostname=None,
    ssl_handshake_timeout=None,
    ssl_shutdown_timeout=None,
):
    # asyncio's BaseEventLoop.start_tls (3.11 to 3.15), making zloopgo's
    # SSLProtocol; self is the loop
    if not isinstance(sslcontext, ssl.SSLContext):
        raise TypeError(
            f"sslcontext is expected to be an instance of ssl.SSLContext, got {sslcontext!r}"
        )

    if not getattr(transport, "_start_tls_compatible", False):
        raise TypeError(f"transport {transport!r} is not supported by start_tls()")

    waiter = self.create_future()
    ssl_protocol = SSLProtocol(
        self,
        protocol,
        sslcontext,
        waiter,
        server_side,
        server_hostname,
        ssl_handshake_timeout=ssl_handshake_timeout,
        ssl_shutdown_timeout=ssl_shutdown_timeout,
        call_connection_made=False,
    )

    # Pause early so that "ssl_protocol.data_received()" doesn't
    # have a chance to get called before "ssl_protocol.connection_made()".
    transport.pause_reading()

    if server_side and _START_TLS_MOVES_BUFFER:
        from asyncio.streams import StreamReaderProtocol

        if isinstance(protocol, StreamReaderProtocol):
            stream_reader = getattr(protocol, "_stream_reader", None)
            if stream_reader is not None:
                buffer = stream_reader._buffer
                if buffer:
                    ssl_protocol._incoming.write(buffer)
                    buffer.clear()

    transport.set_protocol(ssl_protocol)
    conmade_cb = self.call_soon(ssl_protocol.connection_made, transport)
    resume_cb = self.call_soon(transport.resume_reading)

    try:
        await waiter
    except BaseException:
        transport.close()
        conmade_cb.cancel()
        resume_cb.cancel()
        waiter = None
        raise

    return ssl_protocol._app_transport


start_tls.__doc__ = base_events.BaseEventLoop.start_tls.__doc__


if NATIVE_TLS:
    _engine.set_tls(
        sslproto.SSLProtocol,
        sslproto.SSLProtocolState,
        sslproto.SSLAgainErrors,
        ssl.SSLObject,
        _IS_CLOSING_ASKS_TRANSPORT,
        SSLProtocol,
        _SSLProtocolTransport,
    )
    # as SocketTransport's (_transports.py): the native methods as the
    # classes' own descriptors
    _engine.own_methods(SSLProtocol)
    _engine.own_methods(_SSLProtocolTransport)
    protocol_class = SSLProtocol
else:
    protocol_class = sslproto.SSLProtocol
