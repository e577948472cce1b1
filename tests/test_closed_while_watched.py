"""A reader left on a socket that the program closed itself (behind the
loop's back: `sock.close()`, or `socket.close()` of its detached number,
no `remove_reader`) never runs for another
socket that takes the closed one's number. epoll drops a closed
descriptor; on Windows zloopgo's AFD polls belong to the socket, not to
its handle value, and core/iocp's close watch sees the close even when
no poll of the socket is out (the reader's own iteration, here).

asyncio's SelectorEventLoop on Windows does run it: its select() is given
handle values, so the new socket's readiness is the closed one's there
(docs/compatibility.md, "Windows"). The test asserts that too, as it
shows that the program reached the case. asyncio's ProactorEventLoop has
no add_reader.

It knows the loops' add_reader/remove_reader and one iteration's run
(helpers.run_once); not how a loop watches."""

import select
import socket
import sys

import pytest
from helpers import run_once

# iterations run after the close, each of which may run the stale reader
ITERATIONS = 3


def _pair(keep):
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    keep += (a, b)
    return a, b


def _take(number, keep):
    """Sockets until one holds `number` (Windows, Wine and POSIX hand a
    freed number out again, though another thread may take it first),
    that one made a listener with a connection waiting: ready to read."""
    for _ in range(32):
        s = socket.socket()
        keep.append(s)
        if s.fileno() == number:
            s.bind(("127.0.0.1", 0))
            s.listen()
            keep.append(socket.create_connection(s.getsockname()))
            assert select.select([s], [], [], 5)[0] == [s]  # arrived
            return s
    raise AssertionError(f"no new socket took the closed socket's number {number}")


@pytest.mark.parametrize("close", ["close", "detach"])
def test_a_reader_on_a_closed_socket_never_runs_for_the_socket_on_its_number(
    loop, loop_name, close
):
    keep = []
    ours, peer = _pair(keep)
    number = ours.fileno()
    calls, taken = [], []

    def reader():
        calls.append(ours.fileno())  # -1 once closed
        if len(calls) > 1:
            return  # stale
        ours.recv(1)
        # closed while its reader is registered
        if close == "detach":
            socket.close(ours.detach())
        else:
            ours.close()
        taken.append(_take(number, keep))

    try:
        loop.add_reader(number, reader)
        peer.send(b"x")
        assert select.select([ours], [], [], 5)[0] == [ours]  # arrived
        run_once(loop)
        assert calls == [number]
        for _ in range(ITERATIONS):
            run_once(loop)
        stale = calls[1:]
        if sys.platform == "win32" and loop_name == "asyncio":
            assert stale == [-1] * ITERATIONS  # select() watches the value
        else:
            assert stale == []
        # the socket on the number is ready all the while: registered as
        # itself, its reader runs
        loop.remove_reader(number)
        got = []
        loop.add_reader(taken[0].fileno(), got.append, "the new socket")
        run_once(loop)
        assert got == ["the new socket"]
        loop.remove_reader(taken[0].fileno())
    finally:
        for s in keep:
            s.close()
