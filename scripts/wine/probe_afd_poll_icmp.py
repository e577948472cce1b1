"""A probe, not a test: what an AFD poll (IOCTL_AFD_POLL on a \\Device\\Afd
helper handle attached to a completion port, as core/iocp submits it)
reports for a connected UDP socket once a datagram it sent earned an
ICMP port unreachable, and whether a poll submitted after that still
completes when a datagram arrives.

    python scripts/wine/probe_afd_poll_icmp.py

Windows only; plain sockets and ctypes, no event loop. Steps, each
printed with what the poll's completion said (its status and AFD
events, or "none within 1 s"):

1. a poll for receive (and the error bits core/iocp always asks) on a
   connected UDP socket; a send to the closed port;
2. recv() once (what the error-pending socket answers);
3. a second poll; a socket bound on the closed port sends a datagram;
4. recv() once more; select() on the socket.

Under Wine 8 (2026-12-07): poll 1 completes with AFD_POLL_CONNECT_FAIL
(per-handle status 0xc0000236, STATUS_CONNECTION_REFUSED), recv()
answers WSAEWOULDBLOCK, poll 2 does not complete within a second though
a datagram arrived, while select() calls the socket readable and recv()
returns the datagram; a poll submitted after that completes again. So
an event loop that waits on AFD polls alone (zloopgo's core/iocp)
never hears of a connected UDP socket's datagrams again once it has
met an ICMP error there. On Windows (not run here) step 1 should
report AFD_POLL_RECEIVE and recv() WSAECONNRESET, after which the
socket is an ordinary one again. It knows nothing of zloopgo.
"""

import _overlapped
import ctypes
import select
import socket
import sys
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

    def __init__(self, afd, handle, mask):
        self.iosb = IO_STATUS_BLOCK(STATUS_PENDING, 0)
        self.info = AFD_POLL_INFO(0x7FFFFFFFFFFFFFFF, 1, 0, handle, mask, 0)
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


def wait(port, what):
    got = _overlapped.GetQueuedCompletionStatus(port, 1000)
    if got is None:
        return f"{what}: none within 1 s"
    return f"{what}: completed"


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


def main():
    port = _overlapped.CreateIoCompletionPort(_overlapped.INVALID_HANDLE_VALUE, 0, 0, 0)
    afd = open_afd(port)
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

    first = Poll(afd, handle, mask)
    print(f"1. poll submitted ({first.submitted:#x}); send: {ours.send(b'x')} byte")
    print("   " + wait(port, "poll 1"), "->", describe(first))
    print(f"2. recv: {try_recv(ours)}")
    second = Poll(afd, handle, mask)
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    back.bind(closed)
    back.sendto(b"back", ours.getsockname())
    print(f"3. poll 2 submitted ({second.submitted:#x}); a datagram sent from the closed port")
    print("   " + wait(port, "poll 2"), "->", describe(second))
    readable = select.select([ours], [], [], 0)[0]
    print(f"4. select: {'readable' if readable else 'not readable'}; recv: {try_recv(ours)}")
    third = Poll(afd, handle, mask)
    back.sendto(b"back2", ours.getsockname())
    print(f"5. poll 3 submitted ({third.submitted:#x}) after that recv; another datagram")
    print("   " + wait(port, "poll 3"), "->", describe(third))
    print(f"6. recv: {try_recv(ours)}")
    back.close()
    ours.close()
    wait(port, "drain")
    wait(port, "drain")


if __name__ == "__main__":
    main()
