"""A probe, not a test: what an AFD poll (IOCTL_AFD_POLL on a \\Device\\Afd
helper handle attached to a completion port, as core/iocp submits it)
reports for a connected UDP socket once a datagram it sent earned an
ICMP port unreachable, whether a poll outstanding after that completes
when a datagram arrives, and what does see the datagram.

    python scripts/wine/probe_afd_poll_icmp.py

Windows only; plain sockets and ctypes, no event loop. Each completion
the port hands over is named by its poll (by the address of its
IO_STATUS_BLOCK), as a poll's own status may still read pending. Steps:

1. a poll for receive (and the error bits core/iocp always asks) on a
   connected UDP socket; a send to the closed port;
2. recv() once (what the error-pending socket answers);
3. three polls outstanding (one as 1, one without AFD_POLL_CONNECT_FAIL
   in its mask, one on a second AFD handle), then a socket bound on the
   closed port sends a datagram: which complete within a second;
4. a poll submitted with that datagram queued;
5. select() and recv();
6. a poll with a timeout (50 ms, relative): how it comes back;
7. a datagram, then a poll submitted;
8. and 9. a poll outstanding, then a datagram (twice): whether it
   completes, and recv();
10. a zero-byte overlapped WSARecv outstanding, then a datagram: whether
   it completes, and recv().

Under Wine 8 (2026-12-07): poll 1 completes with AFD_POLL_CONNECT_FAIL
(per-handle status 0xc0000236, STATUS_CONNECTION_REFUSED); recv()
answers WSAEWOULDBLOCK; none of the three outstanding polls completes
within a second of the datagram's arrival (the mask and the AFD handle
change nothing); the poll submitted with the datagram queued completes
at once with AFD_POLL_RECEIVE (and the three outstanding ones with it);
the timed poll comes back with STATUS_TIMEOUT (0x102) and no handle;
a poll submitted after a datagram arrived reports it; and a poll
outstanding when a datagram arrives never completes, in 8 as in 9:
recv() gets each datagram all the same. In 10 recv() finds nothing: the
zero-byte receive took the datagram (a datagram socket's receive takes
one whole, cutting it), though its OVERLAPPED still read pending half a
second later; so it is no way to watch a UDP socket. So after the error Wine's
server no longer watches the socket (its POLLERR takes the host socket
out of the server's poll loop for good), and only a poll's submission
looks at it. An event loop that waits on AFD polls alone never hears of
that socket's datagrams again unless it submits polls anew: core/iocp
polls such a socket with a timeout (recheckAfter). On Windows (not run
here) step 1 should report AFD_POLL_RECEIVE and recv() WSAECONNRESET,
after which the socket is an ordinary one again. It knows nothing of
zloopgo.
"""

import _overlapped
import ctypes
import select
import socket
import sys
import time
from ctypes import wintypes

if sys.platform != "win32":
    sys.exit("Windows only")

ntdll = ctypes.WinDLL("ntdll")
kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
ws2 = ctypes.WinDLL("ws2_32")

AFD_POLL = 0x00012024
SIO_BASE_HANDLE = 0x48000022
RECEIVE, SEND, DISCONNECT, ABORT, LOCAL_CLOSE, ACCEPT, CONNECT_FAIL = (
    0x1,
    0x4,
    0x8,
    0x10,
    0x20,
    0x80,
    0x100,
)
NAMES = {
    RECEIVE: "RECEIVE",
    SEND: "SEND",
    DISCONNECT: "DISCONNECT",
    ABORT: "ABORT",
    LOCAL_CLOSE: "LOCAL_CLOSE",
    ACCEPT: "ACCEPT",
    CONNECT_FAIL: "CONNECT_FAIL",
}
STATUS_PENDING = 0x103
INFINITE = 0x7FFFFFFFFFFFFFFF
# AFD_POLL_INFO.Timeout below 0: relative, in units of 100 ns
RELATIVE_50_MS = -50 * 10_000


class UNICODE_STRING(ctypes.Structure):
    _fields_ = [
        ("Length", wintypes.USHORT),
        ("MaximumLength", wintypes.USHORT),
        ("Buffer", wintypes.LPWSTR),
    ]


