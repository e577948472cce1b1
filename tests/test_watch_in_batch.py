"""Generated programs that change what descriptors are watched from inside
running callbacks, run on asyncio and on zloopgo and compared. On an epoll
engine zloopgo makes those changes with an epoll_ctl of the adapter's own
while a batch runs (capi/fds.c, reactor_watch) and tells the engine how
many descriptors it watches when the batch returns (core.Alone.Watched);
outside a batch the engine makes them. Both must answer as asyncio's
selector does.

Each program is a chain of steps, one per iteration, over socket pairs
(whose ends become readable when the peer sends, and are always
writable), a pipe, a regular file (epoll refuses it: PermissionError) and
descriptors closed while watched or not (EBADF, or forgotten by the
kernel): add_reader, add_writer, remove_reader, remove_writer, a send to a
peer, a recv, a close. Observed: what each call returned or raised (the
class and errno), and the order in which steps and reader and writer
callbacks ran; on zloopgo also that the `descriptors` gauge is the number
of descriptors with a reader or a writer after every step, and that the
changes were made natively.
"""

import os
import random
import socket
import sys
import tempfile

import pytest
from helpers import FACTORIES, assert_same_observations

import zloopgo

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="selector descriptors")

PROGRAMS = 60
STEPS = 40
OPS = ["add_reader", "add_writer", "remove_reader", "remove_writer", "send", "recv", "close"]
WEIGHTS = [6, 3, 4, 3, 4, 3, 1]


def _program(seed):
    rng = random.Random(seed)
    return [(rng.choices(OPS, WEIGHTS)[0], rng.randrange(6)) for _ in range(STEPS)]


def _observations(loop_name, steps):
    loop = FACTORIES[loop_name]()
    a1, b1 = socket.socketpair()
    a2, b2 = socket.socketpair()
    r, w = os.pipe()
    with tempfile.TemporaryFile() as regular:
        socks = [a1, b1, a2, b2]
        for s in socks:
            s.setblocking(False)
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        # targets: four socket ends, the pipe's read end, a regular file
        fds = [s.fileno() for s in socks] + [r, regular.fileno()]
        peers = {0: b1, 1: a1, 2: b2, 3: a2}
        closed = set()
        seen = []
        watching = {}  # fd -> {"reader", "writer"}: what asyncio says is registered
        own = zloopgo.stats(loop)["descriptors"] if isinstance(loop, zloopgo.Loop) else 0

        def fired(kind, i):
            seen.append((kind, i))

        def result(call):
            try:
                return ("ok", call())
            except OSError as exc:
                return (type(exc).__name__, exc.errno)
            except (ValueError, TypeError) as exc:
                return (type(exc).__name__, str(exc))

        def step(n):
            if n == len(steps):
                loop.call_soon(loop.call_soon, loop.stop)
                return
            op, i = steps[n]
            fd = fds[i]
            seen.append(("step", n, op, i))
            if op == "add_reader":
                got = result(lambda: loop.add_reader(fd, fired, "reader", i) and None)
                if got[0] == "ok":
                    watching.setdefault(fd, set()).add("reader")
                else:
                    watching.pop(fd, None)  # asyncio's selector forgets a refused descriptor
            elif op == "add_writer":
                got = result(lambda: loop.add_writer(fd, fired, "writer", i) and None)
                if got[0] == "ok":
                    watching.setdefault(fd, set()).add("writer")
                else:
                    watching.pop(fd, None)
            elif op == "remove_reader":
                got = result(lambda: loop.remove_reader(fd))
                watching.get(fd, set()).discard("reader")
                if got[0] != "ok":  # a refused change: the selector forgets fd
                    watching.pop(fd, None)
            elif op == "remove_writer":
                got = result(lambda: loop.remove_writer(fd))
                watching.get(fd, set()).discard("writer")
                if got[0] != "ok":  # a refused change: the selector forgets fd
                    watching.pop(fd, None)
            elif op == "send":
                got = result(lambda: peers[i].send(b"x") if i in peers else os.write(w, b"x"))
            elif op == "recv":
                got = result(lambda: len(socks[i].recv(3)) if i < 4 else len(os.read(r, 3)))
            else:  # close the descriptor, watched or not (never reopened)
                if fd in closed or i == 5:
                    got = ("skip",)
                else:
                    closed.add(fd)
                    got = result(lambda: socks[i].close() if i < 4 else os.close(r))
            seen.append(("result", n, got))
            if isinstance(loop, zloopgo.Loop):
                count = sum(1 for kinds in watching.values() if kinds)
                got_count = zloopgo.stats(loop)["descriptors"] - own
                seen.append(("descriptors", got_count == count, got_count, count))
            loop.call_soon(step, n + 1)

        loop.call_soon(step, 0)
        try:
            loop.run_forever()
            native = zloopgo.stats(loop)["watches_native"] if isinstance(loop, zloopgo.Loop) else 0
            for fd in fds:  # a closed one may be refused: not compared
                result(lambda fd=fd: loop.remove_reader(fd))
                result(lambda fd=fd: loop.remove_writer(fd))
        finally:
            loop.close()
            for s in socks:
                s.close()
            for fd in (r, w):
                if fd not in closed:
                    os.close(fd)
    # what zloopgo checked of itself, kept out of the comparison
    counted = [o for o in seen if o[0] == "descriptors"]
    assert all(o[1] for o in counted), [o for o in seen if o[0] in ("descriptors", "result")]
    if loop_name == "zloopgo" and sys.platform.startswith("linux"):
        # the first add that succeeded changed the mask, natively
        ops = {o[1]: o[2] for o in seen if o[0] == "step"}
        added = any(
            o[0] == "result" and ops[o[1]].startswith("add_") and o[2][0] == "ok" for o in seen
        )
        assert native > 0 or not added
    return [o for o in seen if o[0] != "descriptors"]


@pytest.mark.parametrize("seed", range(PROGRAMS))
def test_watch_changes_made_in_a_batch_answer_as_asyncios(seed):
    steps = _program(seed)
    assert_same_observations(f"program {seed}", steps, _observations, steps)


def test_the_programs_reach_every_answer():
    """The generated programs refuse, accept, close and fire: a check that
    the comparison above is not of programs that do nothing."""
    kinds = set()
    for seed in range(PROGRAMS):
        for o in _observations("zloopgo", _program(seed)):
            if o[0] == "result":
                kinds.add(o[2][0])
            else:
                kinds.add(o[0])
    assert {"ok", "PermissionError", "reader", "writer", "step"} <= kinds, kinds
