"""The descriptor canary's Windows form (canary.py has the idea and the
filling, which this shares).

What "a freed number" is on Windows: a kernel handle value. A SOCKET is
one; a C runtime descriptor (a file's, a pipe's) stands for one
(msvcrt.get_osfhandle); zloopgo's Windows paths (core/iocp, capi's
Windows files) close SOCKETs, AFD poll handles and the handles of files
and pipes, and a stale use of one (a send, a read, a seek, a second
close, a poll) passes the value. The process's handle table hands a
freed value out again: Wine's server takes the lowest free slot, as a
POSIX kernel takes the lowest free descriptor; Windows' own table
reuses freed entries from a free list before it grows. So the canary
fills freed values as on POSIX, over handle values (multiples of 4 from
4):

- the lowest free value: a handle made (DuplicateHandle of the current
  process) and closed at once, the value the table hands out next (the
  cheap check after every loop iteration: two calls);
- the open values: those GetHandleInformation accepts, from 4 to
  SCAN_PAST values past the highest seen (done only when a value below
  the highest seen is free);
- its canaries: a file (os.open with O_TEMPORARY, deleted at its close):
  its position and bytes, and its identity (volume and file index,
  os.fstat); a TCP loopback socket pair (Windows' socket.socketpair is
  one; made through a listener the canary keeps, so that no transient
  listener's value is freed while it fills): each end's bait counted
  with ioctlsocket(FIONREAD) and peeked, its identity its two addresses;
  a pipe (os.pipe): its bait counted with PeekNamedPipe on the read
  end, both ends' identity the handle being open (an anonymous pipe has
  no file index).

A fill fills the values free when it starts (see fill: Wine's connect
opens and closes a handle, so a pair leaves a value free again).

What it does not know: which value belonged to what, and whether a
handle the process makes and closes on another thread (Go's runtime,
worker threads) took a value while it filled: such a value is left
alone, as a number a thread holds inside open() is on POSIX.
"""

import _winapi
import ctypes
import msvcrt
import os
import select
import socket
import time
from ctypes import wintypes

from . import canary as posix

BAIT = posix.BAIT
FILE_BYTES = posix.FILE_BYTES
# Free values looked for past the highest open one: Wine hands out the
# lowest free slot, so the open values are dense: a gap this long ends them.
SCAN_PAST = 64
FIONREAD = 0x4004667F
# Canaries made for one freed value before the fill gives it up: alone,
# Wine hands a freed value to the next handle made, but a thread that
# makes and closes handles meanwhile (scripts/wine/probe_handle_reuse.py:
# a socket made and closed in a loop on another thread) took it first
# often enough that the first socket made after the close landed on it
# in 6 to 32 of 50 rounds (three runs), and one of the first 7 in all.
LANDING_BOUND = 8

_kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
_kernel32.GetHandleInformation.argtypes = [wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD)]
_kernel32.GetHandleInformation.restype = wintypes.BOOL
_ws2 = ctypes.WinDLL("ws2_32")
_ws2.ioctlsocket.argtypes = [ctypes.c_size_t, ctypes.c_long, ctypes.POINTER(ctypes.c_ulong)]
_ws2.ioctlsocket.restype = ctypes.c_int


def _is_open(value):
    flags = wintypes.DWORD()
    return bool(_kernel32.GetHandleInformation(value, ctypes.byref(flags)))


def lowest_free():
    """The handle value the process's table hands out next."""
    me = _winapi.GetCurrentProcess()
    value = _winapi.DuplicateHandle(me, me, me, 0, False, _winapi.DUPLICATE_SAME_ACCESS)
    _winapi.CloseHandle(value)
    return value


def open_handles():
    """The open handle values."""
    found = set()
    value, end = 4, lowest_free() + SCAN_PAST * 4
    while value < end:
        if _is_open(value):
            found.add(value)
            end = max(end, value + SCAN_PAST * 4)
        value += 4
    return found


def _queued_socket(sock):
    count = ctypes.c_ulong()
    if _ws2.ioctlsocket(sock.fileno(), FIONREAD, ctypes.byref(count)) != 0:
        raise OSError(f"ioctlsocket(FIONREAD) failed on {sock.fileno():#x}")
    return count.value


