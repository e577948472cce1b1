"""The other end of each connection of a program, driven synchronously by
the runner between loop iterations and from inside callbacks: a raw
non-blocking socket (RawPeer) or a TLS server over one (TlsPeer, an
ssl.SSLObject with memory BIOs, so that the test, not a thread, decides
when it reads and writes).

A peer reads everything that arrives while it is "reading" (the runner
calls autoread() after every loop iteration) and nothing while it is
stopped; recv(n) is one non-blocking read of at most n bytes. What it
receives is kept as one stream; the runner decides what to record.

Also here: how the runner waits until loopback TCP has delivered what was
sent (tcp_quiet), since a send on TCP reaches the other socket through
the network stack, not at once as on a Unix socket. On Linux it reads
TCP_INFO (what each end sent and received, its state) and TIOCOUTQ.

On Windows (under Wine: scripts/windows long-tests) neither exists:
there is no SIO_TCP_INFO under Wine 8 (WSAEOPNOTSUPP) and no count of
what a socket has yet to send. There tcp_quiet waits instead until what
both ends show of what has arrived (the bytes queued at each end,
ioctlsocket(FIONREAD), and whether select() calls each readable: a FIN or
a reset with nothing queued) stays the same over WINDOWS_STABLE probes in
a row, and, after the peer closed, until the loop's end shows the FIN or
reset. What it does not know: bytes the loop's socket holds back for a
window update, or that arrive after the probes ran (loopback is
synchronous but for that and a loaded machine's deferred network work),
and a FIN or reset behind queued bytes. A late arrival shows as a
difference that does not come back when the program is run again, which
the test does not count (search.run_pair).
"""

import contextlib
import errno
import select
import socket
import ssl
import struct
import sys
import time

WINDOWS = sys.platform == "win32"
if WINDOWS:
    import ctypes

    _ws2 = ctypes.WinDLL("ws2_32")
    _ws2.ioctlsocket.argtypes = [ctypes.c_size_t, ctypes.c_long, ctypes.POINTER(ctypes.c_ulong)]
    _ws2.ioctlsocket.restype = ctypes.c_int
    _FIONREAD = 0x4004667F
else:
    import fcntl
    import termios

# The nets a platform has, and those that ride on loopback TCP (compared
# exactly only while a connection cannot have filled its socket: runner).
# Windows' CPython has no AF_UNIX: no "unix" net, and socket.socketpair()
# is a loopback TCP pair there, so "tls" rides on TCP.
NETS = ("tcp", "tls") if WINDOWS else ("unix", "tcp", "tls")
TCP_NETS = ("tcp", "tls") if WINDOWS else ("tcp",)

# Windows: probes that must agree in a row before tcp_quiet takes the
# connection as quiet. Back to back, yielding the processor between them
# (a probe takes a few hundred microseconds under Wine, and its shortest
# sleep about 1.5 ms, which made sleeping probes most of a program's
# time): settling's QUIET iterations, whose fingerprint holds the same
# counts, watch longer, so after a loop iteration one probe more is
# enough, and counts alone (a select() takes 1.5 ms under Wine, and a
# BufferedProtocol whose get_buffer() is one byte reads 4,096 bytes in
# 4,096 iterations: 25 s a program with four probes each); a FIN that
# arrives while settling shows at the peer's next read there.
WINDOWS_STABLE = 4
WINDOWS_SETTLING = 1

# struct tcp_info (linux/tcp.h): offsets of the fields tcp_quiet reads.
_STATE, _NOTSENT, _BYTES_RECEIVED, _BYTES_SENT, _BYTES_RETRANS = 0, 144, 128, 200, 208
_ESTABLISHED, _FIN_WAIT1, _CLOSE, _LAST_ACK, _CLOSING = 1, 4, 7, 9, 11
_FIN_RECEIVED = {8, 9, 6, 11, 7}  # CLOSE_WAIT, LAST_ACK, TIME_WAIT, CLOSING, CLOSE


def fionread(sock):
    """Bytes waiting to be read on `sock`, or -1 once it is closed."""
    if sock.fileno() < 0:
        return -1
    if WINDOWS:
        count = ctypes.c_ulong()
        if _ws2.ioctlsocket(sock.fileno(), _FIONREAD, ctypes.byref(count)) != 0:
            return -1
        return count.value
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return -1
    return struct.unpack("i", raw)[0]


def outq(sock):
    """Bytes the kernel still holds to send on `sock` (TCP: not yet
    acknowledged), or 0 once it is closed. Windows has no such count: 0,
    tcp_quiet's stable probes stand in for it (see the module's
    docstring)."""
    if sock.fileno() < 0 or WINDOWS:
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except OSError:
        return 0
    return struct.unpack("i", raw)[0]


