"""A probe, not a test: whether a 1-byte send() on a non-blocking socket
pair's end (asyncio's self-pipe, which call_soon_threadsafe writes to)
fails with WSAEWOULDBLOCK / EAGAIN while the other end has read
everything sent, when two threads send at once (two executor threads
finishing in turn do).

    python scripts/wine/probe_concurrent_send.py [threads] [seconds]

Two threads (by default) each send a byte every 0.2 ms; the main thread
reads as fast as it can. Printed: the sends, the failed ones, and how many
bytes were unread at each failure. Under Wine 8.0, 2.6-7% of the sends
failed with 0-5 bytes unread (none with one thread); on Linux none did.
asyncio's _write_to_self swallows that error, taking it for a full pipe
that will wake the loop anyway, so the loop sleeps through the executor
result whose wake-up it was: the stall of tests/test_files_diff.py under
Wine (scripts/windows, LONG_TEST_FILES). It knows nothing of zloopgo.
"""

import contextlib
import socket
import sys
import threading
import time


def main(threads, seconds):
    ssock, csock = socket.socketpair()
    ssock.setblocking(False)
    csock.setblocking(False)
    sent = [0] * threads
    received = [0]
    unread_at_failure = []
    stop = threading.Event()

    def sender(k):
        while not stop.is_set():
            try:
                csock.send(b"\0")
                sent[k] += 1
            except BlockingIOError:
                unread_at_failure.append(sum(sent) - received[0])
            time.sleep(0.0002)

    workers = [threading.Thread(target=sender, args=(k,)) for k in range(threads)]
    for t in workers:
        t.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with contextlib.suppress(BlockingIOError):
            received[0] += len(ssock.recv(4096))
    stop.set()
    for t in workers:
        t.join()
    print(
        f"{threads} threads: {sum(sent)} sends, {len(unread_at_failure)} failed "
        f"(WSAEWOULDBLOCK/EAGAIN), bytes unread at a failure: "
        f"max {max(unread_at_failure, default=None)}, first {unread_at_failure[:10]}"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 2, float(args[1]) if len(args) > 1 else 10)
