"""A probe, not a test: what each event loop's datagram endpoint shows of
the ICMP error a datagram to a closed port earns, connected and not.

    python scripts/wine/probe_udp_icmp_loops.py [LOOP...]

LOOP is selector, proactor (Windows only) or zloopgo; all of them by
default. For each loop and each kind of endpoint (connected to the
closed port; unconnected, sending to it with sendto), three rounds of
(send, then up to a second for error_received), then a socket bound on
the closed port sends a datagram back: printed are what
error_received got each round (the exception's type, errno and
winerror, or "-"), whether the endpoint was closing, and whether the
datagram back arrived (an endpoint that stopped reading never gets it).

What CPython's Windows loops do, read in their source (3.14): the
SelectorEventLoop's recv()/recvfrom() raise the error (Windows:
WSAECONNRESET, with SIO_UDP_CONNRESET on, its default) and
error_received gets it, reading goes on; the ProactorEventLoop's
recvfrom() (unconnected) turns ERROR_PORT_UNREACHABLE into an empty
read, which delivers nothing, and its recv() (connected) raises it to
_loop_reading, which gives it to error_received and starts no other
read. Linux reports the error on a connected socket alone. Under Wine
the host's Linux socket decides (scripts/wine/probe_udp_icmp.py): this
probe shows what each loop makes of it. It knows nothing of the tests.

Under Wine 8 (2026-12-07, Windows CPython 3.14.6, the cp314 wheel):
unconnected, no loop reports anything and each receives the datagram
back. Connected: the selector loop reports nothing and receives it;
the proactor reports ConnectionRefusedError (winerror 1225) from its
first read and stops reading, the datagram back never comes; zloopgo
reports nothing from its read (WSAEWOULDBLOCK after an AFD poll's
CONNECT_FAIL: scripts/wine/probe_afd_poll_icmp.py) and its endpoint
never receives again. Either loop may also report ConnectionRefusedError
(10061) from a send that races Wine's server for the error. On Linux
both loops report ConnectionRefusedError after every send and read on.
"""

import asyncio
import socket
import sys
import time

ROUNDS = 3
WAIT = 1.0


def closed_address():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    address = s.getsockname()
    s.close()
    return address


class Recorder(asyncio.DatagramProtocol):
    def __init__(self):
        self.errors = []
        self.datagrams = []
        self.lost = []

    def error_received(self, exc):
        self.errors.append(f"{type(exc).__name__}({exc.errno},{getattr(exc, 'winerror', None)})")

    def datagram_received(self, data, addr):
        self.datagrams.append(data)

    def connection_lost(self, exc):
        self.lost.append(exc)


async def until(predicate, seconds):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def endpoint(loop, connected):
    closed = closed_address()
    if connected:
        transport, proto = await loop.create_datagram_endpoint(Recorder, remote_addr=closed)
    else:
        transport, proto = await loop.create_datagram_endpoint(
            Recorder, local_addr=("127.0.0.1", 0)
        )
    rounds = []
    for i in range(ROUNDS):
        before = len(proto.errors)
        try:
            transport.sendto(b"x%d" % i, None if connected else closed)
        except OSError as exc:
            rounds.append(f"sendto raised {type(exc).__name__}")
            continue
        await until(lambda before=before: len(proto.errors) > before, WAIT)
        rounds.append(",".join(proto.errors[before:]) or "-")
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    back.bind(closed)
    back.sendto(b"back", transport.get_extra_info("sockname"))
    await until(lambda: proto.datagrams, WAIT)
    closing = transport.is_closing()
    back.close()
    transport.close()
    await asyncio.sleep(0.05)
    kind = "connected" if connected else "unconnected"
    return (
        f"  {kind}: errors {' | '.join(rounds)}; closing {closing}; "
        f"datagram back {'arrived' if proto.datagrams else 'never came'}; "
        f"connection_lost {proto.lost}"
    )


def make(name):
    if name == "selector":
        return asyncio.SelectorEventLoop()
    if name == "proactor":
        return asyncio.ProactorEventLoop()
    import zloopgo

    return zloopgo.new_event_loop()


def main(names):
    for name in names:
        loop = make(name)
        try:
            lines = [loop.run_until_complete(endpoint(loop, c)) for c in (True, False)]
        finally:
            loop.close()
        print(f"{name} ({sys.platform}):")
        print("\n".join(lines))


if __name__ == "__main__":
    default = ["selector", "zloopgo"] + (["proactor"] if sys.platform == "win32" else [])
    main(sys.argv[1:] or default)
