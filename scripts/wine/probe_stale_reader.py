"""A probe, not a test: what a selector loop does with a reader left on a
socket that was closed, once another socket takes the closed one's
number (handle value on Windows, descriptor on POSIX) and is ready.

    python scripts/wine/probe_stale_reader.py asyncio|zloopgo

A sock_recv waits on a UDP socket; the socket is closed (its reader stays
registered) and a connected TCP socket, made at once, takes its number
(Wine and POSIX hand out the lowest free one; the probe prints whether it
did) with bytes waiting. Printed: whether the loop ran the reader
(_sock_recv) and what the waiting receive ended with. Under Wine
asyncio's SelectorEventLoop runs it (select() is given handle values) and
the receive fails with WSAENOTSOCK; zloopgo's loop there, and both on
Linux (epoll drops a closed descriptor), leave the receive waiting
(docs/compatibility.md, "Windows"). It knows nothing of the test harness.
"""

import asyncio
import socket
import sys


def main(which):
    if which == "zloopgo":
        import zloopgo

        base = zloopgo.Loop
    else:
        base = asyncio.SelectorEventLoop
    calls = []

    class Loop(base):
        def _sock_recv(self, fut, sock, n):
            calls.append("_sock_recv ran")
            return super()._sock_recv(fut, sock, n)

    loop = Loop()
    listener = socket.create_server(("127.0.0.1", 0))
    ours = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ours.bind(("127.0.0.1", 0))
    peer.bind(("127.0.0.1", 0))
    ours.connect(peer.getsockname())
    ours.setblocking(False)

    async def program():
        task = loop.create_task(loop.sock_recv(ours, 100))
        await asyncio.sleep(0)
        number = ours.fileno()
        ours.close()
        taker = socket.socket()  # the lowest free number: ours, now free
        taker.connect(listener.getsockname())
        accepted, _ = listener.accept()
        accepted.send(b"bait")
        same = "the same" if taker.fileno() == number else "another"
        print(
            f"{which}: the closed socket's number {number}, the new one's {taker.fileno()} ({same})"
        )
        for _ in range(5):
            await asyncio.sleep(0.01)
        print("  the loop's calls:", calls or "none")
        print("  the receive:", "waiting" if not task.done() else repr(task.exception()))
        task.cancel()
        for sock in (taker, accepted):
            sock.close()

    try:
        loop.run_until_complete(program())
    finally:
        loop.close()
        listener.close()
        peer.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "asyncio")
