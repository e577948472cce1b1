"""Descriptor watching (add_reader, add_writer, remove_reader,
remove_writer), run on stock asyncio and on zloopgo."""

import asyncio
import contextlib
import os
import socket

import pytest


@pytest.fixture
def pipe():
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):
            os.close(fd)


@pytest.fixture
def socks():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def run_until(loop, fut, timeout=10):
    return loop.run_until_complete(asyncio.wait_for(fut, timeout))


def test_add_reader_pipe_with_args(loop, pipe):
    r, w = pipe
    got = loop.create_future()

    def on_readable(fd, tag):
        data = os.read(fd, 100)
        loop.remove_reader(fd)
        got.set_result((tag, data))

    loop.add_reader(r, on_readable, r, "tag")
    loop.call_later(0.01, os.write, w, b"hello")
    assert run_until(loop, got) == ("tag", b"hello")
    assert loop.remove_reader(r) is False


def test_add_writer_pipe_with_args(loop, pipe):
    r, w = pipe
    got = loop.create_future()

    def on_writable(fd, payload, extra):
        os.write(fd, payload)
        loop.remove_writer(fd)
        got.set_result(extra)

    loop.add_writer(w, on_writable, w, b"xyz", 123)
    assert run_until(loop, got) == 123
    assert os.read(r, 10) == b"xyz"


def test_add_reader_socketpair(loop, socks):
    a, b = socks
    chunks = []
    done = loop.create_future()

    def on_readable():
        data = a.recv(4096)
        chunks.append(data)
        if b"".join(chunks).endswith(b"END"):
            loop.remove_reader(a)
            done.set_result(b"".join(chunks))

    loop.add_reader(a, on_readable)
    for i, piece in enumerate([b"one,", b"two,", b"END"]):
        loop.call_later(0.005 * (i + 1), b.send, piece)
    assert run_until(loop, done) == b"one,two,END"


def test_add_writer_socketpair(loop, socks):
    a, b = socks
    done = loop.create_future()
    calls = []

    def on_writable(n):
        calls.append(n)
        a.send(b"x")
        if len(calls) == 3:
            loop.remove_writer(a.fileno())
            done.set_result(None)

    loop.add_writer(a.fileno(), on_writable, 7)
    run_until(loop, done)
    assert calls == [7, 7, 7]
    assert b.recv(10) == b"xxx"


def test_replacing_reader_cancels_old_handle(loop, pipe):
    r, w = pipe
    calls = []
    done = loop.create_future()

    def old():
        calls.append("old")

    def new():
        calls.append("new")
        os.read(r, 100)
        loop.remove_reader(r)
        done.set_result(None)

    first = loop._add_reader(r, old)
    second = loop._add_reader(r, new)
    assert first.cancelled()
    assert not second.cancelled()
    reader, writer = loop._selector.get_key(r).data
    assert reader is second and writer is None
    os.write(w, b"x")
    run_until(loop, done)
    assert calls == ["new"]


def test_replacing_writer_cancels_old_handle(loop, socks):
    a, _ = socks
    calls = []
    done = loop.create_future()

    def new():
        calls.append("new")
        loop.remove_writer(a)
        done.set_result(None)

    first = loop._add_writer(a.fileno(), calls.append, "old")
    loop.add_writer(a, new)
    assert first.cancelled()
    run_until(loop, done)
    assert calls == ["new"]


def test_remove_return_values(loop, pipe, socks):
    r, w = pipe
    a, _ = socks
    assert loop.remove_reader(r) is False
    assert loop.remove_writer(w) is False
    loop.add_reader(r, lambda: None)
    loop.add_writer(w, lambda: None)
    assert loop.remove_writer(r) is False  # r has only a reader
    assert loop.remove_reader(w) is False  # w has only a writer
    assert loop.remove_reader(r) is True
    assert loop.remove_reader(r) is False
    assert loop.remove_writer(w) is True
    assert loop.remove_writer(w) is False
    loop.add_reader(a, lambda: None)
    assert loop.remove_reader(a.fileno()) is True  # socket object, then its number
    with pytest.raises(KeyError):
        loop._selector.get_key(a)


def test_removed_handle_is_cancelled(loop, pipe):
    r, _ = pipe
    h = loop._add_reader(r, lambda: None)
    assert loop.remove_reader(r) is True
    assert h.cancelled()


def test_reader_and_writer_on_same_fd(loop, socks):
    a, b = socks
    events = []
    got_read = loop.create_future()

    def on_writable():
        events.append("w")
        loop.remove_writer(a)
        # the reader is still registered
        reader, writer = loop._selector.get_key(a).data
        assert reader is not None and writer is None
        b.send(b"ping")

    def on_readable():
        events.append("r")
        got_read.set_result(a.recv(10))

    loop.add_reader(a, on_readable)
    loop.add_writer(a, on_writable)
    key = loop._selector.get_key(a)
    assert key.events == 3  # EVENT_READ | EVENT_WRITE
    assert run_until(loop, got_read) == b"ping"
    assert events == ["w", "r"]
    assert loop.remove_reader(a) is True
    assert loop.remove_writer(a) is False


