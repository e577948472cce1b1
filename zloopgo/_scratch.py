"""The receive buffer a zloopgo loop keeps (Loop._zl_read_scratch) for the
receives that asyncio makes with a fresh bytes of the most they may get
(datagram and read pipe transports in Python, sock_recv): they land here
and only what came is copied out. One per loop, since a loop runs on one
thread; it keeps the size of its largest receive. Knows nothing of asyncio
or of the engine.
"""


def scratch_view(loop, size):
    """A memoryview of loop's scratch buffer, grown to at least size bytes.
    Release it (`with`) before anything may grow the buffer again."""
    scratch = loop._zl_read_scratch
    if len(scratch) < size:
        scratch = loop._zl_read_scratch = bytearray(size)
    return memoryview(scratch)
