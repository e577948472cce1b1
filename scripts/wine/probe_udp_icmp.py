"""A probe, not a test: what a connected UDP socket shows once its peer is
closed and it sends (the ICMP port unreachable each datagram earns).

    python scripts/wine/probe_udp_icmp.py

Five runs of six rounds of (send, 20 ms, select() with the socket in
readfds and exceptfds, recv), one line a run; then two sends with no
select() between them. On Linux select() calls the socket readable and
recv() raises ConnectionRefusedError after each send. Under Wine 8
select() never calls it readable and recv() always answers
WSAEWOULDBLOCK; exceptfds report it from the second datagram on; and a
send made while the kernel still holds the error can fail with
WSAECONNREFUSED (docs/compatibility.md, "Windows"). Windows documents
WSAECONNRESET from the next recv() instead. It knows nothing of the test
harness.
"""

import select
import socket
import time


def short(call, *args):
    try:
        call(*args)
        return "ok"
    except BlockingIOError:
        return "wouldblock"
    except OSError as exc:
        return f"{type(exc).__name__} {getattr(exc, 'winerror', None) or exc.errno}"


def closed_peer():
    ours = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ours.bind(("127.0.0.1", 0))
    peer.bind(("127.0.0.1", 0))
    ours.connect(peer.getsockname())
    ours.setblocking(False)
    peer.close()
    return ours


def main():
    for run in range(5):
        ours = closed_peer()
        rounds = []
        for _ in range(6):
            sent = short(ours.send, b"x")
            time.sleep(0.02)
            readable, _, exceptional = select.select([ours], [], [ours], 0)
            ready = ("r" if readable else "-") + ("x" if exceptional else "-")
            rounds.append(f"send {sent}, select {ready}, recv {short(ours.recv, 10)}")
        print(f"run {run}: " + " | ".join(rounds))
        ours.close()
    ours = closed_peer()
    sends = [short(ours.send, b"x") for _ in range(4)]
    print("four sends, no select() between them:", ", ".join(sends))
    ours.close()


if __name__ == "__main__":
    main()
