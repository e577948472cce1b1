"""zloopgo's socket transport: asyncio's own selector socket transport
whose per-packet methods (_read_ready, _read_ready__data_received,
_read_ready__get_buffer, write, is_closing) are native (capi/transport.c),
and whose writes made by one callback leave together when it returns.

Everything the native methods hand back — what a send did not take, a
write after the connection was lost — is finished here exactly as this
Python version's asyncio finishes it. This module knows asyncio's
transport internals; it knows nothing of the engine.
"""

import sys
from asyncio import selector_events, streams

from . import _engine

# asyncio 3.12 turned the write buffer from a bytearray into a deque of chunks.
_BUFFER_IS_DEQUE = sys.version_info >= (3, 12)


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
        "_high_water",
        "_protocol",
        "_read_ready_cb",
        "_sock_fd",
        "_zl_large_reads",
        "_zl_pending",
    )

    def __init__(self, *args, **kwargs):
        # Writes made by the running callback wait here, as bytes, until it
        # returns (capi/transport.c, "writes held within one callback").
        self._zl_pending = None
        # The last read filled at least 64 KiB: read the next one straight
        # into its final bytes object (capi/transport.c, LARGE_READ).
        self._zl_large_reads = False
        super().__init__(*args, **kwargs)

    def _zl_buffer_rest(self, chunks, sent):
        # What a send left, buffered as this Python version's asyncio
        # buffers the rest of a partial send: `sent` bytes of the first
        # chunk went (a view of the rest is kept, not a copy: a 3.11
        # bytearray buffer copies it once in extend(), a 3.12+ deque keeps
        # it as asyncio does); -1 means nothing was tried because the
        # buffer was not empty, so the writer is already registered.
        if sent > 0:
            chunks[0] = memoryview(chunks[0])[sent:]
        if sent >= 0:
            self._loop._add_writer(self._sock_fd, self._write_ready)
        for chunk in chunks:
            if _BUFFER_IS_DEQUE:
                self._buffer.append(chunk)
            else:
                self._buffer.extend(chunk)
        self._maybe_pause_protocol()

    # Everything that must find the held writes sent first.

    def get_write_buffer_size(self):
        # What the kernel has not taken: asyncio's answer once every
        # write made so far has been offered to it.
        self._zl_flush()
        return super().get_write_buffer_size()

    def write_eof(self):
        self._zl_flush()
        super().write_eof()

    def writelines(self, list_of_data):
        self._zl_flush()
        super().writelines(list_of_data)

    def close(self):
        self._zl_flush()
        super().close()

    def abort(self):
        self._zl_flush()
        super().abort()

    def _make_empty_waiter(self):
        self._zl_flush()
        return super()._make_empty_waiter()

    def _force_close(self, exc):
        self._zl_pending = None  # the connection is gone: nothing to send to
        super()._force_close(exc)

    def _zl_write_python(self, data):
        # asyncio's own write, for what the native one hands over: writes to
        # a lost connection (counted, logged past a threshold) and data that
        # is not one contiguous buffer.
        self._zl_flush()
        selector_events._SelectorSocketTransport.write(self, data)


_engine.set_transport_layout(SocketTransport)

# Bytes read for an asyncio stream go straight into its StreamReader
# (capi/streamfeed.c), which does what StreamReaderProtocol.data_received
# and StreamReader.feed_data do on the versions whose code it was checked
# against (3.10 to 3.15: tests/test_asyncio_internals.py pins their source);
# elsewhere those methods run as they are.
STREAM_FAST_PATH = (3, 10) <= sys.version_info[:2] <= (3, 15)
if STREAM_FAST_PATH:
    _engine.set_streams(streams.StreamReaderProtocol, streams.StreamReader, sys.flags.optimize == 0)
