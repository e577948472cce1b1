"""A probe, not a test: what select() answers when it is given the handle
value of a closed socket, and of one whose value another kind of handle
has taken since (as the descriptor canary's files and pipes do).

    python scripts/wine/probe_select_reused_value.py

Windows only. For each case, a socket is made and closed, then nothing,
an anonymous pipe, a file or another socket is made (Wine hands out the
lowest free value, so it takes the closed one's: printed), and select()
is asked about the old value. Under Wine 8 (2026-12-07): WSAENOTSOCK
(10038) for the closed value, WSAEOPNOTSUPP (10045) for a pipe's or a
file's, and no error for a socket's. asyncio's SelectorEventLoop meets
the first two when a socket closes while registered
(tests/hostile/machines.py, KNOWN_ON_WINDOWS). It knows nothing of any
loop.
"""

import msvcrt
import os
import select
import socket
import sys
import tempfile


def main():
    path = os.path.join(tempfile.gettempdir(), f"probe-select-{os.getpid()}")
    for kind in ("nothing", "pipe", "file", "socket"):
        s = socket.socket()
        value = s.fileno()
        s.close()
        keep, took = [], None
        if kind == "pipe":
            r, w = os.pipe()
            keep = [r, w]
            took = value in (msvcrt.get_osfhandle(r), msvcrt.get_osfhandle(w))
        elif kind == "file":
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TEMPORARY)
            keep = [fd]
            took = msvcrt.get_osfhandle(fd) == value
        elif kind == "socket":
            t = socket.socket()
            took = t.fileno() == value
        try:
            select.select([value], [value], [value], 0)
            answer = "no error"
        except OSError as exc:
            answer = f"OSError {exc.winerror}"
        print(f"closed, then {kind} made (took the value: {took}): select() -> {answer}")
        for fd in keep:
            os.close(fd)
        if kind == "socket":
            t.close()


if __name__ == "__main__":
    if sys.platform != "win32":
        sys.exit("Windows only")
    main()
