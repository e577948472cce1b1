"""The loop's sock_recv, sock_recv_into, sock_sendall and sock_recvfrom:
asyncio's own code (selector_events.BaseSelectorEventLoop), run first
natively where the adapter can take its steps, and with every receive of
a bytes landing in a buffer the loop keeps, copied into a bytes of what
came.

sock_recv, sock_recv_into and sock_sendall ask the adapter first
(capi/sockops.c): for zloopgo.Loop itself, a plain socket.socket and debug
mode off, it takes asyncio's steps without a Python frame and returns what
came, the count received, None (all sent) or the future to await;
NotImplemented sends every other case through asyncio's steps below. The
callbacks those steps hand to the loop and the future (_sock_recv,
_sock_recv_into, _sock_sendall, _sock_read_done, _sock_write_done) are
the adapter's LoopCore methods.

asyncio calls sock.recv(n): `await loop.sock_recv(sock, 1_000_000)` (what
uvloop's echo server asks for) allocates a 1 MB bytes above glibc's mmap
threshold and shrinks it to the few bytes that came, which maps, faults
in and unmaps memory on every call: 16-23 µs and 2 page faults per 1 KiB
received, against 2.2 µs with n = 64 KiB (docs/where-time-goes.md,
"Reads that allocate what they may receive"). Same bytes, the same
exceptions (recv_into and recvfrom_into fail as recv and recvfrom do for
the sizes taken here), the same order.
Only a plain socket.socket (a subclass may override recv) and an int n
from RX_FROM to RX_LIMIT take the receive buffer here; the rest
is asyncio's recv (below glibc's first mmap threshold the allocation is
cheaper than the receive buffer's extra copy and calls). The methods are
asyncio's, line for line, with that receive in place of sock.recv and the
adapter asked first; tests/test_asyncio_internals.py pins the code they
copy. This module knows asyncio's loop; nothing of the engine.
"""

import functools
import socket
from asyncio import base_events, selector_events

from . import _engine
from ._rx import rx_view

# The receives that land in the receive buffer: from glibc's initial mmap
# threshold up to a size the buffer, which keeps the size of its largest
# receive, may keep.
RX_FROM = _engine.SOCK_RX_FROM
RX_LIMIT = _engine.SOCK_RX_LIMIT

_BASE = selector_events.BaseSelectorEventLoop


def _takes_rx(sock, n):
    return type(sock) is socket.socket and type(n) is int and RX_FROM <= n <= RX_LIMIT


def _recv(loop, sock, n):
    """sock.recv(n)."""
    if not _takes_rx(sock, n):
        return sock.recv(n)
    with rx_view(loop, n) as whole, whole[:n] as view:
        return view[: sock.recv_into(view, n)].tobytes()


def _recvfrom(loop, sock, n):
    """sock.recvfrom(n)."""
    if not _takes_rx(sock, n):
        return sock.recvfrom(n)
    with rx_view(loop, n) as whole, whole[:n] as view:
        nbytes, address = sock.recvfrom_into(view, n)
        return view[:nbytes].tobytes(), address


class SockMethods:
    """sock_recv, sock_recv_into, sock_sendall and sock_recvfrom for zloopgo's
    Loop (a base before asyncio's loop classes)."""

    __slots__ = ()

    async def sock_recv(self, sock, n):
        """Receive data from the socket.

        The return value is a bytes object representing the data received.
        The maximum amount of data to be received at once is specified by
        nbytes.
        """
        got = self._zl_sock_recv(sock, n)  # asyncio's steps below, natively
        if got is not NotImplemented:
            return got if type(got) is bytes else await got
        base_events._check_ssl_socket(sock)
        if self._debug and sock.gettimeout() != 0:
            raise ValueError("the socket must be non-blocking")
        try:
            return _recv(self, sock, n)
        except (BlockingIOError, InterruptedError):
            pass
        fut = self.create_future()
        fd = sock.fileno()
        self._ensure_fd_no_transport(fd)
        handle = self._add_reader(fd, self._sock_recv, fut, sock, n)
        fut.add_done_callback(functools.partial(self._sock_read_done, fd, handle=handle))
        return await fut

    async def sock_recv_into(self, sock, buf):
        """Receive data from the socket.

        The received data is written into *buf* (a writable buffer).
        The return value is the number of bytes written.
        """
        got = self._zl_sock_recv_into(sock, buf)  # asyncio's steps below, natively
        if got is not NotImplemented:
            return got if type(got) is int else await got
        base_events._check_ssl_socket(sock)
        if self._debug and sock.gettimeout() != 0:
            raise ValueError("the socket must be non-blocking")
        try:
            return sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            pass
        fut = self.create_future()
        fd = sock.fileno()
        self._ensure_fd_no_transport(fd)
        handle = self._add_reader(fd, self._sock_recv_into, fut, sock, buf)
        fut.add_done_callback(functools.partial(self._sock_read_done, fd, handle=handle))
        return await fut

    async def sock_sendall(self, sock, data):
        """Send data to the socket.

        The socket must be connected to a remote socket.  This method
        continues to send data from data until either all data has been
        sent or an error occurs.  None is returned on success.  On error,
        an exception is raised, and there is no way to determine how much
        data, if any, was successfully processed by the receiving end of
        the connection.
        """
        rest = self._zl_sock_sendall(sock, data)  # asyncio's steps below, natively
        if rest is None:
            return
        if rest is not NotImplemented:
            return await rest
        base_events._check_ssl_socket(sock)
        if self._debug and sock.gettimeout() != 0:
            raise ValueError("the socket must be non-blocking")
        try:
            n = sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0

        if n == len(data):
            # all data sent
            return

        fut = self.create_future()
        fd = sock.fileno()
        self._ensure_fd_no_transport(fd)
        # use a trick with a list in closure to store a mutable state
        handle = self._add_writer(fd, self._sock_sendall, fut, sock, memoryview(data), [n])
        fut.add_done_callback(functools.partial(self._sock_write_done, fd, handle=handle))
        return await fut

    if hasattr(_BASE, "sock_recvfrom"):  # 3.11+

        async def sock_recvfrom(self, sock, bufsize):
            """Receive a datagram from a datagram socket.

            The return value is a tuple of (bytes, address) representing the
            datagram received and the address it came from.
            The maximum amount of data to be received at once is specified by
            nbytes.
            """
            base_events._check_ssl_socket(sock)
            if self._debug and sock.gettimeout() != 0:
                raise ValueError("the socket must be non-blocking")
            try:
                return _recvfrom(self, sock, bufsize)
            except (BlockingIOError, InterruptedError):
                pass
            fut = self.create_future()
            fd = sock.fileno()
            self._ensure_fd_no_transport(fd)
            handle = self._add_reader(fd, self._sock_recvfrom, fut, sock, bufsize)
            fut.add_done_callback(functools.partial(self._sock_read_done, fd, handle=handle))
            return await fut

        def _sock_recvfrom(self, fut, sock, bufsize):
            # _sock_recvfrom() can add itself as an I/O callback if the operation
            # can't be done immediately. Don't use it directly, call
            # sock_recvfrom().
            if fut.done():
                return
            try:
                result = _recvfrom(self, sock, bufsize)
            except (BlockingIOError, InterruptedError):
                return  # try again next time
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:  # noqa: BLE001 - as asyncio's
                fut.set_exception(exc)
            else:
                fut.set_result(result)
