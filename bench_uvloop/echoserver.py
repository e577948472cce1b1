"""An echo server for uvloop's echo benchmark client (examples/bench/echoclient.py).

Written for zloopgo; it offers the modes and command line of uvloop's
examples/bench/echoserver.py (TCP only, no SSL, no Unix sockets):

    python echoserver.py [--uvloop | --zloopgo | --loop NAME] [--addr HOST:PORT]
        (no mode flag)       loop.sock_accept / sock_recv / sock_sendall
        --streams            asyncio.start_server, reader.read / writer.write
        --proto              loop.create_server with an asyncio.Protocol
        --proto --buffered   loop.create_server with an asyncio.BufferedProtocol

Neither --uvloop nor --zloopgo nor --loop: asyncio's default loop.
``--loop NAME`` serves on any loop the benchmark knows (asyncio, uvloop,
zloopgo, zloop, rloop, rsloop, zuvloop: NAME.new_event_loop()). Every accepted
socket gets TCP_NODELAY (asyncio and uvloop transports set it anyway), so
all loops run with the same socket options.

Proof of work: the server counts connections and the bytes it received and
handed back. On SIGTERM or SIGINT it stops the loop and prints one line
``ECHO-STATS {json}`` to stdout, which the runner compares with the work
the client was asked to do. It also reports the CPU time (user + system,
all threads) the process spent from the moment it serves until it stops:
on a machine with few cores the client is the bottleneck and requests/s
hides how much work the server did, CPU per request does not.
"""

import argparse
import asyncio
import contextlib
import json
import resource
import signal
import socket
import sys

LOOPS = ("asyncio", "uvloop", "zloopgo", "zloop", "rloop", "rsloop", "zuvloop")
READ_SIZE = 1000000  # what uvloop's server asks sock_recv / reader.read for
BUFFER_SIZE = 256 * 1024  # the buffered protocol's receive buffer


class Stats:
    def __init__(self):
        self.connections = 0
        self.bytes_in = 0
        self.bytes_out = 0


STATS = Stats()


def nodelay(sock):
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# ---- default mode: sock_* methods -----------------------------------------


async def serve_sockets(loop, host, port):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(5)
    listener.setblocking(False)
    with listener:
        while True:
            conn, _ = await loop.sock_accept(listener)
            loop.create_task(echo_socket(loop, conn))


async def echo_socket(loop, conn):
    STATS.connections += 1
    nodelay(conn)
    with conn:
        while True:
            data = await loop.sock_recv(conn, READ_SIZE)
            if not data:
                return
            STATS.bytes_in += len(data)
            await loop.sock_sendall(conn, data)
            STATS.bytes_out += len(data)


# ---- --streams -----------------------------------------------------------


async def echo_stream(reader, writer):
    STATS.connections += 1
    nodelay(writer.get_extra_info("socket"))
    while True:
        data = await reader.read(READ_SIZE)
        if not data:
            break
        STATS.bytes_in += len(data)
        writer.write(data)  # no drain(), like uvloop's server: the client waits for each echo
        STATS.bytes_out += len(data)
    writer.close()


# ---- --proto [--buffered] -------------------------------------------------


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        STATS.connections += 1
        nodelay(transport.get_extra_info("socket"))
        self.transport = transport

    def data_received(self, data):
        n = len(data)
        STATS.bytes_in += n
        self.transport.write(data)
        STATS.bytes_out += n

    def connection_lost(self, exc):
        self.transport = None


class BufferedEcho(asyncio.BufferedProtocol):
    def connection_made(self, transport):
        STATS.connections += 1
        nodelay(transport.get_extra_info("socket"))
        self.transport = transport
        self.buffer = bytearray(BUFFER_SIZE)

    def get_buffer(self, sizehint):
        return self.buffer

    def buffer_updated(self, nbytes):
        STATS.bytes_in += nbytes
        # A copy: the transport may keep what it could not send yet, and the
        # next read reuses the buffer.
        self.transport.write(self.buffer[:nbytes])
        STATS.bytes_out += nbytes

    def connection_lost(self, exc):
        self.transport = None


# ---- main ----------------------------------------------------------------


def make_loop(args):
    if args.loop and args.loop != "asyncio":
        import importlib

        return importlib.import_module(args.loop).new_event_loop(), args.loop
    if args.uvloop:
        import uvloop

        return uvloop.new_event_loop(), "uvloop"
    if args.zloopgo:
        import zloopgo

        return zloopgo.new_event_loop(), "zloopgo"
    return asyncio.new_event_loop(), "asyncio"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--uvloop", action="store_true", help="serve on uvloop")
    which.add_argument("--zloopgo", action="store_true", help="serve on zloopgo")
    which.add_argument("--loop", choices=LOOPS, help="serve on this loop")
    parser.add_argument("--streams", action="store_true", help="asyncio streams")
    parser.add_argument("--proto", action="store_true", help="a Protocol and create_server")
    parser.add_argument("--buffered", action="store_true", help="with --proto: BufferedProtocol")
    parser.add_argument("--addr", default="127.0.0.1:25000", help="HOST:PORT to listen on")
    args = parser.parse_args(argv)
    if args.streams and (args.proto or args.buffered):
        parser.error("--streams cannot be combined with --proto or --buffered")
    if args.buffered and not args.proto:
        parser.error("--buffered needs --proto")
    host, sep, port = args.addr.rpartition(":")
    if not sep or not port.isdigit():
        parser.error("--addr must be HOST:PORT")
    args.host, args.port = host, int(port)
    return args


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv=None):
    args = parse_args(argv)
    loop, name = make_loop(args)
    asyncio.set_event_loop(loop)
    loop.set_debug(False)
    if args.streams:
        mode = "streams"
        loop.run_until_complete(asyncio.start_server(echo_stream, args.host, args.port))
    elif args.proto:
        mode = "buffered" if args.buffered else "proto"
        protocol = BufferedEcho if args.buffered else Echo
        loop.run_until_complete(loop.create_server(protocol, args.host, args.port))
    else:
        mode = "sock"
        loop.create_task(serve_sockets(loop, args.host, args.port))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, loop.stop)
    print(f"serving on {args.host}:{args.port}: {name} loop, mode {mode}", flush=True)
    cpu_at_start = cpu_seconds()
    try:
        loop.run_forever()
    finally:
        stats = {
            "loop": name,
            "loop_class": f"{type(loop).__module__}.{type(loop).__qualname__}",
            "mode": mode,
            "connections": STATS.connections,
            "bytes_in": STATS.bytes_in,
            "bytes_out": STATS.bytes_out,
            "cpu_seconds": cpu_seconds() - cpu_at_start,
        }
        print("ECHO-STATS " + json.dumps(stats), flush=True)
    # The loop is left for the process exit to reclaim: closing it would
    # first have to cancel the connection tasks, which is not what is timed.
    return 0


if __name__ == "__main__":
    sys.exit(main())
