"""The executor fallback: open()'s own file object, each call run in the
loop's default executor (what aiofiles does), one at a time in the order
made. zloopgo.open() gives it on a loop that is not zloopgo's, and for
what the native layer does not cover (a file descriptor instead of a
name, an opener, unbuffered files, a pipe, device or socket).

It knows open()'s object and run_in_executor; nothing of the engine.
"""

from __future__ import annotations

import asyncio
import os

from .base import FileBase, Turns


class ExecutorFile(FileBase):
    """open()'s own file object, each call run in the loop's default
    executor (what aiofiles does), one at a time."""

    def __init__(self, loop, file):
        self._loop = loop
        self._file = file
        self._turns = Turns()

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
        return await self._run(_pread, self._file, size, offset)

    async def pwrite(self, data, offset):
        return await self._run(_pwrite, self._file, data, offset)

    async def writelines(self, lines):
        return await self._run(self._file.writelines, lines)


# The descriptor is asked for in the call's turn, on the worker: a
# close() made before the call has run by then, and its number may
# already be another file's (hostile files seed 28 program 51). Asked
# before os.pread is looked up, so that a closed file is open()'s
# ValueError where the os has no pread too, as the native path's is.


def _pread(file, size, offset):
    fd = file.fileno()  # ValueError on a closed file
    return os.pread(fd, size, offset)


def _pwrite(file, data, offset):
    fd = file.fileno()
    return os.pwrite(fd, data, offset)


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
