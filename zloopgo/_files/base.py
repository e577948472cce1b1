"""What both kinds of file (native.py, executor.py) share: the turn that
runs calls on one file one at a time in the order made, the context
manager, iteration and the attributes that need no I/O (FileBase), and
the C io's conversions and messages that the native and text layers both
repeat.

It knows asyncio's futures and io's public behaviour; nothing of the
engine or of how a call is carried out.
"""

from __future__ import annotations

import collections


class Turns:
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


class FileBase:
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


def ssize(size):
    # the C io's conversion of an optional size (_Py_convert_optional_to_ssize_t)
    if size is None:
        return -1
    try:
        return size.__index__()
    except AttributeError:
        raise TypeError(
            f"argument should be integer or None, not '{type(size).__name__}'"
        ) from None


def closed_error():
    return ValueError("I/O operation on closed file.")
