"""A probe, not a test: what each loop does when a reader callback closes
its socket (still registered) and, with `file`, opens a file, which
may take the closed socket's handle value, before the loop waits again.

    python scripts/wine/probe_closed_socket_reused.py [file]

Windows only (O_TEMPORARY; handle values). Printed for asyncio's
SelectorEventLoop and zloopgo's loop: the closed socket's value, the
file's handle (when opened), and whether the run went on or raised.

Under Wine 8 (2026-12-07, the cp314 wheel at 34f4ff6..e85388f): the
selector loop raises OSError 10038 (WSAENOTSOCK) from its select()
either way (docs/compatibility.md, "Windows"). zloopgo's run went on
without the file, and with it raised PermissionError (WinError 31,
General failure): core/iocp submitted its next poll for the closed
socket's value, which the driver refused as no socket's (by that, a
handle the open made held the value; the CRT handle printed is
another), and dropped the socket only on STATUS_INVALID_HANDLE. With the fix after
that (a socket polled before is dropped on any refusal) it runs on in
both. It knows nothing of the tests.
"""

import asyncio
import msvcrt
import os
import socket
import sys
import tempfile

import zloopgo


def run(name, factory, with_file):
    loop = factory()
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    files = []

    def reader():
        value = ours.fileno()
        ours.close()  # closed while registered
        shown = f"closed socket {value:#x}"
        if with_file:
            path = os.path.join(tempfile.gettempdir(), f"probe{os.getpid()}-{name}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TEMPORARY)
            files.append(fd)
            shown += f", file handle {msvcrt.get_osfhandle(fd):#x}"
        print(f"{name}: {shown}")
        loop.call_later(0.2, loop.stop)

    loop.add_reader(ours.fileno(), reader)
    peer.send(b"x")
    try:
        loop.run_forever()
        print(f"{name}: ran on")
    except OSError as exc:
        print(f"{name}: run raised {exc!r}")
    finally:
        loop.close()
        peer.close()
        for fd in files:
            os.close(fd)


def main():
    if sys.platform != "win32":
        sys.exit("Windows only")
    with_file = sys.argv[1:] == ["file"]
    run("asyncio", asyncio.SelectorEventLoop, with_file)
    run("zloopgo", zloopgo.new_event_loop, with_file)


if __name__ == "__main__":
    main()
