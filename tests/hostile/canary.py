"""The descriptor canary: after a close, new objects take the freed
descriptor numbers (the kernel hands out the lowest free number, so the
canary opens real files, socket pairs and pipes until no number below the
highest one seen is free), each holding known bytes at a known position.
A loop that still uses a number it no longer owns (a send on a closed
transport's number, a queued lseek or write after close, a read, a second
close) then reaches a canary instead of failing, and `check` sees it:

- a file: its position must be 0, its size and bytes the ones written;
- a Unix stream socket pair and a pipe: each end must still have
  exactly its bait queued (a read takes some; a send or write adds to the
  other end's);
- every canary: its number must still be the same file (device, inode): a
  close of a number that is no longer the program's closes the canary.

`fill()` is called after anything that may close (an op that closes, each
loop iteration while settling, the loop's close); `check()` at the end of
each step and of the program; both are cheap (a listing of /proc/self/fd,
and a few system calls per canary). A violation is reported once per
canary, as an observation ["canary", kind, what].

What it does not know: which number belonged to what. It fills every gap
below the highest number opened since it was made, so a number freed by
anything in the process is watched.

On Windows the numbers a loop may reuse are kernel handle values (a
SOCKET is one, and so is what a file or pipe descriptor stands for):
`Watched` is canary_windows.Canary there, the same filling over handle
values (see that module for what a freed handle value is and how it is
watched), and `Canary` is `Unwatched`, which fills nothing (see the end
of this module for who uses which).
"""

import contextlib
import os
import socket
import struct
import sys
import tempfile

if sys.platform != "win32":
    import fcntl
    import termios

BAIT = b"canary!"
FILE_BYTES = b"canary file, position 0\n" * 4
KINDS = ("file", "stream", "pipe")
# Descriptors below this are stdin/stdout/stderr and the worker's own
# first files; they are never filled (a closed stdin is not the program's).
FIRST = 3


def draw_order(rng):
    """The order a program's canaries fill gaps in (drawn, so that every
    kind meets every kind of closed object)."""
    left = list(KINDS)
    return [left.pop(rng.randrange(len(left))) for _ in range(len(KINDS))]


def _queued(fd):
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def lowest_free():
    """The number the kernel would hand out now (every number below it is
    open, or held by a thread inside open())."""
    fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.close(fd)
    return fd


def open_fds():
    """The open descriptors (not the one the listing itself used)."""
    return {n for n in map(int, os.listdir("/proc/self/fd")) if _is_open(n)}


def file_identity(fd):
    """What descriptor fd is open on (OSError when it is closed)."""
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


def file_check(fd, read_from_start):
    """What changed in a canary file `fd` (None: nothing): its position,
    which stays at 0, or its bytes, FILE_BYTES. `read_from_start(n)` reads
    n bytes from offset 0 and leaves the position where it was."""
    pos = os.lseek(fd, 0, os.SEEK_CUR)
    size = os.fstat(fd).st_size
    if pos != 0:
        return f"its position moved to {pos}"
    if size != len(FILE_BYTES) or read_from_start(size + 1) != FILE_BYTES:
        return f"its bytes changed (size {size})"
    return None


class _Canary:
    """One descriptor the canary owns, and what it must still hold.
    `identify` tells what the number is open on now (raising OSError when
    it is closed)."""

    def __init__(self, kind, fd, keep, check, identify):
        self.kind = kind
        self.fd = fd
        self.keep = keep  # the Python object that owns fd (closed at the end)
        self.check = check  # () -> None, or what is wrong
        self.identify = identify
        self.identity = identify()
        self.spent = False

    def ours(self):
        """Whether the number is still this canary's."""
        try:
            return self.identify() == self.identity
        except OSError:
            return False

    def violation(self):
        try:
            now = self.identify()
        except OSError as exc:
            return f"its descriptor was closed ({exc.strerror})"
        if now != self.identity:
            return "its descriptor was closed and reopened"
        return self.check()

    def report_once(self):
        """[kind, what] the first time a violation is found, else None."""
        if self.spent:
            return None
        try:
            what = self.violation()
        except OSError as exc:
            what = f"checking it failed: {exc}"
        if not what:
            return None
        self.spent = True
        return [self.kind, what]