class OBJECT_ATTRIBUTES(ctypes.Structure):
    _fields_ = [
        ("Length", wintypes.ULONG),
        ("RootDirectory", wintypes.HANDLE),
        ("ObjectName", ctypes.POINTER(UNICODE_STRING)),
        ("Attributes", wintypes.ULONG),
        ("SecurityDescriptor", ctypes.c_void_p),
        ("SecurityQualityOfService", ctypes.c_void_p),
    ]


class IO_STATUS_BLOCK(ctypes.Structure):
    _fields_ = [("Status", ctypes.c_ssize_t), ("Information", ctypes.c_size_t)]


class AFD_POLL_INFO(ctypes.Structure):
    _fields_ = [
        ("Timeout", ctypes.c_int64),
        ("NumberOfHandles", wintypes.ULONG),
        ("Exclusive", wintypes.ULONG),
        ("Handle", ctypes.c_size_t),
        ("Events", wintypes.ULONG),
        ("Status", ctypes.c_int32),
    ]


def open_afd(port):
    name = "\\Device\\Afd\\probe"
    us = UNICODE_STRING(len(name) * 2, len(name) * 2, name)
    attrs = OBJECT_ATTRIBUTES(
        ctypes.sizeof(OBJECT_ATTRIBUTES), None, ctypes.pointer(us), 0, None, None
    )
    handle = wintypes.HANDLE()
    iosb = IO_STATUS_BLOCK()
    # SYNCHRONIZE, FILE_SHARE_READ | FILE_SHARE_WRITE, FILE_OPEN
    status = ntdll.NtCreateFile(
        ctypes.byref(handle),
        0x00100000,
        ctypes.byref(attrs),
        ctypes.byref(iosb),
        None,
        0,
        3,
        1,
        0,
        None,
        0,
    )
    if status != 0:
        sys.exit(f"NtCreateFile(\\Device\\Afd) failed: {status & 0xFFFFFFFF:#x}")
    _overlapped.CreateIoCompletionPort(handle.value, port, 0, 0)
    return handle


def base_handle(sock):
    out = ctypes.c_size_t()
    got = wintypes.DWORD()
    if ws2.WSAIoctl(
        sock.fileno(), SIO_BASE_HANDLE, None, 0, ctypes.byref(out), 8, ctypes.byref(got), None, None
    ):
        return sock.fileno()
    return out.value


def events(mask):
    return "|".join(name for bit, name in NAMES.items() if mask & bit) or "0"


class Poll:
    """One outstanding poll and its buffers (kept alive until it completes)."""

    def __init__(self, afd, handle, mask, timeout=INFINITE):
        self.afd = afd
        self.done = False
        self.iosb = IO_STATUS_BLOCK(STATUS_PENDING, 0)
        self.info = AFD_POLL_INFO(timeout, 1, 0, handle, mask, 0)
        size = ctypes.sizeof(self.info)
        status = ntdll.NtDeviceIoControlFile(
            afd,
            None,
            None,
            ctypes.byref(self.iosb),
            ctypes.byref(self.iosb),
            AFD_POLL,
            ctypes.byref(self.info),
            size,
            ctypes.byref(self.info),
            size,
        )
        self.submitted = status & 0xFFFFFFFF

    def cancel(self):
        if not self.done:
            ntdll.NtCancelIoFileEx(
                self.afd, ctypes.byref(self.iosb), ctypes.byref(IO_STATUS_BLOCK())
            )


def wait(port, polls, ms=1000):
    """The name of the poll whose completion the port hands over within
    ms (polls: name -> Poll), or "none"."""
    got = _overlapped.GetQueuedCompletionStatus(port, ms)
    if got is None:
        return "none"
    address = got[3]
    for name, p in polls.items():
        if ctypes.addressof(p.iosb) == address:
            p.done = True
            return name
    return f"an unknown completion ({address:#x})"


