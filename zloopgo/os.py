"""zloopgo.os: awaitable file-system calls, off the loop thread.

``await zloopgo.os.stat(path)`` returns what ``os.stat(path)`` returns, or
raises what it raises; so do rename, remove/unlink, rmdir, mkdir, listdir,
scandir and makedirs (and the few os.path tests aiofiles.os.path has). On
a zloopgo loop, a call with a plain path (str, bytes or os.PathLike, no
dir_fd, the default follow_symlinks) is run on the engine's file workers
(capi/files.c) with the system calls os makes, and the result is built
here exactly as os builds it, when the engine has that call (on Windows:
not mkdir with mode 0o700, nor stat and lstat where os.stat would use
GetFileInformationByName, capi/files_windows.c); scandir
and makedirs, whose results and steps belong to os
(os.DirEntry objects cannot be made outside os.scandir; makedirs is a
sequence of calls with its own rules), and every other form of call run
the os function itself in the loop's default executor, as on any other
asyncio loop. It knows os's results and _engine.file_op, nothing of Go.
"""

from __future__ import annotations

import asyncio
import functools
import os as _os
import stat as _stat
import sys as _sys

from ._files.engine import native_engine, run_op

_WINDOWS = _sys.platform == "win32"

__all__ = [
    "exists",
    "getsize",
    "isdir",
    "isfile",
    "listdir",
    "lstat",
    "makedirs",
    "mkdir",
    "remove",
    "rename",
    "rmdir",
    "scandir",
    "stat",
    "unlink",
]


def _plain(path):
    """path as bytes for the C call, or None when os must see it itself."""
    if isinstance(path, (str, bytes)):
        p = path
    elif hasattr(type(path), "__fspath__"):
        try:
            p = _os.fspath(path)
        except Exception:  # noqa: BLE001 - os raises it, in the executor
            return None
        if not isinstance(p, (str, bytes)):
            return None
    else:
        return None
    b = _os.fsencode(p) if isinstance(p, str) else p
    return None if b"\0" in b else b


async def _executor(func, *args, **kwargs):
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(func, *args, **kwargs))


async def _native(operation, path, path2=None, n=0, mode=0, name2=None):
    """operation (the name of one of the engine's FILE_OP_* numbers) on a
    worker."""
    loop = asyncio.get_running_loop()
    engine = native_engine(loop)
    return await run_op(
        loop,
        engine,
        getattr(engine, operation),
        n=n,
        obj=path,
        obj2=path2,
        mode=mode,
        name=name2[0],
        name2=name2[1],
    )


def _engine_for(operation):
    """The engine when the running loop's has operation (the name of one
    of its FILE_OP_* numbers; a Windows whose os.stat uses
    GetFileInformationByName has no FILE_OP_STAT, capi/files_windows.c),
    else None."""
    engine = native_engine(asyncio.get_running_loop())
    return engine if engine is not None and hasattr(engine, operation) else None


def _times(a, ans, m, mns, c, cns):
    """The float and _ns times of os.stat_result, as os makes them from
    seconds and nanoseconds (the same on every platform)."""
    return {
        "st_atime": a + ans * 1e-9,
        "st_mtime": m + mns * 1e-9,
        "st_ctime": c + cns * 1e-9,
        "st_atime_ns": a * 1_000_000_000 + ans,
        "st_mtime_ns": m * 1_000_000_000 + mns,
        "st_ctime_ns": c * 1_000_000_000 + cns,
    }


def _stat_result_posix(t):
    """os.stat_result as os builds it on POSIX from capi/files_posix.c's
    tuple."""
    mode, ino, dev, nlink, uid, gid, size, a, ans, m, mns, c, cns, blksize, blocks, rdev = t
    extra = {
        **_times(a, ans, m, mns, c, cns),
        "st_blksize": blksize,
        "st_blocks": blocks,
        "st_rdev": rdev,
    }
    return _os.stat_result((mode, ino, dev, nlink, uid, gid, size, a, m, c), extra)


def _stat_result_windows(t):
    """os.stat_result as os builds it on Windows (_pystat_fromstructstat)
    from capi/files_windows.c's tuple: no uid, gid, block size, blocks nor
    rdev; the file attributes and reparse tag; st_ctime is the creation
    time, which 3.12+ also gives as st_birthtime; st_ino has 128 bits."""
    mode, ino, ino_high, dev, nlink, size, a, ans, m, mns, c, cns, attributes, tag = t
    if ino_high:
        ino += ino_high << 64
    extra = {
        **_times(a, ans, m, mns, c, cns),
        "st_file_attributes": attributes,
        "st_reparse_tag": tag,
    }
    if _sys.version_info >= (3, 12):
        extra["st_birthtime"] = extra["st_ctime"]
        extra["st_birthtime_ns"] = extra["st_ctime_ns"]
    return _os.stat_result((mode, ino, dev, nlink, 0, 0, size, a, m, c), extra)


