"""The descriptor canary (tests/hostile/canary.py; on Windows
canary_windows.py) watches what the differential harnesses rely on it to
watch: a number a closed socket freed is filled by a canary, and a stale
send, receive or close through that number is reported. It tests the
harness, not a loop: nothing here runs on two loops. On Windows the
numbers are handle values (a SOCKET's fileno()).

What it does not know: which of a program's numbers a loop may still use.
"""

import gc
import socket
import sys
import time

import pytest
from hostile import canary as canaries


def freed_number_filled_by_a_stream_canary():
    """A Canary whose first kind is the socket pair, and a number a closed
    socket freed, which one of its ends now holds."""
    canary = canaries.Watched(order=("stream", "file"))
    canary.fill()
    sock = socket.socket()
    canary.fill()
    number = sock.fileno()
    sock.close()
    canary.fill()
    assert number in canary.canaries, (number, sorted(canary.canaries))
    assert canary.check() == []
    return canary, number


def through_stale_number(number):
    """A socket object over `number` that does not own it."""
    return socket.socket(fileno=number)


@pytest.fixture
def watched():
    canary, number = freed_number_filled_by_a_stream_canary()
    yield canary, number
    canary.close()


def test_a_stale_send_reaches_the_canary_and_is_reported(watched):
    canary, number = watched
    stale = through_stale_number(number)
    try:
        stale.send(b"x")
    finally:
        stale.detach()
    # the other end's count grows when loopback TCP hands the byte on
    deadline = time.monotonic() + 5
    while not (found := canary.check()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert found == [["stream", f"its socket holds {len(canaries.BAIT) + 1} bytes, not 7"]]


def test_a_stale_receive_reaches_the_canary_and_is_reported(watched):
    canary, number = watched
    stale = through_stale_number(number)
    try:
        assert stale.recv(3) == canaries.BAIT[:3]
    finally:
        stale.detach()
    assert canary.check() == [["stream", f"its socket holds {len(canaries.BAIT) - 3} bytes, not 7"]]


def test_a_stale_close_is_reported(watched):
    canary, number = watched
    through_stale_number(number).close()
    found = canary.check()
    # (on Windows the other end then sees the connection reset, its bait
    # gone: a second violation, of the same pair)
    assert [kind for kind, _ in found] == ["stream"] * len(found), found
    assert any(what.startswith("its descriptor was closed") for _, what in found), found


def test_a_stale_close_is_reported_though_a_fill_took_the_number_again(watched):
    # The harnesses fill after every loop iteration and check at the end
    # of a step: a close of a canary's number, then a fill that makes a
    # new canary on it, must be reported as the old canary's, and the new
    # one must stay intact. Before, the new canary took the old one's
    # place unchecked, and the old one's socket object, collected then,
    # closed the number under the new canary (a violation of the wrong
    # canary, and one the program never made).
    canary, number = watched
    through_stale_number(number).close()
    canary.fill()
    gc.collect()
    assert number in canary.canaries
    assert canary.canaries[number].ours()
    found = canary.check()
    assert [kind for kind, _ in found] == ["stream"] * len(found), found
    assert any(what.startswith("its descriptor was closed") for _, what in found), found
    assert canary.check() == []


def test_the_tally_counts_each_freed_number_a_canary_took(watched):
    canary, _ = watched
    before = canary.tally()["landed"]
    socks = [socket.socket() for _ in range(3)]
    canary.fill()
    for sock in socks:
        sock.close()
    canary.fill()
    tally = canary.tally()
    assert tally["landed"] == before + 3, tally
    assert tally["gave_up"] == 0, tally
    assert canary.check() == []


def test_a_number_freed_below_an_open_one_is_filled():
    # The cheap check after every iteration took "the lowest free number
    # is above the highest seen" to mean nothing was freed. A number freed
    # before the first fill, below numbers opened since the canary was
    # made, made the first fill set its high mark below them, and every
    # fill after it stopped at that free number: the canary never filled
    # anything again (under Wine, a transport diff program's canary on
    # asyncio landed once). A number opened and another freed below it
    # between two fills hid the same way.
    canary = canaries.Watched(order=("stream", "file"))
    low, first, second = socket.socket(), socket.socket(), socket.socket()
    first_number = first.fileno()
    low.close()  # a gap below first and second, before any fill
    canary.fill()
    first.close()
    canary.fill()
    fourth = None
    try:
        assert first_number in canary.canaries, (first_number, sorted(canary.canaries))
        third, fourth = socket.socket(), socket.socket()
        third_number = third.fileno()
        third.close()  # freed below fourth, opened since the last fill
        canary.fill()
        assert third_number in canary.canaries, (third_number, sorted(canary.canaries))
        assert canary.check() == []
    finally:
        second.close()
        if fourth is not None:
            fourth.close()
        canary.close()


def test_nothing_is_reported_when_nothing_stale_happened(watched):
    canary, _ = watched
    for _ in range(3):
        sock = socket.socket()
        canary.fill()
        sock.close()
        canary.fill()
    assert canary.check() == []


def test_the_platforms_canary_watches_its_numbers(watched):
    canary, number = watched
    if sys.platform == "win32":  # handle values, multiples of 4
        assert type(canary).__module__ == "hostile.canary_windows"
        assert number % 4 == 0
    else:
        assert type(canary) is canaries.Canary is canaries.Watched
