"""Watchers are found as asyncio's selector finds them: by descriptor
number, by file object, and — once the object is closed — by the object it
was registered with. Random programs of add/remove (reader and writer, by
object and by number), closes and descriptor reuse run on stock asyncio
and on zloopgo must give the same return values and exceptions (issue 8:
anyio removes a socket's watcher after closing the socket)."""

import asyncio
import errno
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zloopgo

POOL = 3  # sockets a program can name


def run(factory, program):
    """Runs `program` on a fresh loop; returns the trace of outcomes."""
    loop = factory()
    socks = [socket.socketpair() for _ in range(POOL)]
    numbers = [a.fileno() for a, _ in socks]
    trace = []
    try:
        for op, i, by_number in program:
            a, b = socks[i]
            target = numbers[i] if by_number else a
            try:
                if op == "close":
                    a.close()
                    result = None
                elif op == "reuse":
                    # close, then a new socket under the same number
                    a.close()
                    fresh, other = socket.socketpair()
                    if fresh.fileno() != numbers[i]:
                        fresh.close()
                        other.close()
                        result = "no reuse"
                    else:
                        b.close()
                        socks[i] = (fresh, other)
                        result = None
                elif op.startswith("add"):
                    result = getattr(loop, op)(target, lambda: None)  # None, as asyncio's
                else:
                    result = getattr(loop, op)(target)
            except Exception as exc:  # noqa: BLE001 - the exception is the outcome
                result = (type(exc).__name__, str(exc))
            trace.append((op, i, by_number, result))
    finally:
        loop.close()
        for a, b in socks:
            a.close()
            b.close()
    return trace


ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["add_reader", "add_writer", "remove_reader", "remove_writer", "close", "reuse"]
        ),
        st.integers(0, POOL - 1),
        st.booleans(),
    ),
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(program=ops)
def test_random_watch_programs_match_asyncio(program):
    expected = run(asyncio.SelectorEventLoop, program)
    got = run(zloopgo.new_event_loop, program)
    assert got == expected


# The cases the downstream suite met, written out.


@pytest.mark.parametrize("which", ["reader", "writer"])
def test_removing_a_closed_sockets_watcher_finds_it(loop, which):
    a, b = socket.socketpair()
    getattr(loop, f"add_{which}")(a, lambda: None)
    a.close()
    assert getattr(loop, f"remove_{which}")(a) is True
    # the last watcher went with it: the closed object names nothing now
    with pytest.raises(ValueError, match="Invalid file descriptor: -1"):
        getattr(loop, f"remove_{which}")(a)
    b.close()


def test_a_closed_descriptor_the_kernel_refuses_to_change_is_forgotten(loop):
    # Reader and writer on a socket, then it is closed: removing one of
    # them asks the kernel to change the watch, which fails (EBADF); the
    # selector then forgets the descriptor altogether.
    a, b = socket.socketpair()
    loop.add_reader(a, lambda: None)
    loop.add_writer(a, lambda: None)
    a.close()
    with pytest.raises(OSError) as info:
        loop.remove_reader(a)
    assert info.value.errno == errno.EBADF
    with pytest.raises(ValueError, match="Invalid file descriptor: -1"):
        loop.remove_writer(a)
    b.close()


def test_closed_socket_never_watched_raises_valueerror(loop):
    a, b = socket.socketpair()
    a.close()
    with pytest.raises(ValueError, match="Invalid file descriptor: -1"):
        loop.remove_reader(a)
    with pytest.raises(ValueError, match="Invalid file descriptor: -1"):
        loop.add_reader(a, lambda: None)
    b.close()


def test_reused_number_is_found_through_the_first_object(loop):
    # A registration keeps the object it was first made with; a new
    # socket under the same number changes the callback, not the object.
    a, b = socket.socketpair()
    number = a.fileno()
    loop.add_reader(a, lambda: None)
    a.close()
    c, d = socket.socketpair()
    if c.fileno() != number:
        pytest.skip("the kernel did not reuse the number")
    loop.add_reader(c, lambda: None)
    assert loop.remove_reader(a) is True  # found by identity: the same fd
    assert loop.remove_reader(c) is False
    for s in (b, c, d):
        s.close()
