"""zloopgo.open() and zloopgo.os beyond open()'s own results (those are
tests/test_files_diff.py's): calls on one file run in the order made;
cancelling a read leaves the position where it was, cancelling a write
or a close still completes it; closing a loop with operations in flight
neither hangs nor leaks (memory, descriptors); a forked child gets the
documented RuntimeError; the bound on workers holds; memory per in-flight
read is its buffer and little more; zloopgo.os gives os's results and
exceptions. Dual-run where the behaviour is the same on asyncio's loop
(through the executor)."""

import asyncio
import concurrent.futures
import errno
import gc
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest
from helpers import check

import zloopgo
from zloopgo import _engine


def _fds():
    """Descriptors open now, counted after a collection: what an earlier
    test left for the collector (a loop, a socket) would otherwise close
    its descriptor between two counts whenever a collection happens to
    run, and the counts would differ by it (one fewer at the end, seen
    once on a loaded machine)."""
    gc.collect()
    if sys.platform == "win32":
        # the C runtime's descriptors (under Wine, /proc/self/fd would list
        # the Linux process's, which every thread adds to)
        return sum(1 for fd in range(_CRT_DESCRIPTORS) if _crt_open(fd))
    return len(os.listdir("/proc/self/fd"))


# as many descriptors as the C runtime hands out before _open fails
_CRT_DESCRIPTORS = 8192


def _crt_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _worker_path(f):
    # reads of cached pages complete at once (RWF_NOWAIT); these tests
    # need operations that are in flight on a worker
    if hasattr(f, "_inline"):
        f._inline = False


def test_calls_run_in_the_order_made(loop, tmp_path):
    p = tmp_path / "f"
    p.write_bytes(bytes(range(256)) * 40)

    async def main():
        async with zloopgo.open(p, "rb", buffering=100) as f:
            _worker_path(f)
            calls = [f.read(7) if i % 3 else f.read1(5) for i in range(300)]
            calls.insert(100, f.tell())
            return await asyncio.gather(*calls)

    got = loop.run_until_complete(main())
    with open(p, "rb", buffering=100) as f:
        want = [f.read(7) if i % 3 else f.read1(5) for i in range(300)]
        # tell() was the 101st call: after 100 reads
    want.insert(100, sum(len(x) for x in want[:100]))
    assert got == want


def test_cancelled_read_leaves_the_position(loop, loop_name, tmp_path):
    native = loop_name == "zloopgo"
    p = tmp_path / "f"
    data = os.urandom(1 << 20)
    p.write_bytes(data)

    async def main():
        async with zloopgo.open(p, "rb") as f:
            _worker_path(f)
            for size in (-1, 1 << 16, 3, 1 << 20):
                task = asyncio.ensure_future(f.read(size))
                await asyncio.sleep(0)
                # through the executor the read may already be done
                cancelled = task.cancel()
                if cancelled:
                    with pytest.raises(asyncio.CancelledError):
                        await task
                else:
                    await task
                assert cancelled or not native
                # zloopgo's native path undoes the read; through the executor
                # (asyncio's loop) it finishes in its thread, as aiofiles'
                finished = len(data) if size < 0 else min(size, len(data))
                assert await f.tell() == (0 if native else finished)
                await f.seek(0)
            return await f.read(10)

    assert loop.run_until_complete(main()) == data[:10]


def test_cancelled_write_and_close_complete(loop, tmp_path):
    p = tmp_path / "f"

    async def main():
        f = await zloopgo.open(p, "wb", buffering=10)
        _worker_path(f)
        task = asyncio.ensure_future(f.write(b"x" * 1000))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await f.write(b"end")  # waits for the cancelled write
        task = asyncio.ensure_future(f.close())
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await f.close()  # waits, then finds the file closed
        return f.closed

    fds = _fds()
    assert loop.run_until_complete(main())
    assert p.read_bytes() == b"x" * 1000 + b"end"
    assert _fds() == fds


