"""The native layer: a file whose io object (open()'s own classes, over
raw.Raw) runs on the loop thread, and whose raw operations are the
engine's file operations (capi/files.c: workers off the loop thread; on
Linux a read of cached pages completes at once with preadv2(RWF_NOWAIT)). Each
awaitable method runs the io method, fetches what it asked of the raw
layer and did not have, sends the writes it kept, and runs it again;
text calls go through text.py's state saving. Calls on one file take
turns (base.Turns), and an operation owns the descriptor until its
worker is done with it, whatever happened to its caller.

Imported once a zloopgo loop exists (opening.py): it reads the operation
numbers off the loaded engine (FILE_OP_*, capi/files.h, the one copy).
It knows the io classes' public behaviour and _engine.file_op; nothing of
Go, of how the engine schedules, nor of how the file was opened.
"""

from __future__ import annotations

import asyncio
import errno
import io
import operator
import os

from .. import _engine
from .base import FileBase, Turns, closed_error, ssize
from .raw import Miss
from .text import set_text_state, text_state

OP_PREAD = _engine.FILE_OP_PREAD
OP_READALL = _engine.FILE_OP_READALL
OP_PWRITE = _engine.FILE_OP_PWRITE
OP_LSEEK = _engine.FILE_OP_LSEEK
OP_CLOSE = _engine.FILE_OP_CLOSE
OP_FTRUNCATE = _engine.FILE_OP_FTRUNCATE

# Reads asked of the raw layer are fetched with this much more, so that
# the buffer refill that usually follows a direct read is in hand too.
_FETCH_MIN = 64 * 1024
# os.pread and os.pwrite do not exist on Windows: a file's pread and
# pwrite, which are theirs on the file's descriptor, raise the
# AttributeError the executor path raises (docs/files.md, "Windows").
_NO_PREAD = not hasattr(os, "pread")
# Calls completed without waiting (bytes already cached) before one yields
# to the loop anyway, so that a tight read loop does not starve timers.
_YIELD_EVERY = 8


class NativeFile(FileBase):
    """A file whose io object runs on the loop thread over a raw.Raw layer, the
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
        self._turns = Turns()
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
            except Miss:
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
            size = ssize(size)
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
                except Miss:  # the io object had to learn where it is first
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
                except Miss:
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
            size = operator.index(size) if self._text is not None else ssize(size)
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
            except Miss:
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
        hint = ssize(hint)
        if self.closed:
            raise closed_error()
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
            if _NO_PREAD:
                os.pread  # noqa: B018 - Windows has none: the executor path's AttributeError
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
            raise closed_error()
        for line in lines:
            await self.write(line)

    async def pwrite(self, data, offset):
        """os.pwrite on the file's descriptor: the file's position and
        buffer untouched; os.pwrite's exceptions."""
        await self._begin()
        try:
            fd = self._raw.fileno()
            if _NO_PREAD:
                os.pwrite  # noqa: B018 - Windows has none: the executor path's AttributeError
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
            args = [offset, whence]
            raw = self._raw

            def seek():
                try:
                    return self._buffered.seek(*args)
                except Miss:
                    # whence 2: the raw layer wants the file's end. The
                    # buffered layer converted offset and whence and passed
                    # them on as they were; the call made again after the
                    # fetch gets those ints, so that an __index__ runs
                    # once, as in open()'s object
                    if raw.want is not None and raw.want[0] == "seek":
                        args[:] = raw.want[1:3]
                    raise

            return await self._run(seek)
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
            except Miss:
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
        state = text_state(text)
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
            set_text_state(text, state)
            if buffered_pos is not None:
                self._buffered.seek(buffered_pos)
            await self._fetch()


class _ConvertedOnce:
    """An argument os.pread or os.pwrite converts (its __index__), seen
    by them in their own order and converted once: the int it gave is
    kept for the operation that follows the checks, as open()'s object
    and os.pread in a thread convert it once."""

    __slots__ = ("arg", "value")

    def __init__(self, arg):
        self.arg = arg
        self.value = None

    def __index__(self):
        self.value = operator.index(self.arg)
        return self.value


def _once(arg):
    return arg if arg.__class__ is int else _ConvertedOnce(arg)


def _value(arg):
    return arg.value if arg.__class__ is _ConvertedOnce else arg


def _pread_arguments(size, offset):
    """os.pread's checks of its arguments, in its order and with its
    messages: os.pread itself on descriptor -1, which converts them, then
    refuses a negative size (EINVAL), and whose system call refuses a
    negative offset (EINVAL) before it looks at the descriptor (EBADF:
    they are good). Returns them as ints."""
    size, offset = _once(size), _once(offset)
    try:
        os.pread(-1, size, offset)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
    return _value(size), _value(offset)


def _pwrite_arguments(data, offset):
    """os.pwrite's checks, the same way (a buffer, then an offset, which
    the system call refuses when negative before it looks at the
    descriptor). Returns the offset as an int."""
    offset = _once(offset)
    try:
        os.pwrite(-1, data, offset)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
    return _value(offset)


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