def _tcp_info(sock):
    if sock.fileno() < 0 or WINDOWS:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    except OSError:
        return None
    if len(raw) < 216:
        return None
    return {
        "state": raw[_STATE],
        "notsent": struct.unpack_from("I", raw, _NOTSENT)[0],
        "received": struct.unpack_from("Q", raw, _BYTES_RECEIVED)[0],
        "sent": struct.unpack_from("Q", raw, _BYTES_SENT)[0]
        - struct.unpack_from("Q", raw, _BYTES_RETRANS)[0],
    }


def _delivered(src, dst):
    """Everything `src` transmitted has reached `dst` (its data, and the
    FIN it sent, if one is in flight)."""
    a, b = _tcp_info(src), _tcp_info(dst)
    if a is None or b is None:
        return True
    if b["received"] < a["sent"]:
        return False
    if a["state"] in (_FIN_WAIT1, _LAST_ACK, _CLOSING) and a["notsent"] == 0:
        return b["state"] in _FIN_RECEIVED
    return True


def tcp_sent(sock):
    """Bytes `sock` has transmitted (0 once it is closed)."""
    info = _tcp_info(sock)
    return info["sent"] if info else 0


def tcp_quiet(ours, theirs, peer_closed, expect_reset, timeout=1.0, settling=False):
    """Waits (at most `timeout`) until loopback TCP has carried everything
    between the loop's socket and the peer's, both ways: data, FINs, and
    the reset the loop's socket must see (the peer reset it, or the loop
    sent data to a peer that had closed). Returns False on a timeout.
    `settling`: the wait after a loop iteration (Windows: fewer probes)."""
    if WINDOWS:
        probes = WINDOWS_SETTLING if settling else WINDOWS_STABLE
        return _quiet_by_probes(ours, theirs, peer_closed, timeout, probes, not settling)
    deadline = time.monotonic() + timeout
    while True:
        if peer_closed:
            info = _tcp_info(ours)
            want = {_CLOSE} if expect_reset else _FIN_RECEIVED
            ok = info is None or info["state"] in want
        else:
            ok = _delivered(ours, theirs) and _delivered(theirs, ours)
        if ok:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0002)


def _arrived(ours, theirs, readable):
    """What the two ends show of what has reached them: the bytes queued
    at each, and (`readable`) whether select() calls each readable."""
    socks = [s for s in (ours, theirs) if s.fileno() >= 0] if readable else []
    ready = select.select(socks, [], [], 0)[0] if socks else []
    return fionread(ours), fionread(theirs), ours in ready, theirs in ready


def _quiet_by_probes(ours, theirs, peer_closed, timeout, probes, readable):
    """tcp_quiet on Windows (see the module's docstring)."""
    deadline = time.monotonic() + timeout
    last, same = None, 0
    while True:
        state = _arrived(ours, theirs, readable or peer_closed)
        # the peer closed: the loop's end shows its FIN or reset
        # (readable), unless bytes queued before it hide it
        shown = not peer_closed or ours.fileno() < 0 or state[0] != 0 or state[2]
        same = same + 1 if state == last and shown else 0
        last = state
        if same >= probes:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0)


def set_buffers(sock, size):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


def _name(exc):
    return type(exc).__name__


