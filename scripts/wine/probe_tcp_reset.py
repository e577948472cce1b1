"""A probe, not a test: what a loopback TCP socket's recv() returns once
its peer reset the connection (a close with SO_LINGER 0, or a close with
bytes left unread), with plain sockets and no event loop.

    python scripts/wine/probe_tcp_reset.py

For each way of ending the connection (shutdown(SHUT_WR), a reset, a
close with unread bytes), each with and without bytes sent first, it
prints what select() and FIONREAD show of our end over 50 ms, then what
recv() returns. On Linux a reset makes recv() raise
ConnectionResetError (the bytes queued before it are lost; Windows
documents WSAECONNRESET); under Wine 8 recv() returns the queued bytes,
then b"", as for a FIN: Wine's server polls the host socket and takes
its error before the program's recv() does (2026-12-07, every case). The transport differential's
harness sees the same (docs/transport-differential.md, "On Windows").
It knows nothing of the harness or of any loop.
"""

import socket
import struct
import sys
import time

if sys.platform == "win32":
    import ctypes

    _ws2 = ctypes.WinDLL("ws2_32")
    _ws2.ioctlsocket.argtypes = [ctypes.c_size_t, ctypes.c_long, ctypes.POINTER(ctypes.c_ulong)]

    def queued(sock):
        count = ctypes.c_ulong()
        _ws2.ioctlsocket(sock.fileno(), 0x4004667F, ctypes.byref(count))  # FIONREAD
        return count.value
else:
    import fcntl
    import termios

    def queued(sock):
        raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
        return struct.unpack("i", raw)[0]


def connected_pair():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ours = socket.create_connection(listener.getsockname())
        theirs, _ = listener.accept()
    ours.setblocking(False)
    return ours, theirs


def shown(sock):
    import select

    readable, _, exceptional = select.select([sock], [], [sock], 0)
    return f"readable={bool(readable)} exceptional={bool(exceptional)} queued={queued(sock)}"


def end(theirs, how, ours):
    if how == "shutdown":
        theirs.shutdown(socket.SHUT_WR)
        return
    if how == "reset":
        linger = struct.pack("HH" if sys.platform == "win32" else "ii", 1, 0)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
    else:  # a close with bytes it did not read
        ours.send(b"unread")
        time.sleep(0.02)
    theirs.close()


def main():
    for how in ("shutdown", "reset", "close-unread"):
        for data in (False, True):
            ours, theirs = connected_pair()
            if data:
                theirs.send(b"x" * 10)
            end(theirs, how, ours)
            seen = []
            for _ in range(5):
                time.sleep(0.01)
                seen.append(shown(ours))
            try:
                got = [ours.recv(100) for _ in range(2 if data else 1)]
                outcome = f"recv: {got}"
            except OSError as exc:
                outcome = f"recv raised {exc!r}"
            print(f"{how}{' after 10 bytes' if data else ''}: {seen[-1]}; {outcome}")
            ours.close()
            if theirs.fileno() >= 0:
                theirs.close()


if __name__ == "__main__":
    main()
