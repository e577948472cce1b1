"""zloopgo's TLS connection: asyncio.sslproto's SSLProtocol, which stays the
state machine (handshake, shutdown, timeouts, errors, every message), with
the methods that run for every record once the connection is up native
(capi/tls.c), and the _SSLProtocolTransport the application writes to
with write and is_closing native.

On Pythons whose sslproto the native methods were checked against (3.11 to
3.15; tests/test_asyncio_internals.py pins their source) `protocol_class`
is zloopgo's subclass; elsewhere it is asyncio's own SSLProtocol. This
module knows sslproto's classes; nothing of the loop or the engine.
"""

import ssl
import sys
from asyncio import sslproto

from . import _engine

NATIVE_TLS = (3, 11) <= sys.version_info[:2] <= (3, 15)
# 3.14 made _SSLProtocolTransport.is_closing() ask the socket transport too
_IS_CLOSING_ASKS_TRANSPORT = hasattr(sslproto.SSLProtocol, "_is_transport_closing")


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
    )

    def _get_app_transport(self):
        # asyncio's, making zloopgo's _SSLProtocolTransport
        if self._app_transport is None:
            if self._app_transport_created:
                raise RuntimeError("Creating _SSLProtocolTransport twice")
            self._app_transport = _SSLProtocolTransport(self._loop, self)
            self._app_transport_created = True
        return self._app_transport


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
    protocol_class = SSLProtocol
else:
    protocol_class = sslproto.SSLProtocol