def test_unclosed_file_warns_like_open(loop, tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")

    async def main():
        f = await zloopgo.open(p, "rb")
        return await f.read()

    fds = _fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert loop.run_until_complete(main()) == b"abc"
        # Twice: on asyncio's loop the file is made on an executor thread,
        # and a free-threaded CPython does not free at once an object that
        # another thread made and this one drops last (biased reference
        # counting: the counts wait for a merge, which a collection does);
        # on 3.14.7t the file went only at the second collection.
        gc.collect()
        gc.collect()
    assert _fds() == fds
    messages = [str(w.message) for w in caught if w.category is ResourceWarning]
    assert any(m.startswith("unclosed file <_io.BufferedReader name=") for m in messages), messages


async def _open_and_close(path):
    f = await zloopgo.open(path, "rb")
    await f.close()


def test_closing_the_loop_with_operations_in_flight(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(os.urandom(1 << 16))
    gc.collect()
    fds = _fds()
    loop = zloopgo.new_event_loop()

    async def start():
        files = []
        for _ in range(50):
            f = await zloopgo.open(p, "rb")
            _worker_path(f)
            files.append(f)
        tasks = [asyncio.ensure_future(f.read(1 << 16)) for f in files for _ in range(20)]
        tasks += [asyncio.ensure_future(zloopgo.open(p, "rb")) for _ in range(200)]
        await asyncio.sleep(0)
        return tasks

    tasks = loop.run_until_complete(start())
    loop.close()  # does not wait for the workers
    del tasks
    # what finished for the closed loop is freed by the next file operation
    loop2 = zloopgo.new_event_loop()
    for _ in range(100):
        gc.collect()
        # file operations every platform has (Windows' stat is os's own,
        # in the executor)
        loop2.run_until_complete(_open_and_close(p))
        _, running, queued, orphaned = _engine.file_stats()
        if running == 0 and queued == 0 and orphaned == 0 and _fds() == fds:
            break
        loop2.run_until_complete(asyncio.sleep(0.01))
    loop2.close()
    gc.collect()
    assert _engine.file_stats()[1:] == (0, 0, 0)
    assert _fds() == fds


def test_memory_per_read_in_flight(tmp_path):
    # 10,000 reads of 4 KiB at once: what they hold is their bytes object
    # (and their future and task), not a copy or a worker each.
    script = f"""
    import asyncio, os, resource, zloopgo
    from zloopgo import _engine
    p = {str(tmp_path / "f")!r}
    open(p, "wb").write(os.urandom(4096 * 10))

    async def main():
        f = await zloopgo.open(p, "rb")
        f._inline = False
        await f.pread(4096, 0)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        got = await asyncio.gather(*[f.pread(4096, 4096 * (i % 10)) for i in range(10000)])
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert all(len(g) == 4096 for g in got)
        await f.close()
        print((after - before) * 1024 // 10000, _engine.file_stats()[0], _engine.file_workers())
    zloopgo.run(main())
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    check(proc)
    per_read, started, bound = map(int, proc.stdout.split())
    assert started <= bound
    # its 4 KiB bytes object, its future, task and coroutine; not a thread each
    assert per_read < 4096 + 6144, per_read


def test_worker_bound_holds(tmp_path):
    script = f"""
    import asyncio, os, threading, zloopgo
    from zloopgo import _engine
    p = {str(tmp_path / "f")!r}
    open(p, "wb").write(b"x" * 1000)
    peak = 0

    async def main():
        global peak
        f = await zloopgo.open(p, "rb")
        f._inline = False
        tasks = [asyncio.ensure_future(f.pread(10, i)) for i in range(300)]
        while not all(t.done() for t in tasks):
            peak = max(peak, _engine.file_stats()[1])
            await asyncio.sleep(0)
        await f.close()

    def in_thread():
        zloopgo.run(main())

    threads = [threading.Thread(target=in_thread) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(_engine.file_workers(), _engine.file_stats()[0], peak)
    """
    env = dict(os.environ, ZLOOPGO_FILE_WORKERS="3")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    check(proc)
    bound, started, peak = map(int, proc.stdout.split())
    assert bound == 3
    assert 1 <= started <= 3
    assert peak <= 3


def test_file_workers_setting():
    old = _engine.file_workers()
    try:
        assert _engine.file_workers(5) == 5
        assert _engine.file_workers() == 5
        with pytest.raises(ValueError, match="file workers must be between 1 and 10000"):
            _engine.file_workers(10001)
    finally:
        _engine.file_workers(old)


def test_forked_child_gets_the_documented_error(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"hello")
    script = f"""
    import asyncio, os, sys, zloopgo
    p = {str(p)!r}

    async def read():
        async with zloopgo.open(p, "rb") as f:
            return await f.read()

    loop = zloopgo.new_event_loop()
    assert loop.run_until_complete(read()) == b"hello"
    pid = os.fork()
    if pid == 0:
        try:
            loop.run_until_complete(read())
        except RuntimeError as exc:
            ok = "forked after its Go engine started" in str(exc)
        else:
            ok = False
        # stock asyncio in the child: zloopgo.open goes through its executor
        ok = ok and asyncio.run(read()) == b"hello"
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    check(proc)
    assert proc.stdout.strip() == "0"


def test_a_pipe_is_opened_through_the_executor(loop, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    async def main():
        writer = asyncio.ensure_future(zloopgo.open(fifo, "wb"))
        reader = await zloopgo.open(fifo, "rb")
        w = await writer
        await w.write(b"through a pipe")
        await w.close()
        data = await reader.read()
        await reader.close()
        return data, reader.name

    assert loop.run_until_complete(main()) == (b"through a pipe", str(fifo))


def _descriptors_of(path):
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == path:
                found.add(int(name))
        except OSError:
            pass  # closed meanwhile (the listing's own descriptor)
    return found


def test_cancelled_open_of_a_device_closes_its_descriptor_once(tmp_path):
    # A device (like a pipe) is opened natively, then wrapped by open() in
    # the executor. Cancelled while the thread wraps it, the descriptor
    # must be closed once, by its owner: had the cancelled call closed it
    # at once, the number could go to another file (the lowest free one)
    # which open()'s object would then wrap and close.
    started, release = threading.Event(), threading.Event()

    class HeldExecutor(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            def held():
                started.set()
                release.wait()
                return fn(*args, **kwargs)

            return super().submit(held)

    executor = HeldExecutor(1)
    loop = zloopgo.new_event_loop()
    loop.set_default_executor(executor)
    other = tmp_path / "other"

    async def opening():
        return await zloopgo.open(os.devnull, "rb")

    async def main():
        before = _descriptors_of(os.devnull)
        task = loop.create_task(opening())
        while not started.is_set():  # the thread is about to wrap the device
            await asyncio.sleep(0.001)
        opened = _descriptors_of(os.devnull) - before
        assert len(opened) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        fd = os.open(other, os.O_RDWR | os.O_CREAT)  # another file, meanwhile
        release.set()
        await loop.run_in_executor(None, lambda: None)  # after the wrap
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
        return before, fd

    try:
        before, fd = loop.run_until_complete(main())
        # the other file is intact: nobody closed its descriptor
        assert os.write(fd, b"still open") == 10
        os.close(fd)
        assert other.read_bytes() == b"still open"
        # and the device's descriptor was closed
        assert _descriptors_of(os.devnull) == before
    finally:
        release.set()
        loop.close()
        executor.shutdown()


# ---- zloopgo.os ----


def _outcome(call):
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome
        return (type(exc).__name__, exc.args, getattr(exc, "filename", None), str(exc))


async def _aoutcome(awaitable):
    try:
        return ("ok", await awaitable)
    except Exception as exc:  # noqa: BLE001
        return (type(exc).__name__, exc.args, getattr(exc, "filename", None), str(exc))


def _stat_fields(st):
    return (
        tuple(st),
        st.st_atime,
        st.st_mtime,
        st.st_ctime,
        st.st_atime_ns,
        st.st_mtime_ns,
        st.st_ctime_ns,
        getattr(st, "st_blksize", None),  # none on Windows
        getattr(st, "st_blocks", None),  # none on Windows
        getattr(st, "st_rdev", None),  # none on Windows
    )


def test_os_helpers_match_os(loop, tmp_path):
    import pathlib

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"12345")
    (tmp_path / "d" / "b").write_bytes(b"")
    os.symlink(tmp_path / "d" / "a", tmp_path / "link")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    paths = [
        str(tmp_path / "d" / "a"),
        os.fsencode(tmp_path / "d" / "a"),
        pathlib.Path(tmp_path / "d"),
        str(tmp_path / "link"),
        str(tmp_path / "dangling"),
        str(tmp_path / "nonexistent"),
        "x\0y",
        42.5,
        str(tmp_path / "d" / "a" / "notadir"),
    ]
    for path in paths:
        for name in ("stat", "lstat", "listdir"):
            ref = _outcome(lambda: getattr(os, name)(path))  # noqa: B023
            got = loop.run_until_complete(_aoutcome(getattr(zloopgo.os, name)(path)))
            if name != "listdir" and ref[0] == "ok":
                ref, got = ("ok", _stat_fields(ref[1])), (got[0], _stat_fields(got[1]))
            elif ref[0] == "ok":
                ref, got = ("ok", sorted(ref[1])), (got[0], sorted(got[1]))
            assert got == ref, (name, path)
    for path in (tmp_path / "d", os.fsencode(tmp_path / "d")):
        got = loop.run_until_complete(zloopgo.os.scandir(path))
        assert sorted((e.name, e.path, e.is_file()) for e in got) == sorted(
            (e.name, e.path, e.is_file()) for e in os.scandir(path)
        )

    async def changes():
        out = []
        out.append(await _aoutcome(zloopgo.os.mkdir(tmp_path / "new")))
        out.append(await _aoutcome(zloopgo.os.mkdir(tmp_path / "new")))
        out.append(await _aoutcome(zloopgo.os.rename(tmp_path / "new", tmp_path / "renamed")))
        out.append(await _aoutcome(zloopgo.os.rename(tmp_path / "new", tmp_path / "renamed")))
        out.append(await _aoutcome(zloopgo.os.rmdir(tmp_path / "renamed")))
        out.append(await _aoutcome(zloopgo.os.rmdir(tmp_path / "renamed")))
        out.append(await _aoutcome(zloopgo.os.remove(tmp_path / "d" / "b")))
        out.append(await _aoutcome(zloopgo.os.unlink(tmp_path / "d" / "b")))
        out.append(await _aoutcome(zloopgo.os.makedirs(tmp_path / "m" / "n")))
        out.append(await _aoutcome(zloopgo.os.makedirs(tmp_path / "m" / "n")))
        out.append(await _aoutcome(zloopgo.os.makedirs(tmp_path / "m" / "n", exist_ok=True)))
        out.append(await zloopgo.os.exists(tmp_path / "m"))
        out.append(await zloopgo.os.isdir(tmp_path / "m"))
        out.append(await zloopgo.os.isfile(tmp_path / "m"))
        out.append(await zloopgo.os.getsize(tmp_path / "d" / "a"))
        return out

    got = loop.run_until_complete(changes())
    # the same steps with os, from the same start
    (tmp_path / "d" / "b").write_bytes(b"")
    os.rmdir(tmp_path / "m" / "n")
    os.rmdir(tmp_path / "m")
    ref = []
    ref.append(_outcome(lambda: os.mkdir(tmp_path / "new")))
    ref.append(_outcome(lambda: os.mkdir(tmp_path / "new")))
    ref.append(_outcome(lambda: os.rename(tmp_path / "new", tmp_path / "renamed")))
    ref.append(_outcome(lambda: os.rename(tmp_path / "new", tmp_path / "renamed")))
    ref.append(_outcome(lambda: os.rmdir(tmp_path / "renamed")))
    ref.append(_outcome(lambda: os.rmdir(tmp_path / "renamed")))
    ref.append(_outcome(lambda: os.remove(tmp_path / "d" / "b")))
    ref.append(_outcome(lambda: os.unlink(tmp_path / "d" / "b")))
    ref.append(_outcome(lambda: os.makedirs(tmp_path / "m" / "n")))
    ref.append(_outcome(lambda: os.makedirs(tmp_path / "m" / "n")))
    ref.append(_outcome(lambda: os.makedirs(tmp_path / "m" / "n", exist_ok=True)))
    ref += [True, True, False, 5]
    assert got == ref


def _every_stat_field(st):
    """What a user can read of an os.stat_result: every st_* attribute
    (the visible ones, the float and _ns times, and the platform's:
    st_file_attributes, st_reparse_tag, st_birthtime... on Windows), the
    tuple and the repr."""
    fields = {name: getattr(st, name) for name in dir(st) if name.startswith("st_")}
    return fields, tuple(st), repr(st)


def _full_outcome(result):
    """A result, or everything an exception carries (class, errno,
    winerror, strerror, both file names, the message)."""
    if not isinstance(result, BaseException):
        return ("ok", result)
    return (
        type(result).__name__,
        getattr(result, "errno", None),
        getattr(result, "winerror", None),
        getattr(result, "strerror", None),
        getattr(result, "filename", None),
        getattr(result, "filename2", None),
        str(result),
    )


def _stat_by_name_exists():
    """True where os.stat (CPython 3.12+ on Windows) tries
    GetFileInformationByName first: capi/files_windows.c leaves stat and
    lstat to os there."""
    if sys.platform != "win32" or sys.version_info < (3, 12):
        return False
    import ctypes

    try:
        lib = ctypes.WinDLL("api-ms-win-core-file-l2-1-4")
    except OSError:
        return False
    return hasattr(lib, "GetFileInformationByName")


class _CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor, counting what is run in it: zloopgo.os
    runs os's own function there when it does not run the call natively."""

    def __init__(self):
        super().__init__(max_workers=1)
        self.calls = 0

    def submit(self, fn, /, *args, **kwargs):
        self.calls += 1
        return super().submit(fn, *args, **kwargs)


def test_stat_lstat_and_listdir_are_native_and_equal_to_os(loop, tmp_path):
    # Issue 40: stat, lstat and listdir run on the engine's workers on
    # every platform (Windows too: capi/files_windows.c makes os.stat's
    # and os.listdir's calls), and what they return is os's in every field
    # a user can read, equality and repr included; what they raise is os's
    # (class, errno, winerror, message, file name). Paths: a file, an
    # empty one, a read-only one, names Windows' os calls executable, a
    # directory (with and without a trailing separator), an empty one,
    # missing paths, a file taken for a directory, "", bytes and path-like
    # paths, symbolic links where the system makes them, the null device.
    import pathlib

    d = tmp_path / "d"
    d.mkdir()
    (d / "a").write_bytes(b"12345")
    (d / "empty").write_bytes(b"")
    (d / "tool.exe").write_bytes(b"MZ")
    (d / "run.BAT").write_bytes(b"@echo")
    (d / "\u00e9t\u00e9").write_bytes(b"x")
    ro = d / "ro"
    ro.write_bytes(b"r")
    os.chmod(ro, 0o444)
    (tmp_path / "none").mkdir()
    # names enough to outgrow the names list many times over (its first
    # 256 bytes; capi/files.h's zl_name_list), one of the longest a name
    # can be, and names of every length between
    many = tmp_path / "many"
    many.mkdir()
    for length in (*range(1, 121), 255):
        (many / f"{length:0{length}d}").write_bytes(b"")  # "1", "02", ..., "00...0255"
    paths = [
        str(d / "a"),
        os.fsencode(d / "a"),
        pathlib.Path(d / "a"),
        str(d / "empty"),
        str(d / "tool.exe"),
        str(d / "run.BAT"),
        str(d / "\u00e9t\u00e9"),
        str(ro),
        str(d),
        str(d) + os.sep,
        os.fsencode(d),
        pathlib.Path(d),
        str(tmp_path / "none"),
        str(many),
        os.fsencode(many),
        str(tmp_path / "missing"),
        str(tmp_path / "missing" / "deeper"),
        str(d / "a" / "notadir"),
        "",
        b"",
        os.devnull,
    ]
    for target, name in ((d / "a", "link"), (d, "dirlink"), (tmp_path / "nowhere", "dangling")):
        try:
            os.symlink(target, tmp_path / name, target_is_directory=target == d)
        except (OSError, NotImplementedError):
            continue  # Windows without the privilege to make links
        paths.append(str(tmp_path / name))
    native = isinstance(loop, zloopgo.Loop)
    executor = _CountingExecutor()
    loop.set_default_executor(executor)

    async def call(name, path):
        before = executor.calls
        try:
            result = await getattr(zloopgo.os, name)(path)
        except Exception as exc:  # noqa: BLE001 - the exception is the outcome
            result = exc
        return result, executor.calls > before

    try:
        for path in paths:
            for name in ("stat", "lstat", "listdir"):
                try:
                    want = getattr(os, name)(path)
                except Exception as exc:  # noqa: BLE001
                    want = exc
                got, in_executor = loop.run_until_complete(call(name, path))
                if name == "listdir":
                    if isinstance(want, list):
                        want, got = sorted(want), sorted(got) if isinstance(got, list) else got
                elif isinstance(want, os.stat_result):
                    assert got == want, (name, path)
                    want, got = _every_stat_field(want), _every_stat_field(got)
                assert _full_outcome(got) == _full_outcome(want), (name, path)
                stays_with_os = name != "listdir" and _stat_by_name_exists()
                assert in_executor == (not native or stays_with_os), (name, path)
        # dir_fd and follow_symlinks=False go to os itself (Windows' os
        # refuses dir_fd), with os's results and errors
        for name, kwargs in (
            ("stat", {"follow_symlinks": False}),
            ("stat", {"dir_fd": 0}),
            ("lstat", {"dir_fd": 0}),
        ):
            try:
                want = _every_stat_field(getattr(os, name)(str(d / "a"), **kwargs))
            except Exception as exc:  # noqa: BLE001
                want = exc

            async def call_with(name=name, kwargs=kwargs):
                return _every_stat_field(await getattr(zloopgo.os, name)(str(d / "a"), **kwargs))

            try:
                got = loop.run_until_complete(call_with())
            except Exception as exc:  # noqa: BLE001
                got = exc
            assert _full_outcome(got) == _full_outcome(want), (name, kwargs)
    finally:
        os.chmod(ro, 0o644)
        loop.run_until_complete(loop.shutdown_default_executor())


def test_reads_of_partly_cached_files(loop, tmp_path):
    # A read whose first pages are in the page cache and the rest not:
    # the part read at once (RWF_NOWAIT) and the part a worker reads must
    # join up. Evicting clean pages needs a file system with a page cache
    # of its own (ext4 here); elsewhere every read takes one of the paths.
    p = tmp_path / "f"
    data = os.urandom(4 << 20)
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)

    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead for the halves below

    def evict():
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        for off in range(0, len(data), 1 << 16):
            os.pread(fd, 1 << 15, off)  # the first half of each 64 KiB back in

    async def main():
        evict()
        async with zloopgo.open(p, "rb") as f:
            chunks = []
            while chunk := await f.read(1 << 16):
                chunks.append(chunk)
        evict()
        async with zloopgo.open(p, "rb") as f:
            whole = await f.read()
            tail = [await f.pread(100_000, off) for off in (0, 40_000, len(data) - 50_000)]
        return b"".join(chunks), whole, tail

    try:
        chunks, whole, tail = loop.run_until_complete(main())
    finally:
        os.close(fd)
    assert chunks == data
    assert whole == data
    assert tail == [data[:100_000], data[40_000:140_000], data[-50_000:]]


def test_io_objects_under_a_native_file_are_not_handed_out(tmp_path):
    # called directly they would answer only from bytes already fetched
    p = tmp_path / "f"
    p.write_text("x")

    async def main():
        async with zloopgo.open(p) as f:
            for name in ("buffer", "detach"):
                with pytest.raises(AttributeError, match="zloopgo's file has no"):
                    getattr(f, name)
            # a text file has no raw (open()'s TextIOWrapper neither)
            with pytest.raises(AttributeError, match=r"'_io\.TextIOWrapper' object has no"):
                f.raw  # noqa: B018
            return f.encoding, f.name, await f.read()

    with open(p) as ref:
        encoding = ref.encoding
    assert zloopgo.run(main()) == (encoding, str(p), "x")


# ---- an operation owns its descriptor until its worker is done (issue 39) ----


class _RecordedIndex:
    """A number whose __index__ records its name in `calls` each time a
    call converts it: how many conversions a call makes is compared."""

    def __init__(self, calls, name, value):
        self.calls, self.name, self.value = calls, name, value

    def __index__(self):
        self.calls.append(self.name)
        return self.value


class _Gate:
    """Holds the file workers: an open of a FIFO with no writer blocks in
    its worker (on asyncio's loop, in an executor thread) until release().
    On zloopgo the bound is 1 meanwhile, so every file operation queued
    after the gate waits for it."""

    def __init__(self, loop_name, path):
        self.native = loop_name == "zloopgo"
        self.path = path
        os.mkfifo(path)

    async def __aenter__(self):
        if self.native:
            self.bound = _engine.file_workers()
            _engine.file_workers(1)
        self.opening = asyncio.ensure_future(zloopgo.open(self.path, "rb"))
        await asyncio.sleep(0.05)
        return self

    async def release(self):
        # the reader waits in open(): a writer's open lets it go on
        while True:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:  # ENXIO: the reader is not there yet
                assert exc.errno == errno.ENXIO, exc
                await asyncio.sleep(0.01)
        os.close(fd)
        await (await self.opening).close()

    async def __aexit__(self, *exc):
        if self.native:
            _engine.file_workers(self.bound)


async def _cancel(task, gate):
    await asyncio.sleep(0.05)  # the call waits for its operation
    task.cancel()
    # through the executor the call may have finished already (and failed:
    # a pwrite on a file opened for reading)
    await asyncio.gather(task, return_exceptions=True)
    if gate.native:  # behind the gate, it waited for its operation
        assert task.cancelled()


def test_a_cancelled_seek_does_not_move_the_next_file_on_its_number(loop, loop_name, tmp_path):
    # Issue 39, #2: the seek's lseek(SEEK_END) waited for a worker when
    # its caller was cancelled; the turn passed at once, close() closed the
    # descriptor, a file opened next took the number, and the lseek moved
    # that file to its end (its read() gave b""). close() now waits for it.
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.write_bytes(b"A" * 100)
    other.write_bytes(b"B" * 100)

    async def main():
        f = await zloopgo.open(mine, "rb")
        async with _Gate(loop_name, tmp_path / "gate") as gate:
            await _cancel(asyncio.ensure_future(f.seek(0, 2)), gate)
            releasing = asyncio.ensure_future(gate.release())
            await f.close()
            with open(other, "rb") as g:  # takes the lowest free number
                await releasing
                await zloopgo.os.stat(other)  # after anything queued before
                return g.tell(), g.read()

    assert loop.run_until_complete(main()) == (0, b"B" * 100)


def test_a_cancelled_pwrite_does_not_write_to_the_next_file_on_its_number(
    loop, loop_name, tmp_path
):
    # Issue 39, #14: the same with a pwrite waiting for a worker: on a file
    # opened "rb" it fails with EBADF, unless close() freed the number and a
    # file opened for writing took it, which then got the bytes.
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.write_bytes(b"A" * 100)
    other.write_bytes(b"B" * 100)

    async def main():
        f = await zloopgo.open(mine, "rb")
        async with _Gate(loop_name, tmp_path / "gate") as gate:
            await _cancel(asyncio.ensure_future(f.pwrite(b"X" * 10, 0)), gate)
            releasing = asyncio.ensure_future(gate.release())
            await f.close()
            with open(other, "r+b") as g:
                await releasing
                await zloopgo.os.stat(other)
                return g.tell(), g.read()

    assert loop.run_until_complete(main()) == (0, b"B" * 100)
    assert other.read_bytes() == b"B" * 100
    assert mine.read_bytes() == b"A" * 100


def test_a_pread_or_pwrite_behind_a_close_meets_the_closed_file(loop, tmp_path):
    # Hostile files seed 28 program 51: the executor path took the
    # descriptor when the call was made, so a pread or pwrite queued behind
    # a close ran os.pread on a number already closed (EBADF; EINVAL for a
    # negative offset), or taken by the next file opened. Each call runs in
    # its turn, on the file as the calls before it left it. The default
    # executor (the executor path's) has one worker, held until every call
    # was made, so that the close cannot have run before them.
    p = tmp_path / "f"
    p.write_bytes(b"A" * 100)
    held = threading.Event()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(1))

    async def main():
        f = await zloopgo.open(p, "r+b")
        holding = loop.run_in_executor(None, held.wait)
        calls = [f.close(), f.pread(10, 0), f.pwrite(b"X" * 10, 0), f.pread(1, -1)]
        tasks = [asyncio.ensure_future(call) for call in calls]
        for _ in range(5):  # each call to its first wait
            await asyncio.sleep(0)
        held.set()
        await holding
        return await asyncio.gather(*tasks, return_exceptions=True)

    closed, *after = loop.run_until_complete(main())
    assert closed is None
    assert [(type(e), str(e)) for e in after] == [(ValueError, "I/O operation on closed file")] * 3
    assert p.read_bytes() == b"A" * 100


@pytest.mark.parametrize("call", ["pwrite", "flush"])
def test_a_collected_file_keeps_its_number_while_a_cancelled_write_waits(
    loop, loop_name, tmp_path, call
):
    # Issue 39, #14: a file whose cancelled pwrite or flush waits for a
    # worker must not be collected (its finalizer would close the number
    # for a file opened next to take). The operation keeps its file until
    # the worker is done (file_op's holder). On 3965d1a this held by
    # accident: the cancelled future the worker kept had the
    # CancelledError, whose traceback had the file; a flush kept it through
    # its shield.
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.write_bytes(b"A" * 100)
    other.write_bytes(b"B" * 100)

    async def main():
        f = await zloopgo.open(mine, "r+b")
        async with _Gate(loop_name, tmp_path / "gate") as gate:
            if call == "pwrite":
                task = f.pwrite(b"X" * 10, 0)
            else:
                await f.write(b"X" * 10)
                task = f.flush()
            await _cancel(asyncio.ensure_future(task), gate)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                del f, task
                gc.collect()
            with open(other, "rb") as g:
                await gate.release()
                await zloopgo.os.stat(other)
                gc.collect()
                return g.tell(), g.read()

    assert loop.run_until_complete(main()) == (0, b"B" * 100)
    assert other.read_bytes() == b"B" * 100
    assert mine.read_bytes() == b"X" * 10 + b"A" * 90


@pytest.mark.parametrize(
    ("mode", "method", "size"),
    [
        ("rb", "read", 7),
        ("rb", "read1", 7),
        ("rb", "peek", 7),
        ("rb", "readline", 7),
        ("r", "read", 7),
        ("r", "readline", 7),
        ("ab", "read", 7),
    ],
)
def test_a_size_is_converted_once(loop, tmp_path, mode, method, size):
    # open()'s object calls a size's __index__ once (or, a BufferedWriter's
    # read, never); zloopgo's runs the io call again after each fetch of
    # bytes it did not have yet, and converted the size each time
    # (tests/hostile/found/read-size-index-called-twice).
    p = tmp_path / "f"
    p.write_bytes(b"line one\nline two\n" * 20)
    calls = []

    class Size:
        def __index__(self):
            calls.append(1)
            return size

    def blocking():
        with open(p, mode, buffering=64 if "b" in mode else -1) as f:
            try:
                return getattr(f, method)(Size())
            except Exception as exc:  # noqa: BLE001 - the outcome compared
                return type(exc).__name__

    async def native():
        async with zloopgo.open(p, mode, buffering=64 if "b" in mode else -1) as f:
            try:
                return await getattr(f, method)(Size())
            except Exception as exc:  # noqa: BLE001 - the outcome compared
                return type(exc).__name__

    want = blocking()
    want_calls, calls[:] = len(calls), []
    got = loop.run_until_complete(native())
    assert (got, len(calls)) == (want, want_calls)


@pytest.mark.parametrize("mode", ["rb", "r+b", "a+b", "wb"])
@pytest.mark.parametrize(("offset", "whence"), [(-1, 2), (0, 2), (-3, 2), (3, 0), (2, 1)])
def test_a_seek_offset_is_converted_once(loop, tmp_path, mode, offset, whence):
    # open()'s object converts seek()'s offset and whence once; zloopgo's
    # made the io call again after fetching the file's end (whence 2) and
    # converted them again (hostile files program 40 of seed 10: an
    # offset's __index__ recorded twice).
    p = tmp_path / "f"
    p.write_bytes(b"0123456789")
    calls = []

    def args():
        return _RecordedIndex(calls, "offset", offset), _RecordedIndex(calls, "whence", whence)

    def blocking():
        with open(p, mode) as f:
            try:
                return f.seek(*args()), f.read() if "r" in mode or "+" in mode else None
            except Exception as exc:  # noqa: BLE001 - the outcome compared
                return type(exc).__name__, str(exc)

    async def native():
        async with zloopgo.open(p, mode) as f:
            try:
                where = await f.seek(*args())
                return where, await f.read() if "r" in mode or "+" in mode else None
            except Exception as exc:  # noqa: BLE001 - the outcome compared
                return type(exc).__name__, str(exc)

    want = blocking()
    want_calls, calls[:] = list(calls), []
    p.write_bytes(b"0123456789")
    got = loop.run_until_complete(native())
    assert (got, calls) == (want, want_calls)


@pytest.mark.parametrize("mode", ["rb", "r+b", "wb"])
@pytest.mark.parametrize("call", ["pread", "pwrite"])
@pytest.mark.parametrize(("size", "offset"), [(3, 2), (-1, 2), (3, -1)])
def test_pread_and_pwrite_convert_their_numbers_once(loop, tmp_path, mode, call, size, offset):
    # os.pread and os.pwrite (open()'s object in a thread) convert a size
    # and an offset once; zloopgo's checked them with os itself on
    # descriptor -1, then converted them again (hostile files program 194
    # of seed 10, 3.15: a pwrite offset's __index__ recorded twice).
    p = tmp_path / "f"
    calls = []

    def args():
        if call == "pread":
            return _RecordedIndex(calls, "size", size), _RecordedIndex(calls, "offset", offset)
        return b"xyz"[: max(size, 0)], _RecordedIndex(calls, "offset", offset)

    def outcome(result):
        return result if isinstance(result, (bytes, int)) else type(result).__name__

    def blocking():
        with open(p, mode) as f:
            try:
                return outcome(getattr(os, call)(f.fileno(), *args()))
            except OSError as exc:
                return type(exc).__name__, exc.errno
            except Exception as exc:  # noqa: BLE001 - the outcome compared
                return type(exc).__name__, str(exc)

    async def native():
        async with zloopgo.open(p, mode) as f:
            try:
                return outcome(await getattr(f, call)(*args()))
            except OSError as exc:
                return type(exc).__name__, exc.errno
            except Exception as exc:  # noqa: BLE001 - the outcome compared
                return type(exc).__name__, str(exc)

    p.write_bytes(b"0123456789")
    want = blocking()
    want_calls, calls[:] = list(calls), []
    p.write_bytes(b"0123456789")
    got = loop.run_until_complete(native())
    assert (got, calls) == (want, want_calls)


def test_every_file_operation_has_one_number_and_a_caller():
    # capi/files.h lists its operations once and capi/files.c exports each as
    # _engine.FILE_OP_<NAME>, which is how zloopgo/_files and zloopgo.os
    # know their numbers (no copy of them is kept in Python); an operation
    # no module names is dead code (the fsync and fstat ones were).
    numbers = {n: getattr(_engine, n) for n in dir(_engine) if n.startswith("FILE_OP_")}
    assert "FILE_OP_OPEN" in numbers, numbers
    if sys.platform == "win32" and _stat_by_name_exists():
        # capi/files_windows.c leaves stat to os where os.stat would try
        # GetFileInformationByName first
        assert "FILE_OP_STAT" not in numbers and "FILE_OP_LISTDIR" in numbers
        assert len(set(numbers.values())) == len(numbers) == 12, numbers
    else:
        assert sorted(numbers.values()) == list(range(1, len(numbers) + 1)), numbers
    package = os.path.dirname(zloopgo.__file__)
    sources = ""
    for folder, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as f:
                    sources += f.read()
    assert [n for n in numbers if n not in sources] == []


def test_files_on_another_loop_do_not_load_the_engine(tmp_path):
    # zloopgo/_files/native.py reads the operation numbers off the engine,
    # so it is imported only once a zloopgo loop runs: zloopgo.open() and
    # zloopgo.os on asyncio's loop must not start the Go runtime.
    script = f"""
    import asyncio, sys, zloopgo
    p = {str(tmp_path / "f")!r}

    async def main():
        async with zloopgo.open(p, "w") as f:
            await f.write("text")
        async with zloopgo.open(p, "rb") as f:
            assert await f.read() == b"text"
        assert (await zloopgo.os.stat(p)).st_size == 4
        await zloopgo.os.remove(p)

    asyncio.run(main())
    print(sorted(m for m in sys.modules if m.startswith("zloopgo.")))
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    check(proc)
    loaded = proc.stdout.strip()
    assert "zloopgo._engine" not in loaded, loaded
    assert "zloopgo._files.native" not in loaded, loaded


def _error_of(call):
    """What an OSError carries (class, errno, winerror, message, names), or
    another exception's class and message; None when call succeeds."""
    try:
        call()
    except OSError as exc:
        return (type(exc).__name__, exc.errno, getattr(exc, "winerror", None), exc.strerror)
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome
        return (type(exc).__name__, str(exc))
    return None


async def _async_error_of(awaitable):
    try:
        await awaitable
    except OSError as exc:
        return (type(exc).__name__, exc.errno, getattr(exc, "winerror", None), exc.strerror)
    except Exception as exc:  # noqa: BLE001
        return (type(exc).__name__, str(exc))
    return None


def test_errors_are_those_open_and_os_raise(loop, tmp_path):
    # Issue 40: the native file operations on every platform (Windows':
    # capi/files_windows.c, the C runtime's _wopen, _read, _lseeki64,
    # _close and ReadFile at an offset) raise the OSError class, errno,
    # winerror and message open()'s object and os raise for the same call:
    # a missing file, a directory, a read-only file opened for writing
    # (refused on Windows; root may on Linux), a descriptor closed behind
    # the file's back (EBADF), a seek before the start (EINVAL).
    d = tmp_path / "dir"
    d.mkdir()
    ro = tmp_path / "ro"
    ro.write_bytes(b"x")
    os.chmod(ro, 0o444)
    p = tmp_path / "f"
    p.write_bytes(b"0123456789")
    opens = [(tmp_path / "missing", "rb"), (d, "rb"), (d, "r"), (ro, "r+b")]

    def with_open():
        out = [_error_of(lambda a=a: open(*a).close()) for a in opens]
        f = open(p, "rb")  # noqa: SIM115 - closed below, its descriptor first
        os.close(f.fileno())
        out.append(_error_of(f.read))
        out.append(_error_of(f.close))
        with open(p, "rb") as f:
            out.append(_error_of(lambda: f.seek(-20, os.SEEK_END)))
            out.append(_error_of(lambda: f.seek(-1)))
        return out

    async def with_zloopgo():
        out = []
        for a in opens:

            async def attempt(a=a):
                f = await zloopgo.open(*a)
                await f.close()

            out.append(await _async_error_of(attempt()))
        f = await zloopgo.open(p, "rb")
        # the file is native on a zloopgo loop, on Windows too
        assert (type(f).__name__ == "NativeFile") == isinstance(loop, zloopgo.Loop)
        os.close(f.fileno())
        out.append(await _async_error_of(f.read()))
        out.append(await _async_error_of(f.close()))
        async with zloopgo.open(p, "rb") as f:
            out.append(await _async_error_of(f.seek(-20, os.SEEK_END)))
            out.append(await _async_error_of(f.seek(-1)))
        return out

    try:
        want = with_open()
        got = loop.run_until_complete(with_zloopgo())
    finally:
        os.chmod(ro, 0o644)
    assert got == want
