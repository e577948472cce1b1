"""zloopgo's read pipe transport (connect_read_pipe, and a subprocess's
stdout and stderr): asyncio's own unix_events._UnixReadPipeTransport, whose
_read_ready reads into a receive buffer the loop keeps and copies what came
into a bytes of its exact size.

asyncio calls os.read(fd, max_size). With the default max_size of 256 KiB
each read allocates 256 KiB and shrinks it to what came (a pipe holds
64 KiB), so glibc keeps growing and trimming the top of its heap and every
read faults fresh pages in: 73,762 minor faults for 256 MiB from a child,
18 a read, and none this way, and the parent's CPU time for them falls to
a third or less (docs/where-time-goes.md, "Reads that allocate what
they may receive"). Same bytes, the same max_size, the same exceptions
and log line, the same protocol calls in the same order; a max_size that
is not a positive int, or above RX_LIMIT, takes asyncio's own
method. The write side is asyncio's:
its os.write allocates nothing. This module knows asyncio's pipe
transport; nothing of the engine.
"""

import os
from asyncio import unix_events
from asyncio.log import logger

from ._rx import rx_view

# The largest read that lands in the loop's receive buffer (which keeps
# the size of its largest read): a larger max_size is asyncio's own read.
RX_LIMIT = 1 << 24


class ReadPipeTransport(unix_events._UnixReadPipeTransport):
    """asyncio.ReadTransport over a pipe, a socket or a character device."""

    def _read_ready(self):
        size = self.max_size
        if type(size) is not int or not 0 < size <= RX_LIMIT:
            return unix_events._UnixReadPipeTransport._read_ready(self)
        # from here on, asyncio's _read_ready with os.read's bytes made here
        try:
            with rx_view(self._loop, size) as whole, whole[:size] as view:
                nbytes = os.readv(self._fileno, (view,))
                data = view[:nbytes].tobytes()
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._fatal_error(exc, "Fatal read error on pipe transport")
        else:
            if data:
                self._protocol.data_received(data)
            else:
                if self._loop.get_debug():
                    logger.info("%r was closed by peer", self)
                self._closing = True
                self._loop._remove_reader(self._fileno)
                self._loop.call_soon(self._protocol.eof_received)
                self._loop.call_soon(self._call_connection_lost, None)