_stat_result = _stat_result_windows if _WINDOWS else _stat_result_posix


async def stat(path, *, dir_fd=None, follow_symlinks=True):
    """os.stat, awaitable."""
    b = _plain(path)
    if (
        b is None
        or dir_fd is not None
        or not follow_symlinks
        or _engine_for("FILE_OP_STAT") is None
    ):
        return await _executor(_os.stat, path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
    return _stat_result(await _native("FILE_OP_STAT", b, n=1, name2=(_os.fspath(path), None)))


async def lstat(path, *, dir_fd=None):
    """os.lstat, awaitable."""
    b = _plain(path)
    if b is None or dir_fd is not None or _engine_for("FILE_OP_STAT") is None:
        return await _executor(_os.lstat, path, dir_fd=dir_fd)
    return _stat_result(await _native("FILE_OP_STAT", b, n=0, name2=(_os.fspath(path), None)))


async def rename(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
    """os.rename, awaitable."""
    a, b = _plain(src), _plain(dst)
    if (
        a is None
        or b is None
        or src_dir_fd is not None
        or dst_dir_fd is not None
        or type(_os.fspath(src)) is not type(_os.fspath(dst))
        or _engine_for("FILE_OP_RENAME") is None
    ):
        return await _executor(_os.rename, src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    await _native("FILE_OP_RENAME", a, b, name2=(_os.fspath(src), _os.fspath(dst)))


async def remove(path, *, dir_fd=None):
    """os.remove, awaitable."""
    b = _plain(path)
    if b is None or dir_fd is not None or _engine_for("FILE_OP_UNLINK") is None:
        return await _executor(_os.remove, path, dir_fd=dir_fd)
    await _native("FILE_OP_UNLINK", b, name2=(_os.fspath(path), None))


unlink = remove


async def rmdir(path, *, dir_fd=None):
    """os.rmdir, awaitable."""
    b = _plain(path)
    if b is None or dir_fd is not None or _engine_for("FILE_OP_RMDIR") is None:
        return await _executor(_os.rmdir, path, dir_fd=dir_fd)
    await _native("FILE_OP_RMDIR", b, name2=(_os.fspath(path), None))


async def mkdir(path, mode=0o777, *, dir_fd=None):
    """os.mkdir, awaitable."""
    b = _plain(path)
    if (
        b is None
        or dir_fd is not None
        or type(mode) is not int
        or (_WINDOWS and mode == 0o700)  # os's mkdir makes it its owner's only
        or _engine_for("FILE_OP_MKDIR") is None
    ):
        return await _executor(_os.mkdir, path, mode, dir_fd=dir_fd)
    await _native("FILE_OP_MKDIR", b, mode=mode, name2=(_os.fspath(path), None))


async def listdir(path="."):
    """os.listdir, awaitable."""
    b = _plain(path)
    if b is None or _engine_for("FILE_OP_LISTDIR") is None:
        return await _executor(_os.listdir, path)
    names = await _native("FILE_OP_LISTDIR", b, name2=(_os.fspath(path), None))
    if _WINDOWS:  # str names, as os.listdir's FindFirstFileW gives them
        return [_os.fsencode(n) for n in names] if isinstance(path, bytes) else names
    if isinstance(path, bytes):
        return names
    return [_os.fsdecode(n) for n in names]


async def scandir(path="."):
    """The list of os.DirEntry objects os.scandir(path) yields (made by
    os.scandir itself, in the default executor)."""

    def entries():
        with _os.scandir(path) as it:
            return list(it)

    return await _executor(entries)


async def makedirs(name, mode=0o777, exist_ok=False):
    """os.makedirs, awaitable (os's own, in the default executor)."""
    return await _executor(_os.makedirs, name, mode, exist_ok)


async def _stat_or_none(path):
    try:
        return await stat(path)
    except (OSError, ValueError):
        return None


async def exists(path):
    """os.path.exists, awaitable."""
    return await _stat_or_none(path) is not None


async def isfile(path):
    """os.path.isfile, awaitable."""
    st = await _stat_or_none(path)
    return st is not None and _stat.S_ISREG(st.st_mode)


async def isdir(path):
    """os.path.isdir, awaitable."""
    st = await _stat_or_none(path)
    return st is not None and _stat.S_ISDIR(st.st_mode)


async def getsize(path):
    """os.path.getsize, awaitable."""
    return (await stat(path)).st_size
