"""zloopgo.open(): asynchronous files with open()'s semantics.

``async with zloopgo.open(path, "rb") as f: data = await f.read()`` gives
the object open() would give, with every method that can touch the disk
made awaitable (aiofiles' interface), plus ``pread``/``pwrite``.

How it stays exactly open(): the object open() builds is built here too,
from CPython's own io classes (BufferedReader, BufferedWriter,
BufferedRandom; text mode adds _pyio's TextIOWrapper, the stdlib's own
Python version of it, whose state can be saved and restored, made to
behave as the C one where the two part: _text_class). Only the
raw layer under them is ours (_Raw): it answers from bytes already
fetched, and when the io class asks for bytes it does not have, it says
"not now" the way a non-blocking stream does (None from readinto, which
CPython's buffered classes are built to handle without losing data). The
awaitable method then fetches those bytes off the loop thread and lets the
io class go on. Writes the io class makes to the raw layer are kept in
order and sent before the method returns (and before any read). So every
result, position, buffer state and exception is the io classes' own.

On a zloopgo loop the fetching and sending are file operations of the
engine (capi/files.c: Go-managed worker threads, completions through the
engine's inbox; a read of cached pages completes at once with
preadv2(RWF_NOWAIT)). On any other loop, and for what the native path does
not cover (a file descriptor instead of a name, an opener, unbuffered
files), the real open() object is used with each call in the loop's
default executor. Calls on one file run one at a time, in the order made.

It knows the io classes' public behaviour and _engine.file_op; nothing of
Go or of how the engine schedules.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import contextlib
import errno
import io
import operator
import os
import stat as stat_module
import sys
import warnings

# file_op's operations (capi/files.c)
OP_OPEN, OP_PREAD, OP_READALL, OP_PWRITE, OP_LSEEK, OP_CLOSE = 1, 2, 3, 4, 5, 6
OP_FTRUNCATE, OP_FSYNC, OP_FSTAT, OP_STAT, OP_RENAME, OP_UNLINK = 7, 8, 9, 10, 11, 12
OP_RMDIR, OP_MKDIR, OP_LISTDIR = 13, 14, 15

# Reads asked of the raw layer are fetched with this much more, so that
# the buffer refill that usually follows a direct read is in hand too.
_FETCH_MIN = 64 * 1024
# Calls completed without waiting (bytes already cached) before one yields
# to the loop anyway, so that a tight read loop does not starve timers.
_YIELD_EVERY = 8


def _native_engine(loop):
    """The _engine module when loop is a zloopgo loop, else None."""
    mod = sys.modules.get("zloopgo._engine")
    if mod is not None and isinstance(loop, mod.LoopCore):
        return mod
    return None


async def _op(
    loop, engine, code, fd=-1, n=0, offset=0, obj=None, obj2=None, mode=0, name=None, name2=None
):
    fut = loop.create_future()
    engine.file_op(loop, fut, code, fd, n, offset, obj, obj2, mode, False, name, name2, None)
    return await fut


class _Miss(Exception):
    """Raised by the raw layer where it cannot answer "not now" (a seek
    that needs the file's end); the method fetches and tries again."""


class _Raw:
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
                raise _Miss()
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
        else:
            os.pwrite(raw.fd, data, offset)


def _fileio_mode(reading, writing, appending, creating, updating):
    # FileIO's mode string (mode_string in Modules/_io/fileio.c)
    if creating:
        return "xb+" if updating else "xb"
    if appending:
        return "ab+" if updating else "ab"
    if reading:
        return "rb+" if updating else "rb"
    return "rb+" if updating else "wb"


def _buffer_size(blksize):
    if sys.version_info >= (3, 14):
        return max(min(blksize, 8192 * 1024), io.DEFAULT_BUFFER_SIZE)
    return blksize if blksize > 1 else io.DEFAULT_BUFFER_SIZE


# statfs f_type of local file systems, on which closing a file opened for
# reading only cannot wait for anything (it is done on the loop thread):
# ext2/3/4, XFS, Btrfs, tmpfs, overlayfs, F2FS, ramfs.
_LOCAL_FS = frozenset(
    (0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x794C7630, 0xF2F52010, 0x858458F6)
)


class _Descriptor:
    """Owns a descriptor the open operation made until _open takes it (a
    coroutine whose loop closed before it resumed never does)."""

    __slots__ = ("fd",)

    def __init__(self, fd):
        self.fd = fd

    def take(self):
        fd, self.fd = self.fd, -1
        return fd

    def __del__(self):
        if self.fd >= 0:
            os.close(self.fd)


class _Probe(Exception):
    pass


def _probe_opener(path, flags):
    raise _Probe(flags)


# What _open_flags found for argument sets that passed, keyed by them (the
# path aside): a dict written under the GIL, the same for every loop.
_flags_cache = {}


def _open_flags(file, mode, buffering, encoding, errors, newline, closefd):
    """open()'s own checks of its arguments, in its order and with its
    messages (io.open itself, stopped by an opener just before the system
    call), and the flags FileIO would pass to open(2). A path that is a
    str or bytes without a NUL passes them as any other such path does, so
    the flags found for the other arguments are kept."""
    plain = (type(file) is str and "\0" not in file) or (type(file) is bytes and b"\0" not in file)
    key = (
        (mode, buffering, encoding, errors, newline, closefd) if plain and buffering != 1 else None
    )
    if key is not None:
        try:
            return _flags_cache[key]
        except (KeyError, TypeError):
            pass
    try:
        builtins.open(file, mode, buffering, encoding, errors, newline, closefd, _probe_opener)  # noqa: SIM115
    except _Probe as probe:
        flags = probe.args[0]
        if key is not None and len(_flags_cache) < 256:
            with contextlib.suppress(TypeError):  # an argument that is not hashable
                _flags_cache[key] = flags
        return flags
    raise AssertionError("io.open did not reach its opener")  # pragma: no cover


class _Turns:
    """Calls on one file, one at a time, in the order made. A call that was
    cancelled while a worker still has its operation keeps its turn until
    the worker is done (NativeFile._done, ExecutorFile._run)."""

    __slots__ = ("busy", "waiters")

    def __init__(self):
        self.busy = False
        self.waiters = collections.deque()

    async def wait(self, loop):
        fut = loop.create_future()
        self.waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # the turn was handed to us: pass it on
            elif fut in self.waiters:
                self.waiters.remove(fut)
            raise

    def release(self):
        while self.waiters:
            fut = self.waiters.popleft()
            if fut.get_loop().is_closed():
                continue  # a loop closed with calls waiting: they never run
            if not fut.done():
                fut.set_result(None)  # busy stays True: the turn passes on
                return
        self.busy = False


class _Base:
    """What both kinds of file (native, executor) share: the context
    manager, iteration, and the attributes that need no I/O."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def __aiter__(self):
        return self

    async def __anext__(self):
        line = await self.readline()
        if not line:
            raise StopAsyncIteration
        return line

    def __repr__(self):
        return f"<zloopgo file {self._file!r}>"

    # attributes of the io object, read without I/O
    @property
    def name(self):
        return self._file.name

    @property
    def mode(self):
        return self._file.mode

    @property
    def closed(self):
        return self._file.closed

    def fileno(self):
        return self._file.fileno()

    def readable(self):
        return self._file.readable()

    def writable(self):
        return self._file.writable()

    def seekable(self):
        return self._file.seekable()

    def isatty(self):
        return self._file.isatty()

    def __getattr__(self, name):
        # encoding, errors, newlines, line_buffering, raw, closefd, ...
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._file, name)


class NativeFile(_Base):
    """A file whose io object runs on the loop thread over a _Raw layer, the
    raw operations done by the engine's file workers."""

    def __getattr__(self, name):
        # The io objects under the file answer only from bytes already
        # fetched: called directly, they would return None or stop short.
        if name in ("raw", "buffer", "detach"):
            raise AttributeError(
                f"zloopgo's file has no {name!r}: its io objects read only what the "
                "awaitable methods fetched"
            )
        return super().__getattr__(name)

    def __init__(self, loop, engine, raw, buffered, text=None):
        self._loop = loop
        self._engine = engine
        self._raw = raw
        self._buffered = buffered
        self._file = text if text is not None else buffered
        self._text = text
        self._turns = _Turns()
        self._inline = raw.regular  # RWF_NOWAIT reads worth trying
        self._streak = 0
        self._rb = text is None and type(buffered) is io.BufferedReader and raw.regular
        self._bufsize = io.DEFAULT_BUFFER_SIZE  # set by _open to the buffer's size
        self._holder = None  # a task that keeps the turn after its caller was cancelled
        # An operation owns the descriptor until its worker is done with it,
        # whatever happened to its caller: operations whose caller was
        # cancelled and whose worker is not done yet, plus holders; the turn
        # passes on (and so close() can run) only once this is back to 0.
        self._unfinished = 0
        self._release_wanted = False  # the call ended while _unfinished > 0
        # given to every operation (file_op's holder): it keeps the file,
        # hence its descriptor, alive while a worker may use the number
        self._dropped = self._dropped_done
        self._stale = False  # the io object's position lags raw.pos (see _sync)
        self._updating = type(buffered) is io.BufferedRandom

    # -- the turn and the raw operations
    async def _begin(self):
        if self._turns.busy:
            await self._turns.wait(self._loop)
        self._turns.busy = True
        raw = self._raw
        if raw._seekable:
            raw.eof = None  # what was found at the end may have grown since
        if self._stale:
            self._sync()

    def _sync(self):
        # Direct reads moved the raw position past an empty buffer; the io
        # object learns it before it is used (a seek within nothing).
        self._stale = False
        if not self._raw.closed:
            self._buffered.seek(self._raw.pos)

    async def _call(self, code, fd, n=0, offset=0, obj=None, name=None):
        fut = self._loop.create_future()
        self._engine.file_op(
            self._loop, fut, code, fd, n, offset, obj, None, 0, False, name, None, self._dropped
        )
        return await self._wait(fut)

    async def _wait(self, fut):
        """The result of an operation's future. If the caller is cancelled
        meanwhile, the future is (the worker goes on): the operation still
        owns the descriptor, and the turn waits for it (_dropped_done)."""
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.cancelled():
                self._unfinished += 1
            raise

    def _dropped_done(self, value):
        # capi/files.c: an operation whose future was cancelled is done (this
        # may come before _wait counted it: the count may go below 0 for a
        # moment, and the turn passes when both have happened)
        self._unfinished -= 1
        self._release_if_done()

    def _release_if_done(self):
        if self._release_wanted and self._unfinished == 0:
            self._release_wanted = False
            self._turns.release()

    async def _read_at(self, code, n, offset):
        """n bytes at offset (a stream: -1), at once when cached."""
        if self._inline and offset >= 0:
            r = self._engine.file_op(
                self._loop,
                None,
                code,
                self._raw.fd,
                n,
                offset,
                None,
                None,
                0,
                True,
                None,
                None,
                self._dropped,
            )
            if r.__class__ is bytes:
                self._streak += 1
                if self._streak >= _YIELD_EVERY:
                    self._streak = 0
                    await asyncio.sleep(0)  # cached reads must not starve the loop
                return r
            if r.__class__ is not int:
                self._streak = 0
                return await self._wait(r)
            self._inline = False  # -2: this file cannot be read without blocking
        return await self._call(code, self._raw.fd, n, offset)

    async def _send(self):
        """Sends the writes the io object made, in order."""
        raw = self._raw
        while raw.pending:
            offset, data, after = raw.pending.pop(0)
            if data is None:
                await self._call(OP_FTRUNCATE, raw.fd, 0, offset)
            elif offset < 0 and raw._seekable:
                # append mode: the position is where the write ended (unless
                # the io object moved it since)
                self._append_end(await self._call(OP_PWRITE, raw.fd, 1, offset, data), after)
            else:
                await self._call(OP_PWRITE, raw.fd, 0, offset, data)

    def _append_end(self, end, after):
        # an append-mode write ended at `end`: the position is there, unless
        # the io object moved it since it predicted `after`
        raw = self._raw
        if raw.pos == after:
            raw.pos = end
        if raw.append_end == after:
            raw.append_end = end

    def _appended(self, fut, after):
        if not fut.cancelled() and fut.exception() is None:
            self._append_end(fut.result(), after)

    async def _fetch(self):
        """Fetches what the raw layer was asked for and did not have."""
        raw = self._raw
        want, raw.want = raw.want, None
        await self._send()
        kind = want[0]
        if kind == "tell":
            return
        if kind == "seek":
            _, offset, whence = want
            try:
                answer = await self._call(OP_LSEEK, raw.fd, whence, offset)
            except OSError as exc:
                answer = exc
            raw.want = ("seek-answer", offset, whence, answer)
            return
        if not raw._seekable:
            if kind == "readall":
                parts = [raw.win]
                while True:
                    data = await self._call(OP_PREAD, raw.fd, _FETCH_MIN, -1)
                    if not data:
                        break
                    parts.append(data)
                raw.win = b"".join(parts)
                raw.eof = 0
            else:
                data = await self._call(OP_PREAD, raw.fd, want[2], -1)
                if data:
                    raw.win += data
                else:
                    raw.eof = 0
            return
        pos = want[1]
        end = raw.wstart + len(raw.win)
        keep = raw.win[pos - raw.wstart :] if raw.wstart <= pos <= end else b""
        start = pos + len(keep)
        if kind == "readall":
            parts = [keep]
            size = max(_FETCH_MIN, raw.eof_hint - start + 1 if raw.regular else 0)
            while True:
                data = await self._read_at(OP_READALL, size, start)
                parts.append(data)
                start += len(data)
                if len(data) < size:
                    break
                size *= 2
            raw.win = b"".join(parts)
            raw.wstart = pos
            raw.eof = start
            return
        size = max(want[2] - len(keep) + self._bufsize, _FETCH_MIN)
        data = await self._read_at(OP_PREAD, size, start)
        raw.win = keep + data if keep else data
        raw.wstart = pos
        if len(data) < size and raw.regular:
            raw.eof = start + len(data)

    async def _run(self, method, *args):
        """Runs an io method until the raw layer had all it needed, then
        sends its writes. For methods whose partial result a retry would
        lose, the caller uses its own loop instead."""
        raw = self._raw
        while True:
            try:
                result = method(*args)
            except _Miss:
                await self._fetch()
                continue
            if raw.want is not None and raw.want[0] != "seek-answer":
                await self._fetch()
                continue
            if raw.pending:
                await self._send()
            return result

    def _done(self):
        """The end of a call: its turn passes on, once every operation it
        started is done with the descriptor."""
        if self._holder is None and not self._unfinished:
            self._turns.release()  # the common case, kept short
            return
        holder, self._holder = self._holder, None
        if holder is not None:
            self._unfinished += 1
            holder.add_done_callback(self._release_after)
        if self._unfinished:
            self._release_wanted = True
        else:
            self._turns.release()

    def _release_after(self, task):
        if not task.cancelled():
            task.exception()  # retrieved: the cancelled caller cannot see it
        self._unfinished -= 1
        self._release_if_done()

    # -- reading
    async def read(self, size=-1):
        """open()'s read(size). Cancelled: nothing was consumed (the
        position is where it was), except on a stream that cannot seek,
        where bytes already taken are dropped."""
        if size.__class__ is not int and self._buffered.__class__ is not io.BufferedWriter:
            # converted once, as open()'s object does (a fetch re-runs the io
            # call); a BufferedWriter's read raises without converting
            size = _ssize(size)
        turns = self._turns
        if turns.busy:
            await turns.wait(self._loop)
        turns.busy = True
        try:
            raw = self._raw
            raw.eof = None
            b = self._buffered
            if (
                self._rb
                and type(size) is int
                and not raw.closed
                and (self._stale or raw.pos == b.tell())
            ):
                if self._inline and size > 0 and size % self._bufsize == 0:
                    # the common case, a whole number of buffers from the
                    # page cache: done here, in the bytes returned
                    r = self._engine.file_op(
                        self._loop,
                        None,
                        OP_PREAD,
                        raw.fd,
                        size,
                        raw.pos,
                        None,
                        None,
                        0,
                        True,
                        None,
                        None,
                        self._dropped,
                    )
                    if r.__class__ is bytes:
                        raw.pos += len(r)
                        raw.wstart = raw.pos
                        raw.win = b""
                        self._stale = True
                        self._streak += 1
                        if self._streak >= _YIELD_EVERY:
                            self._streak = 0
                            await asyncio.sleep(0)  # cached reads must not starve the loop
                        return r
                    if r.__class__ is int:
                        self._inline = False
                    else:
                        self._streak = 0
                        start = raw.pos
                        r = await self._wait(r)
                        raw.pos = start + len(r)
                        raw.wstart = raw.pos
                        raw.win = b""
                        self._stale = True
                        return r
                if size < 0:
                    return await self._read_direct(-1)
                if size % self._bufsize == 0 and size > 0:
                    return await self._read_direct(size)
            if self._stale:
                self._sync()
            if self._text is not None:
                return await self._text_call(self._text.read, size)
            return await self._read_generic(b.read, size)
        finally:
            # _done's common case, here without a call: read() is the hot
            # path, and every attribute of a NativeFile is looked up the
            # slow way (its __getattr__ keeps CPython from specializing)
            if self._holder is None and not self._unfinished:
                turns.release()
            else:
                self._done()

    async def _read_direct(self, size):
        # The buffer is empty and open()'s BufferedReader would read `size`
        # bytes (a multiple of its buffer size), or everything, straight
        # from the raw file into the result, leaving its buffer empty: the
        # bytes land in the result here too.
        raw = self._raw
        start = raw.pos
        if size < 0:
            parts = []
            want = max(raw.eof_hint - start, 0) + 1
            pos = start
            while True:
                data = await self._read_at(OP_READALL, want, pos)
                parts.append(data)
                pos += len(data)
                if len(data) < want:
                    break
                want = max(want * 2, _FETCH_MIN)
            data = parts[0] if len(parts) == 1 else b"".join(parts)
        else:
            data = await self._read_at(OP_PREAD, size, start)
        raw.pos = start + len(data)
        raw.win, raw.wstart = b"", raw.pos
        self._stale = True  # the io object is told before its next use (_sync)
        return data

    async def _read_generic(self, method, size):
        raw = self._raw
        start = raw.pos if raw._seekable else None
        parts = []
        try:
            while True:
                try:
                    r = method(size)
                except _Miss:  # the io object had to learn where it is first
                    await self._fetch()
                    continue
                if raw.want is None:
                    if raw.pending:
                        await self._send()
                    if parts:
                        parts.append(r or b"")
                        return b"".join(parts)
                    return r
                if r:
                    parts.append(r)
                    if size is not None and size >= 0:
                        size -= len(r)
                await self._fetch()
        except asyncio.CancelledError:
            if parts and start is not None and not raw.closed:
                self._buffered.seek(self._logical(start, parts))
            raise

    def _logical(self, raw_start, parts):
        # the position before the cancelled read: now minus what it took
        return self._buffered.tell() - sum(len(p) for p in parts)

    async def read1(self, size=-1):
        if size.__class__ is not int and self._buffered.__class__ is not io.BufferedWriter:
            size = operator.index(size)
        await self._begin()
        try:
            return await self._run(self._buffered.read1, size)
        finally:
            self._done()

    async def peek(self, size=0):
        if size.__class__ is not int and self._buffered.__class__ is not io.BufferedWriter:
            size = operator.index(size)
        await self._begin()
        try:
            return await self._run(self._buffered.peek, size)
        finally:
            self._done()

    async def readinto(self, b):
        return await self._readinto(b, self._buffered.readinto)

    async def readinto1(self, b):
        return await self._readinto(b, self._buffered.readinto1)

    async def _readinto(self, b, method):
        await self._begin()
        try:
            raw = self._raw
            view = memoryview(b).cast("B") if not isinstance(b, memoryview) else b
            total = 0
            first = True
            while True:
                try:
                    n = method(b if first else view[total:])
                except _Miss:
                    await self._fetch()
                    continue
                first = False
                if view.ndim != 1 or view.format not in ("B", "b", "c"):
                    view = memoryview(b).cast("B")
                if raw.want is None or (method is self._buffered.readinto1 and (n or total)):
                    raw.want = None
                    if raw.pending:
                        await self._send()
                    return total + (n or 0)
                total += n or 0
                await self._fetch()
        finally:
            self._done()

    async def readline(self, size=-1):
        if size.__class__ is not int:
            # the C TextIOWrapper's readline takes no None, BufferedReader's does
            size = operator.index(size) if self._text is not None else _ssize(size)
        await self._begin()
        try:
            if self._text is not None:
                return await self._text_call(self._text.readline, size)
            return await self._binary_line(size)
        finally:
            self._done()

    async def _binary_line(self, size):
        raw = self._raw
        b = self._buffered
        parts = []
        limit = size
        while True:
            try:
                line = b.readline(limit)
            except _Miss:
                await self._fetch()
                continue
            if raw.want is None or line.endswith(b"\n"):
                raw.want = None
                if raw.pending:
                    await self._send()
                if parts:
                    parts.append(line)
                    return b"".join(parts)
                return line
            parts.append(line)
            if limit is not None and limit >= 0:
                limit -= len(line)
                if limit == 0:
                    raw.want = None
                    return b"".join(parts)
            await self._fetch()

    async def readlines(self, hint=-1):
        """open()'s readlines (io.IOBase's): the lines by iteration (a text
        file's next(), which turns tell() off until the end of the file is
        reached), until their total length exceeds a positive hint."""
        hint = _ssize(hint)
        if self.closed:
            raise _closed_error()
        await self._begin()
        try:
            lines = []
            length = 0
            text = self._text
            while True:
                if text is not None:
                    line = await self._text_call(text._next_line)
                else:
                    line = await self._binary_line(-1)
                if not line:
                    return lines
                lines.append(line)
                if hint > 0:
                    if len(line) > hint - length:
                        return lines
                    length += len(line)
        finally:
            self._done()

    async def pread(self, size, offset):
        """os.pread on the file's descriptor: size bytes at offset, the
        file's position and buffer untouched; os.pread's exceptions."""
        await self._begin()
        try:
            raw = self._raw
            if raw._closed:
                raise ValueError("I/O operation on closed file")  # open()'s fileno()'s
            if (
                size.__class__ is not int
                or offset.__class__ is not int
                or not 0 < size <= 0x7FFFFFFFFFFFFFFF  # Py_ssize_t
                or not 0 <= offset <= 0x7FFFFFFFFFFFFFFF  # off_t
            ):
                size, offset = _pread_arguments(size, offset)
                if size == 0:
                    # cannot block: the system call says what is wrong
                    # (EBADF on a file not open for reading), as os.pread's
                    return os.pread(raw.fd, 0, offset)
            return await self._read_at(OP_PREAD, size, offset)
        finally:
            self._done()

    # -- writing
    async def write(self, data):
        """open()'s write. Cancelled: the write still completes (the bytes
        are in the buffer or on their way to the file); its result is lost."""
        await self._begin()
        try:
            if self._text is not None:
                return await self._text_call(self._text.write, data)
            return await self._finish(self._buffered.write(data))
        finally:
            self._done()

    async def _finish(self, result):
        raw = self._raw
        if raw.pending:
            await self._shielded_send()
        return result

    async def _shielded_send(self):
        # Writes the io object made are its own (it counts them as done):
        # a cancelled caller must not stop them half-way.
        raw = self._raw
        if len(raw.pending) == 1 and raw.pending[0][1] is not None:
            # one write (a flush): its operation, shielded, without a task
            offset, data, after = raw.pending.pop()
            append = offset < 0 and raw._seekable
            fut = self._loop.create_future()
            self._engine.file_op(
                self._loop,
                fut,
                OP_PWRITE,
                raw.fd,
                1 if append else 0,
                offset,
                data,
                None,
                0,
                False,
                None,
                None,
                self._dropped,
            )
            try:
                end = await asyncio.shield(fut)
            except asyncio.CancelledError:
                if not fut.done():  # our caller was cancelled, not the write
                    self._holder = fut
                    if append:
                        fut.add_done_callback(lambda f: self._appended(f, after))
                raise
            if append:
                self._append_end(end, after)
            return
        task = self._loop.create_task(self._send())
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            self._holder = task
            raise

    async def writelines(self, lines):
        if self.closed:
            raise _closed_error()
        for line in lines:
            await self.write(line)

    async def pwrite(self, data, offset):
        """os.pwrite on the file's descriptor: the file's position and
        buffer untouched; os.pwrite's exceptions."""
        await self._begin()
        try:
            fd = self._raw.fileno()
            if (
                data.__class__ is bytes
                and offset.__class__ is int
                and 0 <= offset <= 0x7FFFFFFFFFFFFFFF
            ):
                empty = not data
            else:
                offset = _pwrite_arguments(data, offset)
                empty = memoryview(data).nbytes == 0
            if empty:
                return os.pwrite(fd, data, offset)  # nothing to wait for, EBADF if read-only
            n = await self._call(OP_PWRITE, fd, 0, offset, data)
            self._raw._forget_window()
            if self._raw.append:
                self._raw.append_end += n  # Linux's pwrite appends on an O_APPEND file
            return n
        finally:
            self._done()

    async def flush(self):
        await self._begin()
        try:
            self._file.flush()
            return await self._finish(None)
        finally:
            self._done()

    async def truncate(self, size=None):
        await self._begin()
        try:
            if self._text is not None:
                return await self._text_call(self._text.truncate, size)
            return await self._finish(self._buffered.truncate(size))
        finally:
            self._done()

    # -- positioning
    async def seek(self, offset, whence=0):
        await self._begin()
        try:
            if self._text is not None:
                return await self._text_call(self._text.seek, offset, whence)
            return await self._run(self._buffered.seek, offset, whence)
        finally:
            self._done()

    async def tell(self):
        await self._begin()
        try:
            if self._text is not None:
                return await self._text_call(self._text.tell)
            return await self._run(self._buffered.tell)
        finally:
            self._done()

    # -- closing
    async def close(self):
        """open()'s close: flushes, then closes the descriptor. Cancelled:
        the file is closed all the same."""
        await self._begin()
        try:
            raw = self._raw
            if raw.closed:
                return
            raw.async_close = True
            exc = None
            try:
                self._file.close()
            except _Miss:
                pass  # a rewind after the last flush: nothing to read any more
            except BaseException as e:  # noqa: BLE001 - raised after the descriptor is closed
                exc = e
            if not raw.pending and raw.closefd and raw.fd >= 0:
                fd, raw.fd = raw.fd, -1
                if raw.local and raw.mode == "rb":
                    os.close(fd)  # a file read from a local disk: nothing to wait for
                else:
                    # the descriptor is closed by the worker even if this
                    # call is cancelled meanwhile
                    fut = self._loop.create_future()
                    self._engine.file_op(
                        self._loop,
                        fut,
                        OP_CLOSE,
                        fd,
                        0,
                        0,
                        None,
                        None,
                        0,
                        False,
                        None,
                        None,
                        self._dropped,
                    )
                    try:
                        await asyncio.shield(fut)
                    except asyncio.CancelledError:
                        self._holder = fut
                        raise
                if exc is not None:
                    raise exc
                return
            task = self._loop.create_task(self._close_fd())
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                self._holder = task
                raise
            if exc is not None:
                raise exc
        finally:
            self._done()

    async def _close_fd(self):
        raw = self._raw
        try:
            await self._send()
        finally:
            if raw.closefd and raw.fd >= 0:
                fd, raw.fd = raw.fd, -1
                await self._call(OP_CLOSE, fd)

    # -- text mode
    async def _text_call(self, method, *args):
        """Runs a method of the text layer (_pyio's TextIOWrapper over the
        buffered object). If the raw layer runs dry half-way, the text
        layer's state is put back as it was before the call, and the call
        runs again once more bytes are in hand: the bytes it had taken are
        read again from the raw layer's window."""
        text = self._text
        raw = self._raw
        if self._updating and not raw.closed and method != text.write:
            # The io object's reads and seeks flush its writes first; done
            # here, before the position to come back to is taken, a write's
            # effect on the position (append mode: the file's end) is not
            # undone with what a dry attempt read.
            self._buffered.flush()
            if raw.pending:
                await self._shielded_send()
        state = _text_state(text)
        start = raw.pos if raw._seekable else None
        buffered_pos = self._buffered.tell() if start is not None and not raw.closed else None
        while True:
            try:
                result = method(*args)
            except BaseException:
                # what a dry raw layer made the text layer believe (an end
                # of file in the middle of a character, say) is not raised
                if raw.want is None or raw.want[0] == "seek-answer":
                    raise
            else:
                if raw.want is None or raw.want[0] == "seek-answer":
                    raw.want = None
                    if raw.pending:
                        await self._shielded_send()
                    return result
            _set_text_state(text, state)
            if buffered_pos is not None:
                self._buffered.seek(buffered_pos)
            await self._fetch()


def _pread_arguments(size, offset):
    """os.pread's checks of its arguments, in its order and with its
    messages: os.pread itself on descriptor -1, which converts them, then
    refuses a negative size (EINVAL), and whose system call refuses a
    negative offset (EINVAL) before it looks at the descriptor (EBADF:
    they are good). Returns them as ints."""
    try:
        os.pread(-1, size, offset)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
    return size.__index__(), offset.__index__()


def _pwrite_arguments(data, offset):
    """os.pwrite's checks, the same way (a buffer, then an offset, which
    the system call refuses when negative before it looks at the
    descriptor). Returns the offset as an int."""
    try:
        os.pwrite(-1, data, offset)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
    return offset.__index__()


class _BinaryOnly:
    """A method of binary files that open()'s TextIOWrapper does not have:
    on a text file, hasattr() is False and the AttributeError is its."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        raise _no_text_attribute(self.name)


def _no_text_attribute(name):
    return AttributeError(f"'_io.TextIOWrapper' object has no attribute '{name}'")


_BINARY_ONLY = frozenset(("read1", "readinto", "readinto1", "peek", "raw"))


class NativeTextFile(NativeFile):
    """A native file in text mode: NativeFile without the methods of
    binary files (open()'s TextIOWrapper has none of them)."""

    read1 = _BinaryOnly()
    readinto = _BinaryOnly()
    readinto1 = _BinaryOnly()
    peek = _BinaryOnly()

    def __getattr__(self, name):
        # reached when a _BinaryOnly raised too
        if name in _BINARY_ONLY:
            raise _no_text_attribute(name)
        return super().__getattr__(name)


def _ssize(size):
    # the C io's conversion of an optional size (_Py_convert_optional_to_ssize_t)
    if size is None:
        return -1
    try:
        return size.__index__()
    except AttributeError:
        raise TypeError(
            f"argument should be integer or None, not '{type(size).__name__}'"
        ) from None


def _closed_error():
    return ValueError("I/O operation on closed file.")


def _text_class():
    """_pyio's TextIOWrapper made to behave as the C one that open()
    returns (its checks and messages, and each place where the two
    implementations part: docs/files.md, "Exact semantics"), made on first
    use (importing _pyio costs)."""
    global _Text
    if _Text is not None:
        return _Text
    import _pyio

    class Text(_pyio.TextIOWrapper):
        def __init__(self, buffer, encoding, errors, newline, line_buffering):
            if isinstance(newline, str) and newline not in ("", "\n", "\r", "\r\n"):
                raise ValueError(f"illegal newline value: {newline}")
            super().__init__(buffer, encoding, errors, newline, line_buffering)

        # tell()'s cookie packed as the C TextIOWrapper packs it: start
        # position (8 bytes), decoder flags, bytes to feed, characters to
        # skip (4 bytes each), need-EOF flag (1 byte), little-endian.
        def _pack_cookie(
            self, position, dec_flags=0, bytes_to_feed=0, need_eof=False, chars_to_skip=0
        ):
            return (
                position
                | (dec_flags & 0xFFFFFFFF) << 64
                | bytes_to_feed << 96
                | chars_to_skip << 128
                | int(bool(need_eof)) << 160
            )

        def _unpack_cookie(self, bigint):
            position = bigint & 0xFFFFFFFFFFFFFFFF
            dec_flags = (bigint >> 64) & 0xFFFFFFFF
            if dec_flags >= 1 << 31:
                dec_flags -= 1 << 32
            bytes_to_feed = (bigint >> 96) & 0xFFFFFFFF
            chars_to_skip = (bigint >> 128) & 0xFFFFFFFF
            need_eof = (bigint >> 160) & 0xFF
            return position, dec_flags, bytes_to_feed, need_eof, chars_to_skip

        def _read_chunk(self):
            # The C TextIOWrapper reports the end of the file only for a
            # chunk that decoded to nothing: the last chunk, which flushes
            # what the decoder held (a lone "\r" under universal newlines,
            # a partial character), counts as data, so read(n) reads once
            # more and tell() then answers the plain position (_pyio's
            # answers a cookie that replays the flush).
            more = super()._read_chunk()
            return more or bool(self._decoded_chars)

        def _c_init(self):
            self._c_readable = self.buffer.readable()
            self._c_writable = self.buffer.writable()
            if self._c_readable:
                # the C one makes its decoder at once (a seek then sets its
                # state; _pyio's, made at the first read, would start over)
                self._get_decoder()
            self._CHUNK_SIZE = 8192  # the C TextIOWrapper's

        def _c_check(self):
            if self.buffer is None:
                raise ValueError("underlying buffer has been detached")
            if self.closed:
                raise _closed_error()

        def read(self, size=-1):
            size = _ssize(size)
            self._c_check()
            if not self._c_readable:
                raise io.UnsupportedOperation("not readable")
            return super().read(size)

        def readline(self, size=-1):
            size = size.__index__() if not isinstance(size, int) else size
            self._c_check()
            if not self._c_readable:
                raise io.UnsupportedOperation("not readable")
            if size == 0 and not self._decoded_chars:
                # With no decoded text at all (none read since the last
                # seek or write, or the end of the file), the C one reads
                # a chunk before it looks at the limit: the buffer's
                # position moves on. _pyio returns at once.
                if self._decoder is None:
                    self._get_decoder()
                while True:
                    if not self._read_chunk():  # the end of the file
                        self._set_decoded_chars("")
                        self._snapshot = None
                        break
                    if self._decoded_chars:
                        break
                return ""
            return super().readline(size)

        def write(self, s):
            if not isinstance(s, str):
                raise TypeError(f"write() argument must be str, not {type(s).__name__}")
            self._c_check()
            if not self._c_writable:
                raise io.UnsupportedOperation("not writable")
            return super().write(s)

        def seek(self, cookie, whence=0):
            self._c_check()
            if whence not in (0, 1, 2):
                raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
            if (
                whence == 0
                and cookie.__class__ is int
                and cookie > 0
                and self._seekable
                and cookie & 0xFFFFFFFFFFFFFFFF == 0
                and (cookie >> 64) & 0xFFFFFFFF == 0
            ):
                # the C one resets its decoder for a cookie at the start of
                # the file with no decoder flags, whatever else it carries
                # (_pyio only for the cookie 0): the newlines seen go
                self._c_reset_decoder()
            result = super().seek(cookie, whence)
            if whence != 2 and self._snapshot is None and self._decoder is not None:
                # the C one keeps a snapshot of where it sought to, the
                # start of the file included (_pyio none there): tell()
                # after next() reads it
                self._snapshot = (0, b"")
            return result

        def _c_reset_decoder(self):
            # reset(), then setstate() back: what only reset() clears goes
            # (an IncrementalNewlineDecoder's record of the newlines seen)
            decoder = self._decoder
            if decoder is not None:
                state = decoder.getstate()
                decoder.reset()
                decoder.setstate(state)

        def tell(self):
            # The C one's algorithm (Modules/_io/textio.c), which _pyio's
            # follows but for three things: with no snapshot (after next())
            # the C one answers the buffer's position where _pyio asserts
            # that no decoded text is left; it sets its decoder with
            # reset(), not setstate(), at the start of the file with no
            # flags (the newlines it records are then those of its last
            # walk); and it has no assert that its first guess of how many
            # bytes to skip is within the snapshot (after a seek to a
            # cookie it may not be: it decodes the bytes object's
            # terminating NUL, as zero bytes do here).
            self._c_check()
            if not self._seekable:
                raise io.UnsupportedOperation("underlying stream is not seekable")
            if not self._telling:
                raise OSError("telling position disabled by next() call")
            self.flush()
            position = self.buffer.tell()
            decoder = self._decoder
            if decoder is None or self._snapshot is None:
                return position
            dec_flags, next_input = self._snapshot
            start_pos = position - len(next_input)
            chars_to_skip = self._decoded_chars_used
            if chars_to_skip == 0:
                return self._pack_cookie(start_pos, dec_flags)

            def set_decoder(flags):
                if start_pos == 0 and flags == 0:
                    decoder.reset()
                else:
                    decoder.setstate((b"", flags))

            saved_state = decoder.getstate()
            try:
                skip_bytes = int(self._b2cratio * chars_to_skip)
                padded = next_input + bytes(max(0, skip_bytes - len(next_input)))
                skip_back = 1
                while skip_bytes > 0:
                    set_decoder(dec_flags)
                    n = len(decoder.decode(padded[:skip_bytes]))
                    if n <= chars_to_skip:
                        dec_buffer, flags = decoder.getstate()
                        if not dec_buffer:
                            dec_flags = flags
                            chars_to_skip -= n
                            break
                        skip_bytes -= len(dec_buffer)
                        skip_back = 1
                    else:
                        skip_bytes -= skip_back
                        skip_back *= 2
                if skip_bytes <= 0:
                    skip_bytes = 0
                    set_decoder(dec_flags)
                start_pos += skip_bytes
                if chars_to_skip == 0:
                    return self._pack_cookie(start_pos, dec_flags)
                chars_decoded = 0
                bytes_to_feed = 0
                need_eof = False
                i = skip_bytes
                while i < len(next_input):
                    chars_decoded += len(decoder.decode(next_input[i : i + 1]))
                    bytes_to_feed += 1
                    dec_buffer, flags = decoder.getstate()
                    if not dec_buffer and chars_decoded <= chars_to_skip:
                        # a safe start point
                        start_pos += bytes_to_feed
                        chars_to_skip -= chars_decoded
                        dec_flags = flags
                        bytes_to_feed = chars_decoded = 0
                    if chars_decoded >= chars_to_skip:
                        break
                    i += 1
                if i == len(next_input):
                    # not enough decoded: the end of the file gives the rest
                    chars_decoded += len(decoder.decode(b"", final=True))
                    need_eof = True
                    if chars_decoded < chars_to_skip:
                        raise OSError("can't reconstruct logical file position")
                return self._pack_cookie(
                    start_pos, dec_flags, bytes_to_feed, need_eof, chars_to_skip
                )
            finally:
                decoder.setstate(saved_state)

        def flush(self):
            self._c_check()
            return super().flush()

        def truncate(self, pos=None):
            # the C one flushes and hands pos, None included, to the
            # buffer: None is the buffer's position, not tell()'s
            self._c_check()
            self.flush()
            return self.buffer.truncate(pos)

        @property
        def newlines(self):
            # the C one: None when its decoder keeps no record (a newline
            # argument other than None and "")
            return getattr(self._decoder, "newlines", None)

        def _next_line(self):
            # next(), with the end of the file as "" (a coroutine may not
            # let StopIteration out)
            try:
                return self.__next__()
            except StopIteration:
                return ""

    _Text = Text
    return Text


_Text = None


def _text_state(text):
    d = text.__dict__
    dec = d.get("_decoder")
    return (
        d.get("_decoded_chars"),
        d.get("_decoded_chars_used"),
        d.get("_snapshot"),
        d.get("_b2cratio"),
        dec,
        dec.getstate() if dec is not None else None,
    )


def _set_text_state(text, state):
    chars, used, snapshot, ratio, dec, dec_state = state
    text._decoded_chars = chars
    text._decoded_chars_used = used
    text._snapshot = snapshot
    text._b2cratio = ratio
    text._decoder = dec
    if dec is not None:
        dec.setstate(dec_state)


class ExecutorFile(_Base):
    """open()'s own file object, each call run in the loop's default
    executor (what aiofiles does), one at a time."""

    def __init__(self, loop, file):
        self._loop = loop
        self._file = file
        self._turns = _Turns()

    async def _run(self, method, *args):
        if self._turns.busy:
            await self._turns.wait(self._loop)
        self._turns.busy = True
        fut = self._loop.run_in_executor(None, method, *args)
        try:
            result = await asyncio.shield(fut)
        except asyncio.CancelledError:
            # the call goes on in its thread; the turn passes when it ends
            fut.add_done_callback(self._release_after)
            raise
        except BaseException:
            self._turns.release()
            raise
        self._turns.release()
        return result

    def _release_after(self, fut):
        if not fut.cancelled():
            fut.exception()
        self._turns.release()

    def __getattr__(self, name):
        if name in _ASYNC_METHODS:
            method = getattr(self._file, name)

            async def call(*args):
                return await self._run(method, *args)

            return call
        return super().__getattr__(name)

    async def read(self, size=-1):
        return await self._run(self._file.read, size)

    async def readline(self, size=-1):
        return await self._run(self._file.readline, size)

    async def write(self, data):
        return await self._run(self._file.write, data)

    async def close(self):
        return await self._run(self._file.close)

    async def pread(self, size, offset):
        self._file.fileno()  # ValueError on a closed file
        return await self._run(os.pread, self._file.fileno(), size, offset)

    async def pwrite(self, data, offset):
        self._file.fileno()
        return await self._run(os.pwrite, self._file.fileno(), data, offset)

    async def writelines(self, lines):
        return await self._run(self._file.writelines, lines)


_ASYNC_METHODS = frozenset(
    [
        "read1",
        "readinto",
        "readinto1",
        "readlines",
        "peek",
        "flush",
        "truncate",
        "seek",
        "tell",
        "detach",
    ]
)


class _Opener:  # Opening in _files.pyi
    """What zloopgo.open() returns: awaitable (the file) and an async
    context manager (closing the file on exit), as aiofiles.open's."""

    __slots__ = ("_args", "_file")

    def __init__(self, args):
        self._args = args
        self._file = None

    def __await__(self):
        return _open(*self._args).__await__()

    async def __aenter__(self):
        self._file = await _open(*self._args)
        return self._file

    async def __aexit__(self, *exc):
        await self._file.close()
        self._file = None


def open(
    file,
    mode="r",
    buffering=-1,
    encoding=None,
    errors=None,
    newline=None,
    closefd=True,
    opener=None,
):
    """open() for asyncio: ``async with zloopgo.open(path) as f`` or
    ``f = await zloopgo.open(path)``; the file's methods that may touch the
    disk are awaitable. Works on any asyncio loop (on a loop that is not
    zloopgo's, through the default executor)."""
    return _Opener((file, mode, buffering, encoding, errors, newline, closefd, opener))


async def _open(file, mode, buffering, encoding, errors, newline, closefd, opener):
    loop = asyncio.get_running_loop()
    engine = _native_engine(loop)
    path = file
    native = engine is not None and opener is None and buffering != 0
    if native and not isinstance(path, (str, bytes)):
        native = hasattr(type(path), "__fspath__")
    if not native:
        f = await loop.run_in_executor(
            None,
            io.open,
            file,
            mode,
            buffering,
            encoding,
            errors,
            newline,
            closefd,
            opener,
        )
        return ExecutorFile(loop, f)
    flags = _open_flags(file, mode, buffering, encoding, errors, newline, closefd)
    path = os.fspath(file)
    modes = set(mode)
    reading, writing = "r" in modes, "w" in modes
    appending, creating, updating = "a" in modes, "x" in modes, "+" in modes
    text = "b" not in modes
    res = await _op(
        loop,
        engine,
        OP_OPEN,
        n=flags,
        obj=os.fsencode(path),
        mode=0o666,
        name=path,
        name2=_Descriptor,
    )
    owner, st_mode, blksize, size, pos, isatty, fstype = res
    fd = owner.take()
    if pos < 0 or not stat_module.S_ISREG(st_mode):
        # A pipe, a device, a socket: open()'s own object over the opened
        # descriptor, its calls in the executor (a stream's bytes cannot be
        # put back for a retry).
        # The descriptor has one owner at a time: this coroutine until
        # open() takes it (through the opener), then open()'s object, which
        # closes it on failure, on close() or when collected.
        taken = []

        def hand_over(_path, _flags):
            taken.append(True)
            return fd

        def wrap():
            try:
                return builtins.open(
                    path, mode, buffering, encoding, errors, newline, True, hand_over
                )
            except BaseException:
                if not taken:
                    os.close(fd)
                raise

        def close_unclaimed(fut):
            # the caller was cancelled while the thread made the file
            if fut.cancelled():
                if not taken:
                    os.close(fd)  # the thread never ran wrap()
            elif fut.exception() is None:
                fut.result().close()

        fut = loop.run_in_executor(None, wrap)
        try:
            f = await asyncio.shield(fut)
        except asyncio.CancelledError:
            fut.add_done_callback(close_unclaimed)
            raise
        return ExecutorFile(loop, f)
    raw = None
    try:
        raw = _Raw(
            fd,
            path,
            _fileio_mode(reading, writing, appending, creating, updating),
            blksize,
            max(pos, 0),
            pos >= 0,
            bool(isatty),
            stat_module.S_ISREG(st_mode),
            closefd,
        )
        raw.eof_hint = size
        raw.local = fstype in _LOCAL_FS
        line_buffering = False
        if buffering == 1 or (buffering < 0 and raw._isatty):
            buffering = -1
            line_buffering = True
        if buffering < 0:
            buffering = _buffer_size(blksize)
        if updating:
            buffered = io.BufferedRandom(raw, buffering)
        elif creating or writing or appending:
            buffered = io.BufferedWriter(raw, buffering)
        else:
            buffered = io.BufferedReader(raw, buffering)
        textio = None
        if text:
            raw.short_ok = True
            textio = _text_class()(buffered, encoding, errors, newline, line_buffering)
            textio._c_init()
            textio.mode = mode
    except BaseException:
        if raw is not None:
            # the io objects made so far must not close the descriptor too
            raw.async_close = True
            raw._closed = True
        await _op(loop, engine, OP_CLOSE, fd=fd)
        raise
    f = (NativeTextFile if textio is not None else NativeFile)(loop, engine, raw, buffered, textio)
    f._bufsize = buffering
    return f
