"""A probe, not a test: which handle value a new socket takes after a
socket is closed, on this Windows (or under Wine), so that the
descriptor canary's Windows form (tests/hostile/canary_windows.py) can
say how often it lands on a freed value.

    python scripts/wine/probe_handle_reuse.py [zloopgo]

Printed, one line a question, each asked ROUNDS times:

- one socket closed, one made: does the new one take the freed value;
- three closed (the middle, highest, lowest value), three made: which order the
  freed values are handed out in (lowest first, the last freed first,
  or neither);
- one closed, a pair made through a listener (what the canary makes):
  does one of the pair's ends take it, or a handle the connection opens
  and closes on the way;
- one closed, then a file opened before the socket: whether a handle
  of another kind takes the value as readily;
- one closed while another thread opens and closes handles (as Go's
  runtime and the loop's workers do): how often the new socket still
  takes it, and how many sockets it takes to land.

With `zloopgo`, a zloopgo loop runs an idle iteration before each
question (its engine's own handles: the completion port, AFD polls,
its threads). On POSIX the descriptors answer the same questions: the
kernel hands out the lowest free one. It knows nothing of the harness:
only of handle values and the order they come back in.

Under Wine 8 (2026-12-07, Windows CPython 3.14.6; three runs, one with a
zloopgo loop idling): the new socket took the freed value in 50 of 50
rounds, three values came back lowest first in 50 of 50, a pair's end
took it in 50 of 50, and a file opened first took it in 50 of 50. With
another thread churning, the first socket made landed on it in 24, 6
and 32 rounds of 50, and one of the first 7 did in every round. On
Linux every answer is the lowest free number, every round.
"""

import os
import socket
import sys
import tempfile
import threading

ROUNDS = 50
# the most sockets made, one after another, to land on a freed value
BOUND = 8


def value(sock):
    return sock.fileno()


def pair(listener):
    a = socket.socket()
    a.connect(listener.getsockname())
    b, _ = listener.accept()
    return a, b


def one_closed_one_made(keep):
    """Whether a new socket takes the value the closed one freed."""
    s = socket.socket()
    freed = value(s)
    s.close()
    t = socket.socket()
    keep.append(t)
    return value(t) == freed


def order_of_three(keep):
    """'lowest', 'last-first', 'first-first' or 'other': the order the
    values of three sockets come back in, closed middle, highest, lowest
    (so that each order names a different list)."""
    socks = sorted((socket.socket() for _ in range(3)), key=value)
    closing = [socks[1], socks[2], socks[0]]
    freed = [value(s) for s in closing]
    for s in closing:
        s.close()
    made = [socket.socket() for _ in range(3)]
    keep.extend(made)
    got = [value(s) for s in made]
    if got == sorted(freed):
        return "lowest"
    if got == freed[::-1]:
        return "last-first"
    if got == freed:
        return "first-first"
    return "other"


def pair_after_close(listener, keep):
    """'end' when one of the pair's ends took the freed value, 'lost'
    when neither did and the value is free again (a transient handle
    took it and closed), 'taken' when another handle holds it."""
    s = socket.socket()
    freed = value(s)
    s.close()
    a, b = pair(listener)
    keep.extend((a, b))
    if freed in (value(a), value(b)):
        return "end"
    probe = socket.socket()
    keep.append(probe)
    return "lost" if value(probe) == freed else "taken"


def file_first(directory, keep, files):
    """Whether a file opened after the close took the value (then the
    socket made after it did not)."""
    s = socket.socket()
    freed = value(s)
    s.close()
    fd = os.open(os.path.join(directory, f"f{len(files)}"), os.O_RDWR | os.O_CREAT)
    files.append(fd)
    handle = fd
    if sys.platform == "win32":
        import msvcrt

        handle = msvcrt.get_osfhandle(fd)
    t = socket.socket()
    keep.append(t)
    return handle == freed


def churn(stop):
    """Opens and closes handles until told to stop (another thread's)."""
    while not stop.is_set():
        socket.socket().close()


def landing_with_churn(keep):
    """How many sockets it took to take the freed value (None: more than
    BOUND)."""
    s = socket.socket()
    freed = value(s)
    s.close()
    for tries in range(1, BOUND + 1):
        t = socket.socket()
        keep.append(t)
        if value(t) == freed:
            return tries
    return None


def main():
    loop = None
    if sys.argv[1:] == ["zloopgo"]:
        import zloopgo

        loop = zloopgo.new_event_loop()

    def idle():
        if loop is not None:
            loop.stop()
            loop.run_forever()

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    keep, files = [], []
    counts = {}

    def ask(name, answer):
        counts.setdefault(name, {})
        counts[name][answer] = counts[name].get(answer, 0) + 1

    with tempfile.TemporaryDirectory() as directory:
        for _ in range(ROUNDS):
            idle()
            ask("one closed, one made: new takes it", one_closed_one_made(keep))
            idle()
            ask("three closed (middle, highest, lowest), three made: order", order_of_three(keep))
            idle()
            ask("one closed, a pair made", pair_after_close(listener, keep))
            idle()
            taken = file_first(directory, keep, files)
            ask("one closed, a file opened first: file takes it", taken)
        stop = threading.Event()
        thread = threading.Thread(target=churn, args=(stop,))
        thread.start()
        try:
            for _ in range(ROUNDS):
                idle()
                question = f"one closed, another thread churning: sockets to land (None: > {BOUND})"
                ask(question, landing_with_churn(keep))
        finally:
            stop.set()
            thread.join()
        for fd in files:
            os.close(fd)
    for s in keep:
        s.close()
    listener.close()
    if loop is not None:
        loop.close()
    idling = ", a zloopgo loop idling between" if loop else ""
    print(f"{sys.platform}, {ROUNDS} rounds each{idling}:")
    for name, answers in counts.items():
        ordered = sorted(answers.items(), key=lambda kv: str(kv[0]))
        shown = ", ".join(f"{k}: {v}" for k, v in ordered)
        print(f"  {name}: {shown}")


if __name__ == "__main__":
    main()