def test_both_ready_in_one_iteration(loop, socks):
    # Readable and writable at the same time: both callbacks run.
    a, b = socks
    b.send(b"data")
    seen = set()
    done = loop.create_future()

    def mark(what):
        seen.add(what)
        if what == "r":
            loop.remove_reader(a)
        else:
            loop.remove_writer(a)
        if seen == {"r", "w"}:
            done.set_result(None)

    loop.add_reader(a, mark, "r")
    loop.add_writer(a, mark, "w")
    run_until(loop, done)
    assert seen == {"r", "w"}


def test_reader_removed_by_earlier_callback_same_iteration(loop):
    # Two descriptors become readable before the loop polls; whichever
    # callback runs first removes the other reader, which then must not run.
    p1, p2 = os.pipe(), os.pipe()
    try:
        os.write(p1[1], b"1")
        os.write(p2[1], b"2")
        ran = []

        def cb(me, other):
            ran.append(me)
            loop.remove_reader(other)
            loop.remove_reader(me)

        loop.add_reader(p1[0], cb, p1[0], p2[0])
        loop.add_reader(p2[0], cb, p2[0], p1[0])
        # several iterations: the removed one must never run
        for _ in range(3):
            loop.run_until_complete(asyncio.sleep(0.01))
        assert len(ran) == 1
        assert ran[0] in (p1[0], p2[0])
    finally:
        for fd in (*p1, *p2):
            os.close(fd)


def test_writer_removed_by_earlier_callback_same_iteration(loop, socks):
    a, b = socks
    ran = []

    def cb(me, other):
        ran.append(me.fileno())
        loop.remove_writer(other)
        loop.remove_writer(me)

    loop.add_writer(a, cb, a, b)
    loop.add_writer(b, cb, b, a)
    for _ in range(3):
        loop.run_until_complete(asyncio.sleep(0.01))
    assert len(ran) == 1


def test_cancelled_handle_does_not_run(loop, pipe):
    r, w = pipe
    ran = []
    h = loop._add_reader(r, ran.append, "x")
    h.cancel()
    os.write(w, b"x")
    loop.run_until_complete(asyncio.sleep(0.02))
    assert ran == []
    # asyncio drops the cancelled reader when its descriptor fires
    assert loop.remove_reader(r) is False


def test_reader_with_file_object(loop, pipe):
    r, w = pipe

    class FileLike:
        def fileno(self):
            return r

    f = FileLike()
    got = loop.create_future()

    def on_readable():
        got.set_result(os.read(r, 10))

    loop.add_reader(f, on_readable)
    assert loop._selector.get_key(r).fd == r
    os.write(w, b"via fileno")
    assert run_until(loop, got) == b"via fileno"
    assert loop.remove_reader(f) is True
    assert loop.remove_reader(r) is False


def test_reader_with_socket_object(loop, socks):
    a, b = socks
    got = loop.create_future()
    loop.add_reader(a, lambda: got.set_result(a.recv(10)))
    b.send(b"sock")
    assert run_until(loop, got) == b"sock"
    assert loop.remove_reader(a) is True


def test_add_reader_closed_fd_raises_and_registers_nothing(loop):
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError):
        loop.add_reader(r, lambda: None)
    with pytest.raises(OSError):
        loop.add_writer(w, lambda: None)
    with pytest.raises(KeyError):
        loop._selector.get_key(r)
    assert loop.remove_reader(r) is False
    assert loop.remove_writer(w) is False
    # the loop still runs
    assert loop.run_until_complete(asyncio.sleep(0, "ok")) == "ok"


def test_add_reader_invalid_fd(loop):
    with pytest.raises(ValueError):
        loop.add_reader(-1, lambda: None)
    with pytest.raises((ValueError, TypeError)):
        loop.add_reader(object(), lambda: None)


def test_add_reader_after_close_raises(loop, pipe):
    r, _ = pipe
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        loop.add_reader(r, lambda: None)


def test_remove_after_close_returns_false(loop, pipe):
    r, w = pipe
    loop.add_reader(r, lambda: None)
    loop.add_writer(w, lambda: None)
    loop.close()
    assert loop.remove_reader(r) is False
    assert loop.remove_writer(w) is False


def test_reader_callback_exception_goes_to_handler(loop, loop_errors, pipe):
    r, w = pipe

    def bad():
        loop.remove_reader(r)
        raise ZeroDivisionError("in reader")

    loop.add_reader(r, bad)
    os.write(w, b"x")
    loop.run_until_complete(asyncio.sleep(0.02))
    assert len(loop_errors) == 1
    assert isinstance(loop_errors[0]["exception"], ZeroDivisionError)
    assert "Exception in callback" in loop_errors[0]["message"]


def test_many_descriptors(loop):
    pairs = [socket.socketpair() for _ in range(50)]
    try:
        seen = set()
        done = loop.create_future()

        def on_readable(i, s):
            s.recv(10)
            loop.remove_reader(s)
            seen.add(i)
            if len(seen) == len(pairs):
                done.set_result(None)

        for i, (a, _) in enumerate(pairs):
            a.setblocking(False)
            loop.add_reader(a, on_readable, i, a)
        for _, b in pairs:
            b.send(b"x")
        run_until(loop, done)
        assert seen == set(range(len(pairs)))
    finally:
        for a, b in pairs:
            a.close()
            b.close()
