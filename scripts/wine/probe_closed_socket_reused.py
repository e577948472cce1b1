"""A probe, not a test: what each loop does when a reader callback closes
its socket (still registered) and, before the loop waits again, with
`file` opens a file, which may take the closed socket's handle value, or
with `socket` makes sockets until one takes it and makes it ready to read
(a listener with a connection waiting).

    python scripts/wine/probe_closed_socket_reused.py [file|socket]

Windows only (O_TEMPORARY; handle values). Printed for asyncio's
SelectorEventLoop, asyncio's ProactorEventLoop and zloopgo's loop: the
closed socket's value, the file's handle or the socket that took the
value, whether the run went on or raised, and how often the reader ran
after its socket's close (the stale runs, each a readiness of whatever
holds the value now, reported as the closed socket's).

Under Wine 8 (2026-12-07, the cp314 wheel at 34f4ff6..e85388f), with
nothing or `file`: the selector loop raises OSError 10038 (WSAENOTSOCK)
from its select() either way (docs/compatibility.md, "Windows").
zloopgo's run went on without the file, and with it raised
PermissionError (WinError 31, General failure): core/iocp submitted its
next poll for the closed socket's value, which the driver refused as no
socket's (by that, a handle the open made held the value; the CRT handle
printed is another), and dropped the socket only on
STATUS_INVALID_HANDLE. With the fix after that (a socket polled before
is dropped on any refusal) it runs on in both.

With `socket` (2026-12-07, issue 40): the proactor refuses add_reader
(NotImplementedError) and runs nothing. The selector loop's select() is
given the value, so the reader runs again at every iteration while the
new socket is ready. zloopgo at 268abf3 did the same (its next
poll was submitted for the value); with core/iocp's close watch
(8f94ee5) it runs the reader once, as asyncio's loops on Linux do (epoll
drops a closed descriptor). It knows nothing of the tests.
"""

import asyncio
import msvcrt
import os
import socket
import sys
import tempfile

import zloopgo


def take_value(value, keep):
    """Sockets until one holds handle value `value` (Wine and Windows hand
    a freed value out again, though another thread may take it first);
    every socket made goes into keep; the one on the value, made a
    listener with a connection waiting (ready to read), is returned."""
    for _ in range(32):
        s = socket.socket()
        keep.append(s)
        if s.fileno() == value:
            s.bind(("127.0.0.1", 0))
            s.listen()
            keep.append(socket.create_connection(s.getsockname()))
            return s
    return None


def run(name, factory, mode):
    loop = factory()
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    files, keep, calls = [], [], []

    def reader():
        calls.append(ours.fileno())
        if len(calls) > 1:
            return  # stale: ours is closed
        ours.recv(1)
        value = ours.fileno()
        ours.close()  # closed while registered
        shown = f"closed socket {value:#x}"
        if mode == "file":
            path = os.path.join(tempfile.gettempdir(), f"probe{os.getpid()}-{name}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TEMPORARY)
            files.append(fd)
            shown += f", file handle {msvcrt.get_osfhandle(fd):#x}"
        elif mode == "socket":
            taker = take_value(value, keep)
            shown += f", socket {taker.fileno():#x} took it" if taker else ", no socket took it"
        print(f"{name}: {shown}")
        loop.call_later(0.2, loop.stop)

    try:
        loop.add_reader(ours.fileno(), reader)
    except NotImplementedError as exc:
        print(f"{name}: add_reader raised {exc!r}")
        loop.close()
        ours.close()
        peer.close()
        return
    peer.send(b"x")
    try:
        loop.run_forever()
        print(f"{name}: ran on; the reader ran {len(calls) - 1} times after the close")
    except OSError as exc:
        print(f"{name}: run raised {exc!r}; the reader ran {len(calls) - 1} times after the close")
    finally:
        if calls:
            loop.remove_reader(calls[0])
        loop.close()
        peer.close()
        for fd in files:
            os.close(fd)
        for s in keep:
            s.close()


def main():
    if sys.platform != "win32":
        sys.exit("Windows only")
    mode = sys.argv[1] if sys.argv[1:] in (["file"], ["socket"]) else None
    run("asyncio selector", asyncio.SelectorEventLoop, mode)
    run("asyncio proactor", asyncio.ProactorEventLoop, mode)
    run("zloopgo", zloopgo.new_event_loop, mode)


if __name__ == "__main__":
    main()
