"""zloopgo's datagram transport: asyncio's own selector datagram transport
whose per-datagram methods, _read_ready and sendto, are native for IPv4
and IPv6 sockets (capi/datagram.c); the native methods hand every case
they do not take to the Python methods named here.

asyncio calls `sock.recvfrom(max_size)`: with the default max_size of
256 KiB every datagram allocates a 256 KiB bytes object above glibc's
mmap threshold and shrinks it to the datagram's size, so each receive
maps, faults in and unmaps fresh pages (perf: most of a UDP echo's time).
Here, natively or in _zl_read_ready_python, the datagram lands in a
receive buffer the loop keeps and is copied into a bytes of its exact
size: the same bytes, the same truncation at max_size, the same
exceptions, the same protocol calls in the same order. This module knows
asyncio's transport internals; nothing of the engine.
"""

import socket
from asyncio import selector_events

from . import _engine
from ._rx import rx_view

_NATIVE_FAMILIES = (socket.AF_INET, socket.AF_INET6)


class DatagramTransport(_engine.DatagramFastPaths, selector_events._SelectorDatagramTransport):
    """A UDP or Unix datagram transport, asyncio.DatagramTransport's whole
    surface."""

    # The attributes the native methods read for every datagram live in
    # slots, whose offsets the adapter records: reading one is then a load.
    # (_extra is already one: asyncio's BaseTransport declares it.)
    __slots__ = (
        "_address",
        "_buffer",
        "_conn_lost",
        "_loop",
        "_protocol",
        "_sock",
        "_sock_fd",
        "_zl_dgram",
    )

    def __init__(self, loop, sock, *args, **kwargs):
        # asyncio's class attribute _sock = None, which __del__ reads if
        # __init__ failed before setting it, is shadowed by the slot
        self._sock = None
        # what the native methods keep: the last sender's address (IPv4 and
        # IPv6 only; other families take the Python methods)
        self._zl_dgram = _engine.DatagramState() if sock.family in _NATIVE_FAMILIES else None
        super().__init__(loop, sock, *args, **kwargs)

    # asyncio's own sendto, for what the native one does not take
    _zl_sendto_python = selector_events._SelectorDatagramTransport.sendto

    def _zl_read_ready_python(self):
        if self._conn_lost:
            return
        if type(self._sock) is not socket.socket:
            # gone (the transport closed itself) or of a class of its own:
            # asyncio's recvfrom fails or runs as it does
            return selector_events._SelectorDatagramTransport._read_ready(self)
        size = self.max_size
        if type(size) is not int or size <= 0:
            # recvfrom_into reads 0 as "the whole buffer" and words its
            # errors differently: asyncio's own path for unusual sizes.
            return selector_events._SelectorDatagramTransport._read_ready(self)
        try:
            with rx_view(self._loop, size) as view:
                nbytes, addr = self._sock.recvfrom_into(view, size)
                data = view[:nbytes].tobytes()
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._protocol.error_received(exc)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - as asyncio: a fatal error
            self._fatal_error(exc, "Fatal read error on datagram transport")
        else:
            self._protocol.datagram_received(data, addr)


_engine.set_datagram_layout(DatagramTransport)
_engine.own_methods(DatagramTransport)  # as SocketTransport's (_transports.py)