def describe(p):
    return (
        f"status {p.iosb.Status & 0xFFFFFFFF:#x}, handles {p.info.NumberOfHandles}, "
        f"events {events(p.info.Events)}, per-handle status {p.info.Status & 0xFFFFFFFF:#x}"
    )


def try_recv(sock):
    try:
        return repr(sock.recv(100))
    except OSError as exc:
        return f"{type(exc).__name__} {getattr(exc, 'winerror', None)}"


def drain(port, polls, ms):
    """The names of the polls that complete within ms of each other."""
    done = []
    while (name := wait(port, polls, ms)) != "none":
        done.append(name)
    return done


def main():
    port = _overlapped.CreateIoCompletionPort(_overlapped.INVALID_HANDLE_VALUE, 0, 0, 0)
    afd = open_afd(port)
    fresh_afd = open_afd(port)
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    closed = probe.getsockname()
    probe.close()
    ours = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ours.bind(("127.0.0.1", 0))
    ours.connect(closed)
    ours.setblocking(False)
    handle = base_handle(ours)
    mask = RECEIVE | ACCEPT | DISCONNECT | ABORT | CONNECT_FAIL | LOCAL_CLOSE
    polls = {}

    polls["1"] = Poll(afd, handle, mask)
    print(f"1. poll 1 submitted ({polls['1'].submitted:#x}); send: {ours.send(b'x')} byte")
    print(f"   completed: {drain(port, polls, 1000)}; poll 1: {describe(polls['1'])}")
    print(f"2. recv: {try_recv(ours)}")
    # what might still hear of a datagram, each submitted before it comes
    polls["2"] = Poll(afd, handle, mask)
    polls["3 (no CONNECT_FAIL asked)"] = Poll(afd, handle, mask & ~CONNECT_FAIL)
    polls["4 (a new AFD handle)"] = Poll(fresh_afd, handle, mask)
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    back.bind(closed)
    back.sendto(b"back", ours.getsockname())
    print("3. polls 2, 3 and 4 submitted, then a datagram")
    print(f"   completed within 1 s: {drain(port, polls, 1000)}")
    polls["5"] = Poll(afd, handle, mask)
    print(f"4. poll 5 submitted with the datagram queued: completed {drain(port, polls, 1000)}")
    print(f"   poll 5: {describe(polls['5'])}")
    readable = select.select([ours], [], [], 0)[0]
    print(f"5. select: {'readable' if readable else 'not readable'}; recv: {try_recv(ours)}")
    polls["6 (50 ms timeout)"] = Poll(afd, handle, mask, RELATIVE_50_MS)
    print(f"6. poll 6 with a 50 ms timeout: completed {drain(port, polls, 1000)}")
    print(f"   poll 6: {describe(polls['6 (50 ms timeout)'])}")
    back.sendto(b"back2", ours.getsockname())
    polls["7"] = Poll(afd, handle, mask)
    print(f"7. another datagram, then poll 7: completed {drain(port, polls, 1000)}")
    print(f"   poll 7: {describe(polls['7'])}; recv: {try_recv(ours)}")
    polls["8"] = Poll(afd, handle, mask)
    back.sendto(b"back3", ours.getsockname())
    print(
        f"8. poll 8, then a datagram: completed {drain(port, polls, 1000)}; recv: {try_recv(ours)}"
    )
    polls["9"] = Poll(afd, handle, mask)
    back.sendto(b"back4", ours.getsockname())
    print(
        f"9. poll 9, then a datagram: completed {drain(port, polls, 1000)}; recv: {try_recv(ours)}"
    )
    zero = _overlapped.Overlapped()
    zero.WSARecv(ours.fileno(), 0, 0)
    back.sendto(b"back5", ours.getsockname())
    time.sleep(0.5)
    print(
        "10. a zero-byte overlapped WSARecv, then a datagram: the receive "
        f"{'is still pending' if zero.pending else 'completed'}; recv: {try_recv(ours)}"
    )
    for p in polls.values():
        p.cancel()
    if zero.pending:
        zero.cancel()
    back.close()
    ours.close()
    drain(port, polls, 200)


if __name__ == "__main__":
    main()
