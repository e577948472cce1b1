"""The asyncio loop zloopgo's Loop derives from on Windows: asyncio's
selector loop (readiness over the engine's core/iocp: sockets,
add_reader/add_writer), with what only asyncio's ProactorEventLoop has
there: pipes (connect_read_pipe, connect_write_pipe, named pipes) and
subprocesses, and Ctrl+C ending a wait (the proactor's wakeup socket).

The pipes and subprocesses are the proactor's own code: its pipe
transports (proactor_events), its subprocess transport (windows_events)
and its IocpProactor, which issues overlapped ReadFile/WriteFile and
RegisterWaitWithQueue (a process's exit) against a completion port of its
own. What differs is who waits on that port: not the loop (the engine
waits on its own port), but one thread per loop, started at the loop's
first pipe or subprocess, that blocks in GetQueuedCompletionStatus
without the GIL and hands each completion to the loop thread with
call_soon_threadsafe (one wake-up for all those that arrive before the
loop takes them). There the proactor's own steps finish it, as its _poll
would: so flow control, EOF, a close while a read is outstanding, a
child's exit before its pipes close, and the exceptions and their
messages are the proactor's (docs/compatibility.md, "Windows", says why
this design and not completions through the engine's port).

This module knows asyncio's Windows loop and proactor; nothing of the
engine.
"""

import _overlapped
import _winapi
import collections
import signal
import threading
from asyncio import proactor_events, selector_events, windows_events


class ThreadWaitedProactor(windows_events.IocpProactor):
    """asyncio's IocpProactor whose completion port a thread waits on,
    handing what it dequeues to the loop thread."""

    def __init__(self, loop):
        super().__init__()
        self.set_loop(loop)
        # statuses dequeued by the thread, not yet finished by the loop
        self._dequeued = collections.deque()
        self._wake_pending = False
        # the packet that ends the thread carries this OVERLAPPED's address,
        # which no operation has (a packet without one raises in
        # GetQueuedCompletionStatus)
        self._stop = _overlapped.Overlapped(_winapi.NULL)
        self._waiter = threading.Thread(
            target=self._wait_for_completions,
            name=f"zloopgo-iocp-{id(loop):x}",
            # a loop never closed must not keep the interpreter from exiting
            daemon=True,
        )
        self._waiter.start()

    def _wait_for_completions(self):
        """The thread: dequeue (the GIL released while it blocks), hand to
        the loop, until close() posts the stop packet."""
        iocp, stop = self._iocp, self._stop.address
        while True:
            status = _overlapped.GetQueuedCompletionStatus(iocp, _winapi.INFINITE)
            if status is None:  # pragma: no cover - INFINITE does not time out
                continue
            if status[3] == stop:
                return
            self._dequeued.append(status)
            # one wake-up for every status appended before the loop clears
            # the flag (the GIL orders these steps)
            if not self._wake_pending:
                self._wake_pending = True
                self._loop.call_soon_threadsafe(self._finish_dequeued)

    def _finish_dequeued(self):
        """On the loop thread: each status as IocpProactor._poll finishes it."""
        self._wake_pending = False
        try:
            while self._dequeued:
                self._finish(self._dequeued.popleft())
        finally:
            # a KeyboardInterrupt between two leaves the rest for the next
            # iteration, not for the next packet
            if self._dequeued and not self._wake_pending and not self._loop.is_closed():
                self._wake_pending = True
                self._loop.call_soon(self._finish_dequeued)
        for ov in self._unregistered:
            self._cache.pop(ov.address, None)
        self._unregistered.clear()

    def _finish(self, status):
        # IocpProactor._poll's steps for one status (the _poll they were
        # copied from: tests/test_subprocess_pipes.py, REVIEWED_IOCP_POLL);
        # what select() would return (_results) nobody asks for here.
        err, transferred, key, address = status
        try:
            f, ov, obj, callback = self._cache.pop(address)
        except KeyError:
            if self._loop.get_debug():
                self._loop.call_exception_handler(
                    {
                        "message": "GetQueuedCompletionStatus() returned an unexpected event",
                        "status": (
                            f"err={err} transferred={transferred} key={key:#x} address={address:#x}"
                        ),
                    }
                )
            # key is either zero, or it is used to return a pipe
            # handle which should be closed to avoid a leak.
            if key not in (0, _overlapped.INVALID_HANDLE_VALUE):
                _winapi.CloseHandle(key)
            return
        if obj in self._stopped_serving:
            f.cancel()
        # Don't call the callback if _register() already read the result or
        # if the overlapped has been cancelled
        elif not f.done():
            try:
                value = callback(transferred, key, ov)
            except OSError as e:
                f.set_exception(e)
            else:
                f.set_result(value)

    def close(self):
        """Stop the thread, finish what it dequeued, then asyncio's close
        (which cancels what is left and waits on the port itself)."""
        if self._iocp is None:
            return
        if self._waiter is not None:
            _overlapped.PostQueuedCompletionStatus(self._iocp, 0, 0, self._stop.address)
            self._waiter.join()
            self._waiter = None
            self._finish_dequeued()
        super().close()


class SelectorLoopWithPipes(selector_events.BaseSelectorEventLoop):
    """asyncio's Windows selector loop plus the ProactorEventLoop's pipes,
    subprocesses and wakeup socket."""

    def __init__(self, selector=None):
        super().__init__(selector)
        self._pipe_proactor = None
        # as BaseProactorEventLoop: a signal (Ctrl+C) writes to the
        # self-pipe's socket, which ends the engine's wait, and the loop
        # then runs Python's handler (KeyboardInterrupt)
        if threading.current_thread() is threading.main_thread():
            signal.set_wakeup_fd(self._csock.fileno())

    @property
    def _proactor(self):
        """The proactor the pipe and subprocess transports use, made at the
        first of them (with its thread)."""
        proactor = self._pipe_proactor
        if proactor is None:
            self._check_closed()
            proactor = self._pipe_proactor = ThreadWaitedProactor(self)
        return proactor

    def close(self):
        if self.is_running():
            raise RuntimeError("Cannot close a running event loop")
        if self.is_closed():
            return
        if threading.current_thread() is threading.main_thread():
            signal.set_wakeup_fd(-1)
        proactor, self._pipe_proactor = self._pipe_proactor, None
        if proactor is not None:
            proactor.close()
        super().close()

    # the ProactorEventLoop's own methods, its transports with them
    _make_duplex_pipe_transport = proactor_events.BaseProactorEventLoop._make_duplex_pipe_transport
    _make_read_pipe_transport = proactor_events.BaseProactorEventLoop._make_read_pipe_transport
    _make_write_pipe_transport = proactor_events.BaseProactorEventLoop._make_write_pipe_transport
    _make_subprocess_transport = windows_events.ProactorEventLoop._make_subprocess_transport
    create_pipe_connection = windows_events.ProactorEventLoop.create_pipe_connection
    start_serving_pipe = windows_events.ProactorEventLoop.start_serving_pipe
