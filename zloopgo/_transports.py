"""zloopgo's socket transport: asyncio's own selector socket transport
whose per-packet methods (_read_ready, _read_ready__data_received,
_read_ready__get_buffer, write, writelines where asyncio's sends with
sendmsg, is_closing) are native (capi/transport.c).

Everything the native methods hand back — what a send did not take, a
write after the connection was lost — is finished here exactly as this
Python version's asyncio finishes it. This module knows asyncio's
transport internals; it knows nothing of the engine.
"""

import socket
import sys
from asyncio import selector_events, streams

from . import _engine

# asyncio 3.12 turned the write buffer from a bytearray into a deque of chunks.
_BUFFER_IS_DEQUE = sys.version_info >= (3, 12)
# asyncio 3.15 counts the buffered bytes in _buffer_size (get_write_buffer_size
# returns it) and registers the writer through the transport, in its context.
_COUNTS_BUFFER = (
    "_buffer_size"
    in selector_events._SelectorSocketTransport.get_write_buffer_size.__code__.co_names
)


# asyncio's writelines buffers every chunk and sends them with one sendmsg
# (its _write_sendmsg) from 3.12 where sendmsg exists; 3.10 and 3.11 join
# them and write, and without sendmsg (Windows) it sends the buffer's first
# chunk. The native writelines (capi/transport.c) serves only the former.
_WRITELINES_GATHERS = getattr(selector_events, "_HAS_SENDMSG", False) and "writelines" in vars(
    selector_events._SelectorSocketTransport
)
# writelines asks _maybe_pause_protocol once it has registered the writer from
# 3.14, and in 3.13's later patch releases (3.13.15; not 3.13.0): its code tells
_WRITELINES_PAUSES = (
    _WRITELINES_GATHERS
    and "_maybe_pause_protocol"
    in selector_events._SelectorSocketTransport.writelines.__code__.co_names
)
_FATAL_WRITE = "Fatal write error on socket transport"  # asyncio's words

# TransportState.kind: zloopgo.stats()["transports"]'s "tcp", "unix", "other"
_KINDS = {socket.AF_INET: 0, socket.AF_INET6: 0, getattr(socket, "AF_UNIX", -1): 1}
_KIND_OTHER = 2


class SocketTransport(_engine.StreamFastPaths, selector_events._SelectorSocketTransport):
    """A TCP or Unix stream transport, asyncio.Transport's whole surface."""

    # The attributes the native methods read on every packet live in slots,
    # whose offsets the adapter records: reading one is then a load.
    __slots__ = (
        "_buffer",
        "_closing",
        "_conn_lost",
        "_empty_waiter",
        "_eof",
        "_protocol",
        "_read_ready_cb",
        "_sock",
        "_sock_fd",
        "_zl_state",
    )

    def __init__(self, *args, **kwargs):
        # asyncio's class attribute _sock = None, which __del__ reads if
        # __init__ failed before setting it, is shadowed by the slot
        self._sock = None
        # What the native methods keep per transport: the size of the last
        # read, the counters its reads and writes add to.
        self._zl_state = _engine.TransportState()
        super().__init__(*args, **kwargs)
        # which of zloopgo.stats()'s per-kind counters its reads and writes add to
        self._zl_state.kind = _KINDS.get(self._sock.family, _KIND_OTHER)

    def _zl_buffer_rest(self, data, sent):
        # What a send left, buffered as this Python version's asyncio
        # buffers the rest of a partial send: `sent` bytes of data went (a
        # view of the rest is kept, not a copy: a 3.11 bytearray buffer
        # copies it once in extend(), a 3.12+ deque keeps it as asyncio
        # does); -1 means nothing was tried because the buffer was not
        # empty, so the writer is already registered.
        if sent > 0:
            data = memoryview(data)[sent:]
        if sent >= 0:
            if _COUNTS_BUFFER:
                self._add_writer(self._sock_fd, self._write_ready)
            else:
                self._loop._add_writer(self._sock_fd, self._write_ready)
        if _BUFFER_IS_DEQUE:
            self._buffer.append(data)
        else:
            self._buffer.extend(data)
        if _COUNTS_BUFFER:
            self._buffer_size += len(data)
        self._maybe_pause_protocol()

    def _zl_write_python(self, data):
        # asyncio's own write, for what the native one hands over: writes to
        # a lost connection (counted, logged past a threshold) and data that
        # is not one contiguous buffer.
        selector_events._SelectorSocketTransport.write(self, data)

    if _WRITELINES_GATHERS and hasattr(_engine.StreamFastPaths, "writelines"):

        def _zl_writelines_python(self, list_of_data):
            # asyncio's own writelines, for what the native one hands over:
            # anything buffered or lost, a closing transport, a paused
            # protocol, chunks that are not non-empty bytes or bytearray.
            selector_events._SelectorSocketTransport.writelines(self, list_of_data)

        def _zl_writelines_rest(self, list_of_data, sent):
            # asyncio's writelines once its sendmsg took `sent` bytes (-1: it
            # would have blocked): every chunk buffered as a memoryview, what
            # went dropped and the protocol asked to resume (its
            # _write_sendmsg), then the writer registered for the rest.
            for data in list_of_data:
                self._buffer.append(memoryview(data))
                if _COUNTS_BUFFER:
                    self._buffer_size += len(data)
            if sent >= 0:
                self._adjust_leftover_buffer(sent)
                self._maybe_resume_protocol()
            if self._buffer:
                if _COUNTS_BUFFER:
                    self._add_writer(self._sock_fd, self._write_ready)
                else:
                    self._loop._add_writer(self._sock_fd, self._write_ready)
                if _WRITELINES_PAUSES:
                    self._maybe_pause_protocol()

        def _zl_writelines_failed(self, exc, list_of_data):
            # asyncio's writelines when its sendmsg raised exc (being handled
            # while this runs): the writer removed, the chunks dropped from
            # the buffer they were put in, the error fatal.
            self._loop._remove_writer(self._sock_fd)
            self._fatal_error(exc, _FATAL_WRITE)

    else:
        # asyncio's own, where it does not send with sendmsg
        writelines = selector_events._SelectorSocketTransport.writelines

    # asyncio's own read, for a max_size the native one does not take (not
    # an int from 1 up: recv's own results and errors, asyncio's messages)
    _zl_read_python = selector_events._SelectorSocketTransport._read_ready__data_received


_engine.set_transport_layout(SocketTransport)
# write, writelines and is_closing as SocketTransport's own descriptors: asyncio's and
# the program's calls of them get the interpreter's specialized call
_engine.own_methods(SocketTransport)

# Bytes read for an asyncio stream go straight into its StreamReader
# (capi/streamfeed.c), which does what StreamReaderProtocol.data_received
# and StreamReader.feed_data do on the versions whose code it was checked
# against (3.10 to 3.15: tests/test_asyncio_internals.py pins their source);
# elsewhere those methods run as they are.
STREAM_FAST_PATH = (3, 10) <= sys.version_info[:2] <= (3, 15)
if STREAM_FAST_PATH:
    _engine.set_streams(streams.StreamReaderProtocol, streams.StreamReader, sys.flags.optimize == 0)
