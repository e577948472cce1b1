"""A reader or writer added to a socket the loop already watches for the
other kind runs at the next iteration, as asyncio's selector loop runs it
(select() and epoll report what a socket is ready for at each look).

It knows the loops' add_reader/add_writer and one iteration's run
(helpers.run_once); not how a loop watches (on Windows zloopgo asks AFD,
core/iocp, whose outstanding poll for the old kind must be replaced)."""

import select
import socket

from helpers import run_once


def _pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def test_a_writer_added_beside_a_waiting_reader_runs_at_the_next_iteration(loop):
    a, b = _pair()
    calls = []
    try:
        loop.add_reader(a.fileno(), calls.append, "read")
        run_once(loop)  # nothing to read: the reader waits
        for _ in range(3):
            loop.add_writer(a.fileno(), calls.append, "write")
            run_once(loop)
            loop.remove_writer(a.fileno())
            run_once(loop)
        assert calls == ["write"] * 3
    finally:
        loop.remove_reader(a.fileno())
        a.close()
        b.close()


def test_a_reader_added_beside_a_waiting_writer_runs_at_the_next_iteration(loop):
    a, b = _pair()
    calls = []
    try:
        # fill the socket's buffers, so that the writer waits
        try:
            while True:
                a.send(b"x" * 65536)
        except BlockingIOError:
            pass
        # what it does is not the point: it keeps a poll outstanding
        loop.add_writer(a.fileno(), lambda: None)
        run_once(loop)
        b.send(b"y")
        assert select.select([a], [], [], 5)[0] == [a]  # arrived
        for _ in range(3):
            loop.add_reader(a.fileno(), calls.append, "read")
            run_once(loop)
            loop.remove_reader(a.fileno())
            run_once(loop)
        assert calls == ["read"] * 3
    finally:
        loop.remove_writer(a.fileno())
        a.close()
        b.close()
