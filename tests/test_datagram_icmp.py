"""The ICMP error a datagram to a port nobody listens on earns, as a
datagram endpoint shows it, on asyncio's loop and on zloopgo (dual-run):
what error_received gets after each send, whether the endpoint stays
open, and whether it still receives (a socket bound on the closed port
then sends a datagram back).

- A connected endpoint: Linux reports ECONNREFUSED on the socket, so
  each send earns one ConnectionRefusedError in error_received (a recv()
  that meets the error, or a send made while it is pending), and reading
  goes on. Windows reports WSAECONNRESET from the next receive
  (SIO_UDP_CONNRESET on, its default), which asyncio's SelectorEventLoop,
  the loop zloopgo's socket transports follow there
  (docs/compatibility.md, "Which asyncio loop zloopgo is on Windows"),
  gives to error_received as ConnectionResetError; never run on a real
  Windows. Under Wine neither loop can show what Windows does, and
  both must show what Wine does: no error at all, and the datagram
  back received. Wine's select() never calls a socket with a pending
  ICMP error readable and its recv() never returns the error
  (scripts/wine/probe_udp_icmp.py), so asyncio's reference never reads
  it; Wine's AFD poll reports it as AFD_POLL_CONNECT_FAIL, recv() then
  answers WSAEWOULDBLOCK, and from then on no poll outstanding on the
  socket completes, only a poll's submission sees a datagram
  (scripts/wine/probe_afd_poll_icmp.py, plain sockets and no loop):
  zloopgo's core/iocp polls such a socket with a timeout since
  (recheckAfter), without which its endpoint never received again
  there. Each round waits QUIET under Wine, as no error comes; sends
  made back to back could race Wine's server for the error and fail
  (ConnectionRefusedError), which rounds a second apart do not.
- An unconnected endpoint (sendto the closed port): Linux reports
  nothing on an unconnected socket, and neither does Wine, whose socket
  is the host's; Windows reports WSAECONNRESET to the selector loop's
  recvfrom() (what it would show is not known here). Runs everywhere;
  on Windows asyncio's ProactorEventLoop is compared too, as it and the
  selector loop agree there.

What ProactorEventLoop does with a connected endpoint differs from both
by design, and is not compared: its recv() completion raises the error
to _loop_reading, which gives it to error_received and starts no other
read, so the datagram back never arrives (under Wine:
ConnectionRefusedError, winerror 1225; on Windows ERROR_PORT_UNREACHABLE,
1234, by CPython's source). It knows nothing of how either loop reads.
"""

import asyncio
import errno
import socket
import sys
import time

import pytest
from helpers import UNDER_WINE

ROUNDS = 3
# How long a round waits for its ICMP error to reach error_received
# (loopback ICMP comes at once, or moments later on a loaded machine;
# Wine's loops take longer), and the end for the datagram back. A round
# where no error is expected waits QUIET: an error later than that still
# shows, out of its place, before connection_lost.
WAIT = 5.0 if sys.platform == "win32" else 2.0
QUIET = 1.0 if sys.platform == "win32" else 0.3


def closed_address():
    """A loopback address nothing listens on (bound, then closed)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    address = s.getsockname()
    s.close()
    return address


class Recorder(asyncio.DatagramProtocol):
    def __init__(self):
        self.seen = []
        self.errors = 0
        self.datagrams = 0

    def error_received(self, exc):
        self.errors += 1
        self.seen.append(("error_received", type(exc).__name__, exc.errno))

    def datagram_received(self, data, addr):
        self.datagrams += 1
        self.seen.append(("datagram_received", data))

    def connection_lost(self, exc):
        self.seen.append(("connection_lost", exc))


async def until(predicate, seconds):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def to_a_closed_port(loop, connected, wait):
    """The observations, in order: each round's send and what arrived by
    its end (an error, or `wait` seconds), is_closing() after them, the
    datagram back, and what the close brings."""
    closed = closed_address()
    if connected:
        transport, proto = await loop.create_datagram_endpoint(Recorder, remote_addr=closed)
    else:
        transport, proto = await loop.create_datagram_endpoint(
            Recorder, local_addr=("127.0.0.1", 0)
        )
    for i in range(ROUNDS):
        before = proto.errors
        proto.seen.append(("sendto", i))
        transport.sendto(b"x%d" % i, None if connected else closed)
        # a round ends at its error, or after `wait` when none comes
        await until(lambda before=before: proto.errors > before, wait)
    proto.seen.append(("is_closing", transport.is_closing()))
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        back.bind(closed)
        back.sendto(b"back", transport.get_extra_info("sockname"))
        await until(lambda: proto.datagrams, WAIT)
    finally:
        back.close()
    transport.close()
    await until(lambda: proto.seen[-1][0] == "connection_lost", WAIT)
    return proto.seen


def expected(connected, error):
    """The observations when each send earns `error` (a (type name, errno)
    pair, or None for no error)."""
    seen = []
    for i in range(ROUNDS):
        seen.append(("sendto", i))
        if error is not None:
            seen.append(("error_received", *error))
    return seen + [
        ("is_closing", False),
        ("datagram_received", b"back"),
        ("connection_lost", None),
    ]


# What the selector loop's receive raises once a datagram earned an ICMP
# error: Linux's ECONNREFUSED; Windows' WSAECONNRESET (CPython maps it to
# errno ECONNRESET).
ICMP_ERROR = (
    ("ConnectionResetError", errno.ECONNRESET)
    if sys.platform == "win32"
    else ("ConnectionRefusedError", errno.ECONNREFUSED)
)


def test_a_connected_endpoint_gets_each_icmp_error_and_reads_on(loop):
    # under Wine no error reaches either loop (the module's docstring)
    error, wait = (None, QUIET) if UNDER_WINE else (ICMP_ERROR, WAIT)
    seen = loop.run_until_complete(to_a_closed_port(loop, True, wait))
    assert seen == expected(True, error)


def test_an_unconnected_endpoint_sending_to_a_closed_port_reads_on(loop):
    seen = loop.run_until_complete(to_a_closed_port(loop, False, QUIET))
    # Linux and Wine report nothing on an unconnected socket; Windows
    # reports WSAECONNRESET to the selector loop's recvfrom()
    error = ICMP_ERROR if sys.platform == "win32" and not UNDER_WINE else None
    assert seen == expected(False, error)


@pytest.mark.skipif(sys.platform != "win32", reason="ProactorEventLoop is Windows'")
def test_the_proactor_agrees_on_an_unconnected_endpoint():
    # ProactorEventLoop's recvfrom() turns ERROR_PORT_UNREACHABLE into an
    # empty read (windows_events.IocpProactor._finish_recvfrom), which
    # delivers nothing: it reads on and reports nothing. Under Wine, where
    # the selector loop and zloopgo report nothing either, the three
    # agree; on Windows the selector loop reports the error (above).
    loop = asyncio.ProactorEventLoop()
    try:
        seen = loop.run_until_complete(to_a_closed_port(loop, False, QUIET))
    finally:
        loop.close()
    assert seen == expected(False, None)