class RawPeer:
    """The raw socket at the other end of connection `t`."""

    def __init__(self, sock, net):
        self.sock = sock
        self.net = net
        self.reading = True
        self.stream = bytearray()  # everything received, in order
        self.eof = False  # recv() returned b""
        self.error = None  # the exception a recv() raised, if one did
        self.closed = False
        self.reset_sent = False
        self.loop_sent_at_close = 0  # TCP: what the loop had sent when the peer closed
        self.sent = 0
        sock.setblocking(False)

    # -- reading

    def _recv_raw(self, n):
        """One recv of at most n bytes: bytes (b"" at EOF), None when
        nothing is there, or the exception."""
        if self.closed:
            return OSError(errno.EBADF, "peer closed")
        try:
            data = self.sock.recv(n)
        except BlockingIOError:
            return None
        except OSError as exc:
            return exc
        return data

    def _take(self, n):
        """Reads at most n bytes of the application stream; returns what
        came, or None / b"" / an exception as _recv_raw."""
        got = self._recv_raw(n)
        if isinstance(got, bytes):
            if got:
                self.stream += got
            else:
                self.eof = True
        elif isinstance(got, OSError) and not self.closed:
            self.error = _name(got)
        return got

    def recv(self, n):
        return self._take(n)

    def autoread(self):
        """Reads everything there is, if reading. True if anything changed."""
        changed = False
        while self.reading and not self.closed and not self.eof and self.error is None:
            got = self._take(1 << 20)
            if got is None:
                break
            changed = True
            if not isinstance(got, bytes) or not got:
                break
        return changed

    def pump(self):
        """Sends what waits to be sent (TLS); nothing for a raw socket."""
        return False

    def quickack(self):
        """TCP: acknowledge what was received now, not after the
        delayed-ACK timer (Linux's TCP_QUICKACK; Windows has none)."""
        if self.net == "tcp" and not self.closed and not WINDOWS:
            with contextlib.suppress(OSError):
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)

    # -- writing and closing

    def send(self, data):
        """Sends data without blocking: how many bytes went, or the exception."""
        if self.closed:
            return OSError(errno.EBADF, "peer closed")
        try:
            n = self.sock.send(data)
        except BlockingIOError:
            n = 0
        except OSError as exc:
            return exc
        self.sent += n
        return n

    def shut_wr(self):
        if self.closed:
            return OSError(errno.EBADF, "peer closed")
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            return exc
        return None

    def reset(self):
        """Close with SO_LINGER 0: a TCP reset. A Unix socket has no reset:
        closing it with unread data makes the other end's next read fail
        with ECONNRESET; without, it reads EOF."""
        if self.closed:
            return OSError(errno.EBADF, "peer closed")
        # struct linger: two ints on Linux, two u_shorts on Windows
        linger = struct.pack("HH" if WINDOWS else "ii", 1, 0)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        if self.net != "unix":
            self.reset_sent = True
        return self.close()

    def close(self):
        if self.closed:
            return OSError(errno.EBADF, "peer closed")
        if self.net != "unix" and fionread(self.sock) > 0:
            self.reset_sent = True  # TCP resets a close with unread data
        self.sock.close()
        self.closed = True
        return None

    def inq(self):
        return fionread(self.sock)


class TlsPeer(RawPeer):
    """A TLS server over the raw peer socket. Its stream is the application
    data it decrypted; it answers the loop's close_notify with its own, as
    ssl.SSLSocket.unwrap() would."""

    def __init__(self, sock, net, context):
        super().__init__(sock, net)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.pending = bytearray()  # encrypted bytes the socket did not take yet
        self.handshaken = False
        self.notified = False  # close_notify received

    def handshake(self):
        """One handshake step; True once it is done."""
        if not self.handshaken:
            self._feed(self._recv_raw(1 << 20))
            try:
                self.obj.do_handshake()
                self.handshaken = True
            except ssl.SSLWantReadError:
                pass
        self.pump()
        return self.handshaken

    def _feed(self, raw):
        if isinstance(raw, bytes):
            if raw:
                self.incoming.write(raw)
            else:
                self.incoming.write_eof()
        return raw

    def _decrypt(self):
        """Application bytes decrypted from what was fed, or an exception."""
        got = bytearray()
        while self.handshaken and not self.notified:
            try:
                chunk = self.obj.read(1 << 20)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.notified = True
                self.eof = True
                with contextlib.suppress(ssl.SSLError):
                    self.obj.unwrap()
                self.pump()
                break
            except (ssl.SSLError, OSError) as exc:
                self.error = _name(exc)
                return exc
            if not chunk:
                self.eof = True
                break
            got += chunk
        self.stream += got
        return bytes(got)

    def _take(self, n):
        raw = self._recv_raw(n)
        if isinstance(raw, OSError):
            if not self.closed:
                self.error = _name(raw)
            return raw
        self._feed(raw)
        got = self._decrypt()
        if raw is None and not got:
            return None
        if raw == b"" and not got:
            self.eof = True
        return got

    def pump(self):
        if self.closed:
            return False
        self.pending += self.outgoing.read()
        if not self.pending:
            return False
        try:
            n = self.sock.send(self.pending)
        except BlockingIOError:
            return False
        except OSError:
            self.pending.clear()
            return False
        del self.pending[:n]
        return n > 0

    def send(self, data):
        if self.closed:
            return OSError(errno.EBADF, "peer closed")
        try:
            self.obj.write(data)
        except ssl.SSLError as exc:
            return exc
        self.pump()
        self.sent += len(data)
        return len(data)

    def shut_wr(self):
        if self.closed:
            return OSError(errno.EBADF, "peer closed")
        try:
            self.obj.unwrap()
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError as exc:
            return exc
        self.pump()
        return None
