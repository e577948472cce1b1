"""The raw layer: what CPython's buffered classes see as their raw file.

Raw has FileIO's interface and messages but makes no system call while a
method of the file runs: it answers reads from bytes already fetched (its
window), says "not now" for the rest the way a non-blocking stream does
(None from readinto, which the buffered classes handle without losing
data) and records what was asked in `want`; it keeps writes, in order, in
`pending`. A seek that needs the file's end raises Miss. Its owner
(native.py) fetches and sends. Only when it is closed by a finalizer
(not through the awaitable close()) does it send its writes and close the
descriptor itself, as FileIO would.

It knows FileIO's interface; nothing of the engine, of the loop, of
buffering or text.
"""

from __future__ import annotations

import errno
import os
import warnings


class Miss(Exception):
    """Raised by the raw layer where it cannot answer "not now" (a seek
    that needs the file's end); the method fetches and tries again."""


class Raw:
    """What CPython's buffered classes see as their raw file (FileIO's
    interface): answers reads from bytes already fetched (the window), keeps
    writes for the owner to send, and records what it could not answer in
    `want` for the owner to fetch."""

    def __init__(self, fd, name, mode, blksize, pos, seekable, isatty, regular, closefd):
        self.fd = fd
        self.name = name
        self.mode = mode
        self._blksize = blksize
        self.closefd = closefd
        self.pos = pos  # the raw position FileIO would have (seekable files)
        self._seekable = seekable
        self._isatty = isatty
        self.regular = regular
        self.win = b""  # bytes of the file from wstart on (a stream: unread bytes)
        self.wstart = 0
        self.eof = None  # offset of the end of the file, when a read found it
        self.want = None  # (kind, ...) the owner must fetch
        self.eof_hint = 0  # the size the file had when opened
        self.pending = []  # (offset, bytes, pos after) writes, (size, None, None) truncations
        self.short_ok = False  # text mode: a short read is as good as a full one
        self._closed = False
        self.async_close = False  # the owner closes the descriptor itself
        self.append = "a" in mode  # writes go to the end (O_APPEND)
        self.local = False  # on a local file system (closing cannot wait)
        self.append_end = pos  # where the file ends, as far as its writes tell

    # -- FileIO's inquiries
    @property
    def closed(self):
        return self._closed

    def _check_closed(self):
        if self._closed:
            raise ValueError("I/O operation on closed file")

    def readable(self):
        self._check_closed()
        return "r" in self.mode or "+" in self.mode

    def writable(self):
        self._check_closed()
        return "r" not in self.mode or "+" in self.mode

    def seekable(self):
        self._check_closed()
        return self._seekable

    def isatty(self):
        self._check_closed()
        return self._isatty

    def fileno(self):
        self._check_closed()
        return self.fd

    def _espipe(self):
        return OSError(errno.ESPIPE, os.strerror(errno.ESPIPE))

    # -- reading
    def readinto(self, b):
        self._check_closed()
        b = memoryview(b).cast("B")
        n = len(b)
        if not self._seekable:
            if self.win:
                k = min(n, len(self.win))
                b[:k] = self.win[:k]
                self.win = self.win[k:]
                return k
            if self.eof is not None or n == 0:
                return 0
            self.want = ("read", None, n)
            return None
        off = self.pos - self.wstart
        avail = len(self.win) - off if 0 <= off <= len(self.win) else -1
        if avail < 0:
            avail = 0
        elif avail:
            k = min(n, avail)
            if k == n or self.short_ok or (self.eof is not None and self.pos + k >= self.eof):
                b[:k] = self.win[off : off + k]
                self.pos += k
                return k
        if n == 0 or (self.eof is not None and self.pos >= self.eof):
            return 0
        self.want = ("read", self.pos, n)
        return None

    def readall(self):
        self._check_closed()
        if not self._seekable:
            if self.eof is not None:
                data, self.win = self.win, b""
                return data
            self.want = ("readall", None, 0)
            return None
        if self.eof is not None and self.wstart <= self.pos <= self.wstart + len(self.win):
            end = self.eof - self.wstart
            if end == len(self.win):
                data = self.win[self.pos - self.wstart :]
                self.pos = max(self.pos, self.eof)
                return data
        self.want = ("readall", self.pos, 0)
        return None

    def read(self, n=-1):
        if n is None or n < 0:
            return self.readall()
        b = bytearray(n)
        got = self.readinto(b)
        return None if got is None else bytes(b[:got])

    # -- writing
    def write(self, b):
        self._check_closed()
        data = bytes(b)
        offset = self.pos if self._seekable and not self.append else -1
        if self.append:
            # O_APPEND: the write goes to the end of the file, and leaves the
            # descriptor there (its real place is taken when it is sent)
            self.append_end += len(data)
            self.pos = self.append_end
        elif self._seekable:
            self.pos += len(data)
        self.pending.append((offset, data, self.pos))
        self._forget_window()
        return len(data)

    def truncate(self, size=None):
        self._check_closed()
        if size is None:
            if not self._seekable:
                raise self._espipe()
            size = self.pos
        size = size.__index__()
        if size < 0:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        self.pending.append((size, None, None))
        self.append_end = size
        self._forget_window()
        return size

    def flush(self):
        if self._closed:  # IOBase.flush's words, not FileIO's
            raise ValueError("I/O operation on closed file.")

    def _forget_window(self):
        if self._seekable:
            self.win = b""
            self.wstart = self.pos
        self.eof = None

    # -- positioning
    def seek(self, offset, whence=0):
        self._check_closed()
        if not self._seekable:
            raise self._espipe()
        offset = offset.__index__()
        if whence == 0:
            new = offset
        elif whence == 1:
            new = self.pos + offset
        else:
            answer = self.want
            if (
                answer is not None
                and answer[0] == "seek-answer"
                and answer[1:3]
                == (
                    offset,
                    whence,
                )
            ):
                self.want = None
                new = answer[3]
                if isinstance(new, OSError):
                    raise new
            else:
                self.want = ("seek", offset, whence)
                raise Miss()
        if new < 0:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        self.pos = new
        return new

    def tell(self):
        self._check_closed()
        if not self._seekable:
            raise self._espipe()
        return self.pos

    # -- closing
    def close(self):
        if self._closed:
            return
        self._closed = True
        if not self.async_close:
            # Not through the awaitable close(): a finalizer, as open()'s
            # file object closes itself when collected. It does what
            # FileIO would, here and now.
            self._close_now()

    def _close_now(self):
        try:
            _send_now(self)
        finally:
            if self.closefd and self.fd >= 0:
                fd, self.fd = self.fd, -1
                os.close(fd)

    def _dealloc_warn(self, source):
        if self.fd >= 0 and self.closefd:
            warnings.warn(f"unclosed file {source!r}", ResourceWarning, stacklevel=2, source=source)


def _send_now(raw):
    """Sends raw's kept writes synchronously (finalizers only)."""
    pending, raw.pending = raw.pending, []
    for offset, data, _ in pending:
        if data is None:
            os.ftruncate(raw.fd, offset)
        elif offset < 0:
            os.write(raw.fd, data)
        elif hasattr(os, "pwrite"):
            os.pwrite(raw.fd, data, offset)
        else:
            # Windows: no pwrite; nothing else uses the descriptor now
            os.lseek(raw.fd, offset, os.SEEK_SET)
            while data:
                data = data[os.write(raw.fd, data) :]


def fileio_mode(reading, writing, appending, creating, updating):
    # FileIO's mode string (mode_string in Modules/_io/fileio.c)
    if creating:
        return "xb+" if updating else "xb"
    if appending:
        return "ab+" if updating else "ab"
    if reading:
        return "rb+" if updating else "rb"
    return "rb+" if updating else "wb"
