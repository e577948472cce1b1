"""The receive buffer ("rx") a zloopgo loop keeps (Loop._zl_rx) for the
receives made in Python that asyncio makes with a fresh bytes of the most
they may get (datagram and read pipe transports in Python, sock_recv):
they land here and only what came is copied out. One per loop, since a
loop runs on one thread; it keeps the size of its largest receive. The
adapter's native receives have the loop's C receive buffer
(capi/transport.c, zl_rx_take). Knows nothing of asyncio or of the engine.
"""


def rx_view(loop, size):
    """A memoryview of loop's receive buffer, grown to at least size bytes.
    Release it (`with`) before anything may grow the buffer again."""
    buffer = loop._zl_rx
    if len(buffer) < size:
        buffer = loop._zl_rx = bytearray(size)
    return memoryview(buffer)