class Canary(posix.Canary):
    """canary.Canary over handle values (see the module's docstring)."""

    first = 4
    step = 4
    lowest_free = staticmethod(lowest_free)
    open_fds = staticmethod(open_handles)
    is_open = staticmethod(_is_open)

    def __init__(self, order=posix.KINDS, directory=None):
        super().__init__(order, directory)
        # made first, so that it never takes a value a pair is to fill
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()

    def fill(self):
        """As canary.Canary.fill, for the values free when it starts, each
        given up to LANDING_BOUND canaries to land on: a connection Wine
        makes opens and closes a handle of its own (the pair leaves that
        value free again), and another thread (Go's runtime, a worker)
        may take a freed value between two canaries, so filling until
        nothing is free might not end. Each value free at the start is
        counted (tally): `landed` when a canary took it, `taken` when a
        handle not the canary's holds it now (another thread's, which the
        canary cannot watch), `gave_up` when it is still free after the
        bound (left to the next fill)."""
        if self.nothing_freed():
            return
        values = self.open_fds()
        self.high = max(self.high or 0, max(values - self.baseline, default=0))
        free = [v for v in range(self.first, self.high + 1, self.step) if v not in values]
        for value in free:
            for _ in range(LANDING_BOUND):
                if value in values:
                    break
                self._new()
                values = self.open_fds()
        self._count(free, values)
        # what the fill itself left free (a pair's connection opens and
        # closes a handle of its own): files, which leave none, take it
        # now, so that a fill of pairs alone does not leave the next fill
        # a value of its own to fill, and that value is not counted
        self.high = max(self.high, max(values - self.baseline, default=0))
        own = [v for v in range(self.first, self.high + 1, self.step) if v not in values]
        for value in own[:LANDING_BOUND]:
            if value not in free and not self.is_open(value):
                self._new_file()
        self.high = max(self.high, max(self.open_fds() - self.baseline, default=0))

    def _add(self, kind, value, keep, check, identify):
        self._replace(value, posix._Canary(kind, value, keep, check, identify))

    def _new_file(self):
        self.files += 1
        # opened once (no handle made and closed on the way, which would
        # leave a gap of the canary's own); O_TEMPORARY: Windows deletes it
        # at its close (an open file cannot be unlinked there)
        path = os.path.join(self.dir, f"canary{os.getpid()}-{id(self):x}-{self.files}")
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_BINARY | os.O_TEMPORARY | os.O_NOINHERIT
        fd = os.open(path, flags)
        os.write(fd, FILE_BYTES)
        os.lseek(fd, 0, os.SEEK_SET)

        def read_from_start(n):  # no os.pread on Windows; the position is 0
            try:
                return os.read(fd, n)
            finally:
                os.lseek(fd, 0, os.SEEK_SET)

        self._add(
            "file",
            msvcrt.get_osfhandle(fd),
            fd,
            lambda: posix.file_check(fd, read_from_start),
            lambda: posix.file_identity(fd),
        )

    def _new_pipe(self):
        r, w = os.pipe()
        os.write(w, BAIT)
        read_handle = msvcrt.get_osfhandle(r)

        def check():
            n = _winapi.PeekNamedPipe(read_handle, 0)[0]
            return None if n == len(BAIT) else f"its pipe holds {n} bytes, not {len(BAIT)}"

        for fd in (r, w):
            handle = msvcrt.get_osfhandle(fd)

            def identify(handle=handle):
                if not _is_open(handle):
                    raise OSError(f"handle {handle:#x} is not open")
                return handle

            self._add("pipe", handle, fd, check, identify)

    def _new_pair(self):
        # no name lookup (Wine's opens and closes handles of its own)
        a = socket.socket()
        a.connect(self.listener.getsockname())
        b, _ = self.listener.accept()
        a.send(BAIT)
        b.send(BAIT)
        # loopback TCP hands the bytes on a moment later: each end must
        # hold its bait before it is watched
        deadline = time.monotonic() + 5
        while min(_queued_socket(a), _queued_socket(b)) < len(BAIT) and time.monotonic() < deadline:
            select.select([a, b], [], [], 0.01)
        for mine in (a, b):

            def check(mine=mine):
                n = _queued_socket(mine)
                if n != len(BAIT):
                    return f"its socket holds {n} bytes, not {len(BAIT)}"
                got = mine.recv(64, socket.MSG_PEEK)
                return None if got == BAIT else f"its socket holds {got[:16]!r}"

            def identify(mine=mine):
                return (mine.getsockname(), mine.getpeername())

            self._add("stream", mine.fileno(), mine, check, identify)

    def close(self):
        super().close()
        self.listener.close()
