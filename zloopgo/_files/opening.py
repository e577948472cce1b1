"""The public API: zloopgo.open(), what it returns (awaitable, and an
async context manager), and the opening itself. open()'s own checks of
its arguments run first (io.open, stopped by an opener just before the
system call), then, on a zloopgo loop, the engine opens the file and the
very object open() would build is built here over a raw.Raw layer (the
same class, buffer size, line buffering, mode and name); on any other
loop, and for what the native layer does not cover, open() itself runs
in the default executor.

It knows open()'s arguments and io's classes; nothing of how a file's
calls are carried out after it is opened.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import io
import os
import stat as stat_module
import sys

from .engine import native_engine, run_op
from .executor import ExecutorFile
from .raw import Raw, fileio_mode
from .text import text_class


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


class Opener:  # Opening in __init__.pyi
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
    return Opener((file, mode, buffering, encoding, errors, newline, closefd, opener))


async def _open(file, mode, buffering, encoding, errors, newline, closefd, opener):
    loop = asyncio.get_running_loop()
    engine = native_engine(loop)
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
    # the native layer reads the operation numbers off the engine, loaded
    # now that a zloopgo loop runs
    from .native import NativeFile, NativeTextFile

    flags = _open_flags(file, mode, buffering, encoding, errors, newline, closefd)
    path = os.fspath(file)
    modes = set(mode)
    reading, writing = "r" in modes, "w" in modes
    appending, creating, updating = "a" in modes, "x" in modes, "+" in modes
    text = "b" not in modes
    res = await run_op(
        loop,
        engine,
        engine.FILE_OP_OPEN,
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
        raw = Raw(
            fd,
            path,
            fileio_mode(reading, writing, appending, creating, updating),
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
            textio = text_class()(buffered, encoding, errors, newline, line_buffering)
            textio._c_init()
            textio.mode = mode
    except BaseException:
        if raw is not None:
            # the io objects made so far must not close the descriptor too
            raw.async_close = True
            raw._closed = True
        await run_op(loop, engine, engine.FILE_OP_CLOSE, fd=fd)
        raise
    f = (NativeTextFile if textio is not None else NativeFile)(loop, engine, raw, buffered, textio)
    f._bufsize = buffering
    return f
