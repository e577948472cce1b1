"""Generated programs around the descriptors sock_recv and sock_sendall wait
on, run on asyncio and on zloopgo and compared. asyncio registers the
descriptor for each wait and unregisters it when the wait is over, and
what the kernel then holds decides what a later wait sees, also for
programs that close a socket the loop still watches. The programs do what
tells registrations apart:

- waits that end, that are cancelled, that wait on and on (two on one
  socket: the second replaces the first's reader or writer);
- the socket closed while a wait is pending or after, with a dup of it
  kept open (the kernel then keeps the closed number's registration, and
  reports it), a new socket pair opened in its place (the numbers are
  reused);
- the program's own add_reader and remove_reader on those descriptors;
- each step either from a callback while the loop runs (the adapter makes
  the epoll_ctl itself) or between runs (the engine makes it).

Observed: what each step returned or raised, every wait's outcome in the
order they finished (data by length and first byte, the exception), every
call of the program's own readers (what it read), and at the end which
waits still wait and what remove_reader and remove_writer answer for each
socket. zloopgo must see what asyncio sees, in every program. This is the
test that ruled out registering a wait EPOLLONESHOT and leaving it
registered once its event came (one epoll_ctl per wait instead of two):
a registration the kernel keeps for a closed socket's dup is reported by
asyncio on every iteration, a one-shot one once (docs/where-time-goes.md,
"sock_recv's registrations").
"""

import asyncio
import os
import random
import socket
import sys

import pytest
from helpers import FACTORIES, assert_same_observations

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="selector descriptors")

PROGRAMS = 60
STEPS = 40
SLOTS = 2
SETTLE = 3
OPS = [
    "recv",
    "sendall_big",
    "peer_send",
    "peer_drain",
    "cancel",
    "close",
    "dup",
    "reopen",
    "add_reader",
    "remove_reader",
]
WEIGHTS = [8, 2, 6, 2, 2, 1, 1, 2, 2, 2]
BIG = b"B" * 3_000_000  # more than a socket pair holds: the writer waits


def _program(seed):
    rng = random.Random(seed)
    return [
        (rng.choices(OPS, WEIGHTS)[0], rng.randrange(SLOTS), rng.random() < 0.5)
        for _ in range(STEPS)
    ]


def _describe(exc):
    return (type(exc).__name__, getattr(exc, "errno", None))


def _observations(loop_name, steps, reused=None):
    """The observations of one program; whether each reopened pair took
    a closed socket's number is appended to `reused` if given (not
    compared: each loop holds descriptors of its own)."""
    loop = FACTORIES[loop_name]()
    seen = []
    slots = []  # [ours, peer, open?]
    dups = []
    tasks = []

    def new_pair():
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        return [a, b, True]

    for _ in range(SLOTS):
        slots.append(new_pair())

    def finished(n, t):
        if t.cancelled():
            seen.append(("wait", n, "cancelled"))
        elif t.exception() is not None:
            seen.append(("wait", n, _describe(t.exception())))
        else:
            r = t.result()
            seen.append(("wait", n, (len(r), r[:1]) if isinstance(r, bytes) else r))

    def start(coro):
        n = len(tasks)
        t = loop.create_task(coro)
        t.add_done_callback(lambda t, n=n: finished(n, t))
        tasks.append(t)
        return n

    def own_reader(i, sock):
        try:
            got = sock.recv(7)
            seen.append(("own reader", i, len(got)))
        except OSError as exc:
            seen.append(("own reader", i, _describe(exc)))
            loop.remove_reader(sock)

    def do(op, i):
        ours, peer, is_open = slots[i]
        if op == "recv":
            return ("started", start(loop.sock_recv(ours, 5)))
        if op == "sendall_big":
            return ("started", start(loop.sock_sendall(ours, BIG)))
        if op == "peer_send":
            return peer.send(b"p" * 3) if is_open else "closed"
        if op == "peer_drain":
            total = 0
            try:
                while True:
                    got = peer.recv(1 << 20)
                    if not got:
                        break
                    total += len(got)
            except BlockingIOError:
                pass
            return total
        if op == "cancel":
            live = [t for t in tasks if not t.done()]
            return live[-1].cancel() if live else "none"
        if op == "close":
            if not is_open:
                return "closed"
            ours.close()
            slots[i][2] = False
            return "closed now"
        if op == "dup":
            if not is_open:
                return "closed"
            dups.append(os.dup(ours.fileno()))
            return "dup"
        if op == "reopen":  # the old pair closed, a new one likely on its numbers
            numbers = {ours.fileno(), peer.fileno()}
            ours.close()
            peer.close()
            slots[i] = new_pair()
            if reused is not None:
                reused.append(slots[i][0].fileno() in numbers)
            return "reopened"
        if op == "add_reader":
            if not is_open:
                return "closed"
            loop.add_reader(ours, own_reader, i, ours)
            return "added"
        # remove_reader
        return loop.remove_reader(ours) if is_open else "closed"

    def answer(f, *args):
        try:
            return ("ok", f(*args))
        except Exception as exc:  # noqa: BLE001 - observed
            return ("raised", _describe(exc))

    def step(op, i):
        seen.append(("step", op, i, answer(do, op, i)))

    async def settle():
        for _ in range(SETTLE):
            await asyncio.sleep(0)

    try:
        for op, i, inside in steps:
            if inside:  # from a callback while the loop runs
                loop.call_soon(step, op, i)
            else:  # between runs
                step(op, i)
            loop.run_until_complete(settle())
        seen.append(("waiting", [n for n, t in enumerate(tasks) if not t.done()]))
        for i, (ours, _, is_open) in enumerate(slots):
            if is_open:
                seen.append(("unwatch", i, answer(loop.remove_reader, ours)))
                seen.append(("unwatch", i, answer(loop.remove_writer, ours)))
        for t in tasks:
            t.cancel()
        loop.run_until_complete(settle())
    finally:
        loop.close()
        for ours, peer, _ in slots:
            ours.close()
            peer.close()
        for fd in dups:
            os.close(fd)
    return seen


@pytest.mark.parametrize("seed", range(PROGRAMS))
def test_waits_on_parked_descriptors_answer_as_asyncios(seed):
    steps = _program(seed)
    assert_same_observations(f"program {seed}", steps, _observations, steps)


def test_the_programs_reach_every_outcome():
    """The programs end waits every way, reuse closed numbers and meet a
    registration the kernel kept for a closed socket: a check that the
    comparison is not of programs that never get there."""
    reused = []
    outcomes = set()
    for seed in range(PROGRAMS):
        for o in _observations("zloopgo", _program(seed), reused):
            if o[0] == "wait":
                outcomes.add(("wait", o[2] if isinstance(o[2], str) else type(o[2][0]).__name__))
            elif o[0] == "own reader":
                outcomes.add(("own reader", type(o[2]).__name__))
    assert any(reused)
    assert {
        ("wait", "cancelled"),
        ("wait", "int"),  # data
        ("wait", "str"),  # an exception
        ("own reader", "int"),  # data
        ("own reader", "tuple"),  # an exception: nothing there to read
    } <= outcomes, outcomes