class Canary:
    """The canaries of one program. `order` is the kinds in the order they
    fill gaps (a program draws it, so that every kind meets every kind of
    closed object)."""

    def __init__(self, order=KINDS, directory=None):
        self.order = list(order) or list(KINDS)
        self.next = 0
        self.canaries = {}  # fd -> _Canary
        # descriptors open before the program (a worker inherits none, a
        # test process may have some of its parent's, high up): the gaps
        # filled are those below the highest number opened since
        self.baseline = self.open_fds()
        self.high = None  # None: no fill yet, so the first one scans
        self.dir = directory or tempfile.gettempdir()
        self.violations = []
        self.files = 0
        # violations of canaries whose number a fill found free (closed
        # under them), found before a new canary took the number
        self.replaced = []
        self.landed = self.taken = self.gave_up = 0

    def _add(self, kind, fd, keep, check):
        self._replace(fd, _Canary(kind, fd, keep, check, lambda: file_identity(fd)))

    def _replace(self, fd, new):
        """Makes `new` the canary of number fd. A canary there before was
        closed under the program (the canary closes its own only at the
        end): its violation is kept for check, which would otherwise
        meet the new canary alone."""
        old = self.canaries.get(fd)
        found = old.report_once() if old is not None else None
        if found:
            self.replaced.append(found)
        if old is not None and not isinstance(old.keep, int):
            # its socket object would close the number, the new canary's
            # now, when collected
            old.keep.detach()
        self.canaries[fd] = new

    def tally(self):
        """The free numbers its fills met, by what became of them:
        `landed` when a canary took one, `taken` when another object
        holds it now, `gave_up` when it is still free (a thread holds it
        inside open())."""
        return {"landed": self.landed, "taken": self.taken, "gave_up": self.gave_up}

    # what a platform's canary replaces (canary_windows.Canary): the first
    # number filled, the distance between two numbers, and how the free
    # and the open ones are found
    first = FIRST
    step = 1
    lowest_free = staticmethod(lowest_free)
    open_fds = staticmethod(open_fds)
    is_open = staticmethod(_is_open)

    def _new(self):
        kind = self.order[self.next % len(self.order)]
        self.next += 1
        if kind == "file":
            self._new_file()
        elif kind == "pipe":
            self._new_pipe()
        else:
            self._new_pair()

    def _new_file(self):
        self.files += 1
        fd, path = tempfile.mkstemp(prefix="canary", dir=self.dir)
        os.unlink(path)
        os.write(fd, FILE_BYTES)
        os.lseek(fd, 0, os.SEEK_SET)

        self._add("file", fd, fd, lambda: file_check(fd, lambda n: os.pread(fd, n, 0)))

    def _new_pipe(self):
        r, w = os.pipe()
        os.write(w, BAIT)

        def check():
            n = _queued(r)
            return None if n == len(BAIT) else f"its pipe holds {n} bytes, not {len(BAIT)}"

        self._add("pipe", r, r, check)
        self._add("pipe", w, w, check)

    def _new_pair(self):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.send(BAIT)
        b.send(BAIT)
        for mine in (a, b):

            def check(mine=mine):
                n = _queued(mine.fileno())
                if n != len(BAIT):
                    return f"its socket holds {n} bytes, not {len(BAIT)}"
                got = mine.recv(64, socket.MSG_PEEK)
                return None if got == BAIT else f"its socket holds {got[:16]!r}"

            self._add("stream", mine.fileno(), mine, check)

    def fill(self):
        """Opens canaries until no number below the highest one seen is
        free. A number that a new canary does not take is reserved: a
        thread is inside open() with it (a FIFO's open blocks until a
        writer comes; the kernel allocates the number first). It is left
        alone. Cheap when nothing was freed (one open and one close: called
        after every loop iteration)."""
        if self.nothing_freed():
            return
        fds = self.open_fds()
        self.high = max(self.high or 0, max(fds - self.baseline, default=0))
        reserved = set()
        met = [n for n in range(self.first, self.high + 1, self.step) if n not in fds]
        while True:
            numbers = range(self.first, self.high + 1, self.step)
            free = [n for n in numbers if n not in fds and n not in reserved]
            if not free:
                self.high = max(self.high, self.lowest_free() - self.step)
                self._count(met, fds)
                return
            self._new()
            fds = self.open_fds()
            if free[0] not in fds:
                reserved.add(free[0])
            # a pair's second end may land above
            self.high = max(self.high, max(fds - self.baseline, default=0))

    def nothing_freed(self):
        """The cheap check: True when the lowest free number is above
        the highest one seen and the number above it is free too (then
        nothing below is free, and nothing opened since the last fill
        sits above a freed number), which raises the mark to it. A number
        opened two or more above a freed one since the last fill is not
        seen here: that gap waits for the next fill that scans. The first
        fill always scans: numbers opened before it may sit above a gap."""
        lowest = self.lowest_free()
        if self.high is None or lowest < self.first or lowest <= self.high:
            return False
        if self.is_open(lowest + self.step):
            return False
        self.high = lowest - self.step  # no gap: all up to it is open
        return True

    def _count(self, met, fds):
        """Adds what became of the numbers `met` free to the tally."""
        for n in met:
            if n not in fds:
                self.gave_up += 1
            elif n in self.canaries and self.canaries[n].ours():
                self.landed += 1
            else:
                self.taken += 1

    def check(self):
        """The violations found since the last check, each once:
        [[kind, what], ...]."""
        found, self.replaced = self.replaced, []
        for c in self.canaries.values():
            report = c.report_once()
            if report:
                found.append(report)
        return found

    def close(self):
        """Closes the canaries whose number is still theirs (one closed
        under it may be another object's now). Whether it is theirs is
        the descriptor's identity alone: what a pipe's write end must hold
        is checked through its read end, which this may close first."""
        for c in self.canaries.values():
            ours = c.ours()
            with contextlib.suppress(OSError):
                if isinstance(c.keep, int):
                    if ours:
                        os.close(c.keep)
                elif ours:
                    c.keep.close()
                else:
                    c.keep.detach()
        self.canaries = {}


class Unwatched:
    """A stand-in for Canary that fills nothing, so never sees a
    violation."""

    def __init__(self, order=KINDS, directory=None):
        self.violations = []
        self.files = 0

    def fill(self):
        pass

    def check(self):
        return []

    def tally(self):
        return {}

    def close(self):
        pass


# The canary the hostile machines' workers (host.py), the transport
# differential's (transport_diff/runner.py), test_datagram_diff and
# test_sock_ops_diff use: on Windows the form over handle values. A
# canary socket on a freed value turns asyncio's stale select()
# registration there (its WSAENOTSOCK case, docs/compatibility.md
# "Windows") into readiness of the canary's, which test_sock_ops_diff
# names by the sockops machine's predicate. `Canary` (test_pipe_diff,
# test_tls_diff, test_files_diff: of those only test_files_diff runs
# under Wine, unwatched) is Unwatched there.
Watched = Canary
if sys.platform == "win32":
    from .canary_windows import Canary as Watched  # noqa: F401

    Canary = Unwatched
