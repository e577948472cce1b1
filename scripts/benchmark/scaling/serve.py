"""One server of the scaling part: one event loop, on the calling thread,
serving one app on a listening socket of its own bound with SO_REUSEPORT
to a port it shares with the arrangement's other servers, until a stop
pipe becomes readable. Runs the same way in a subinterpreter and in a
process's thread, so it imports only the standard library and h11 (which
loads in subinterpreters; httptools does not).

Apps:
- echo: an asyncio.Protocol writing back every chunk it receives;
- http: HTTP/1.1 keep-alive on an asyncio.Protocol with h11, answering
  every GET with TechEmpower's JSON message.

It prints `SCALING-READY i` once listening and, after the stop,
`SCALING-STATS {json}` (what it counted: connections, bytes in and out,
requests answered), the proof of work the runner checks. It knows nothing
of interpreters, processes or of how it is measured.
"""

import asyncio
import contextlib
import importlib
import json
import os
import select
import socket

JSON_BODY = b'{"message":"Hello, World!"}'
STOP_POLL_S = 0.05  # how often the stop pipe is looked at: 20 wake-ups/s


def new_loop(name):
    if name == "asyncio":
        return asyncio.new_event_loop()
    return importlib.import_module(name).new_event_loop()


def listening_socket(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


class Stats:
    def __init__(self):
        self.connections = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.requests = 0


def _nodelay(transport):
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def echo_protocol(stats):
    class Echo(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            stats.connections += 1
            _nodelay(transport)

        def data_received(self, data):
            stats.bytes_in += len(data)
            stats.bytes_out += len(data)
            self.transport.write(data)

    return Echo


def http_protocol(stats):
    import h11

    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(JSON_BODY))),
        ("Server", "zl-scaling"),
    ]

    class Http(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            self.conn = h11.Connection(h11.SERVER)
            stats.connections += 1
            _nodelay(transport)

        def data_received(self, data):
            stats.bytes_in += len(data)
            conn = self.conn
            conn.receive_data(data)
            try:
                self._answer(conn)
            except h11.ProtocolError:
                self.transport.close()

        def eof_received(self):
            self.conn.receive_data(b"")
            return False

        def _answer(self, conn):
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return
                if isinstance(event, h11.ConnectionClosed):
                    self.transport.close()
                    return
                if isinstance(event, h11.EndOfMessage):
                    out = conn.send(h11.Response(status_code=200, headers=headers))
                    out += conn.send(h11.Data(data=JSON_BODY))
                    out += conn.send(h11.EndOfMessage())
                    self.transport.write(out)
                    stats.bytes_out += len(out)
                    stats.requests += 1
                    conn.start_next_cycle()

    return Http


APPS = {"echo": echo_protocol, "http": http_protocol}


async def _until_readable(fd):
    # polled, not add_reader: every loop has call_later, not every rival
    # has add_reader, and 20 wake-ups a second cost nothing measurable
    while not select.select([fd], [], [], 0)[0]:
        await asyncio.sleep(STOP_POLL_S)


def say(line):
    # one write(2) per line: print() from two interpreters, each with its
    # own sys.stdout, can interleave the text and its newline
    os.write(1, (line + "\n").encode())


def run(loop_name, app, port, index, stop_fd):
    """Serves until stop_fd is readable; prints READY, then STATS."""
    stats = Stats()
    loop = new_loop(loop_name)
    asyncio.set_event_loop(loop)
    try:
        sock = listening_socket(port)
        server = loop.run_until_complete(loop.create_server(APPS[app](stats), sock=sock))
        say(f"SCALING-READY {index}")
        loop.run_until_complete(_until_readable(stop_fd))
        server.close()
        doc = dict(vars(stats), index=index, loop=type(loop).__module__)
        say("SCALING-STATS " + json.dumps(doc))
    finally:
        asyncio.set_event_loop(None)
        loop.close()
