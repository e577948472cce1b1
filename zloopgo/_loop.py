"""zloopgo.Loop: the asyncio event loop whose scheduler and reactor are native.

The hot paths (call_soon, call_later, call_at, call_soon_threadsafe, time,
stop, the run loop and descriptor watching) come from the C adapter's
LoopCore, which drives the Go engine. Everything else (tasks, futures,
exception handling, executors, async generators, sockets, transports,
servers, TLS, signals, subprocesses) is asyncio's own code from the Unix
selector loop (on Windows its selector loop, with the ProactorEventLoop's
pipes and subprocesses: zloopgo/_winpipes.py), running on top of those
primitives; TCP and Unix stream
sockets, TLS's among them, get the adapter's SocketTransport. This module knows the
adapter's Python-facing methods; it knows nothing of Go.
"""

import asyncio
import contextlib
import inspect
import os
import selectors
import socket
import sys
import threading
from asyncio import (
    base_events,
    constants,
    events,
    format_helpers,
    futures,
    selector_events,
    tasks,
)

from . import _engine, _tls
from ._datagram import DatagramTransport
from ._numeric_addr import numeric_getaddrinfo
from ._sockmethods import SockMethods
from ._transports import SocketTransport

# The asyncio loop whose code runs on the adapter's primitives, the one
# place the platform decides it (docs/compatibility.md, "Windows"): the
# Unix selector loop (signals, subprocesses, pipes over descriptors), or on
# Windows the selector loop asyncio has there, a readiness loop as the
# engine's core/iocp is, with add_reader/add_writer on sockets, plus what
# only asyncio's ProactorEventLoop has: pipes, subprocesses and Ctrl+C's
# wakeup socket, the proactor's own code (zloopgo/_winpipes.py).
if sys.platform == "win32":
    from ._winpipes import SelectorLoopWithPipes as _AsyncioLoop

    ReadPipeTransport = None
else:
    from asyncio import unix_events

    from ._pipes import ReadPipeTransport

    _AsyncioLoop = unix_events._UnixSelectorEventLoop

# run_forever's steps, as this Python's BaseEventLoop.run_forever takes them
# (tests/test_asyncio_internals.py checks its code against these):
# 3.10-3.12 inline, 3.13.0 _run_forever_setup inside the try, 3.14+ and
# later 3.13 releases (3.13.15) before it.
_HAS_RUN_FOREVER_SETUP = hasattr(base_events.BaseEventLoop, "_run_forever_setup")


class _SetupProbe:
    """Stands in for a loop in _setup_before_try: its setup fails, and its
    cleanup says whether it ran."""

    cleaned = False

    def _run_forever_setup(self):
        raise _SetupFailed

    def _run_forever_cleanup(self):
        self.cleaned = True


class _SetupFailed(Exception):
    pass


def _setup_before_try():
    # A 3.13 patch release moved the setup out of the try, as 3.14 did: a
    # nested run_forever's RuntimeError then leaves the running loop set.
    # asyncio's own method decides: it runs on a stand-in whose setup
    # fails, and its cleanup runs only where the setup is inside the try.
    if not _HAS_RUN_FOREVER_SETUP:
        return False
    probe = _SetupProbe()
    with contextlib.suppress(_SetupFailed):
        base_events.BaseEventLoop.run_forever(probe)
    return not probe.cleaned


_SETUP_BEFORE_TRY = _setup_before_try()
# The forms of asyncio's create_task the adapter does natively
# (capi/tasks.c; the ZL_CREATE_TASK_* of capi/zl.h): each the parameters
# after (self, coro), as (name, kind, default).
_KW_ONLY, _VAR_KEYWORD = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD
_CREATE_TASK_FORMS = {
    # Task(coro, loop=self, name=name): 3.10
    (("name", _KW_ONLY, None),): 1,
    # Task(coro, loop=self, name=name, context=context): 3.11 to 3.13.0
    (("name", _KW_ONLY, None), ("context", _KW_ONLY, None)): 2,
    # Task(coro, loop=self, **kwargs): 3.14+
    (("kwargs", _VAR_KEYWORD, inspect.Parameter.empty),): 3,
    # Task(coro, loop=self, name=name, context=context, **kwargs): 3.13's
    # later patch releases (3.13.15)
    (
        ("name", _KW_ONLY, None),
        ("context", _KW_ONLY, None),
        ("kwargs", _VAR_KEYWORD, inspect.Parameter.empty),
    ): 4,
}


def _create_task_form(create_task):
    """The form of asyncio's create_task that capi/tasks.c does natively,
    read from its signature (3.13's patch releases changed it, so the
    version cannot tell): 0, a form not known, makes every call asyncio's
    own method."""
    params = list(inspect.signature(create_task).parameters.values())
    if [p.name for p in params[:2]] != ["self", "coro"]:
        return 0
    shape = tuple((p.name, p.kind, p.default) for p in params[2:])
    return _CREATE_TASK_FORMS.get(shape, 0)


_CREATE_TASK_FORM = _create_task_form(base_events.BaseEventLoop.create_task)
# 3.15 gives transports a context: the transport factories take context=,
# and the selector loop's _add_reader/_add_writer run the handle in it.
_TRANSPORT_TAKES_CONTEXT = (
    "context" in inspect.signature(selector_events._SelectorSocketTransport).parameters
)
_WATCH_TAKES_CONTEXT = (
    "context" in inspect.signature(selector_events.BaseSelectorEventLoop._add_reader).parameters
)
# 3.12+ refuse a TLS connection's socket that another transport holds, as
# they refuse a plain connection's
_SSL_ENSURES_FD = sys.version_info >= (3, 12)
# 3.14's call_soon_threadsafe returns this Handle, whose cancel(), cancelled()
# and run take a lock: cancelling from another thread waits for a running
# callback to return.
_THREADSAFE_HANDLE = getattr(events, "_ThreadSafeHandle", None)
# The adapter makes and runs those handles itself (capi/schedule.c), with a
# recursive lock of its own in _lock (capi/handle_lock.c).
_RUN_THREADSAFE = None
if _THREADSAFE_HANDLE is not None:
    _RUN_THREADSAFE = _engine.set_threadsafe_handle(_THREADSAFE_HANDLE)


class _WatchedDescriptors:
    """The part of the selectors API asyncio's transports consult (get_key,
    close), answered from the adapter's descriptor table."""

    def __init__(self, loop):
        self._loop = loop

    def get_key(self, fileobj):
        fd = self._loop._watched_fd(fileobj)
        state = self._loop._zl_watch_state(fd)
        if state is None:
            raise KeyError(f"{fileobj!r} is not registered")
        registered, reader, writer = state
        mask = (selectors.EVENT_READ if reader is not None else 0) | (
            selectors.EVENT_WRITE if writer is not None else 0
        )
        return selectors.SelectorKey(registered, fd, mask, (reader, writer))

    def close(self):
        self._loop = None


class Loop(_engine.LoopCore, SockMethods, _AsyncioLoop):
    """An asyncio event loop run by zloopgo's Go engine."""

    def __init__(self, *, slow_callbacks=None):
        super().__init__(selector=_WatchedDescriptors(self))
        # the self-pipe asyncio made and watches: while it is all that is
        # watched and no signal handler is set, a wait that cannot block has
        # nothing to report (capi/fds.c, zl_fds_only_self_pipe). A subclass
        # that makes no such self-pipe keeps every poll.
        ssock = getattr(self, "_ssock", None)
        if isinstance(ssock, socket.socket):
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                self._zl_set_self_pipe(ssock.fileno(), self._signal_handlers)
        # where receives land before what came is copied out (zloopgo/_rx.py)
        self._zl_rx = bytearray()
        # Who else hears of each slow callback (zloopgo.instrument's spans):
        # callables (handle, start_ns, end_ns), monotonic nanoseconds.
        self._zl_slow_listeners = []
        if slow_callbacks is None:
            slow_callbacks = os.environ.get("ZLOOPGO_SLOW_CALLBACKS", "") not in ("", "0")
        if slow_callbacks:
            _engine.set_slow_callbacks(self, True)

    # ---- running -------------------------------------------------------

    def run_forever(self):
        """Run until stop() is called."""
        if _SETUP_BEFORE_TRY:  # 3.14+, 3.13.15
            # A setup that fails (another loop runs) leaves that loop's
            # state alone: no cleanup, as asyncio's run_forever.
            self._run_forever_setup()
            try:
                self._zl_run()
            finally:
                self._run_forever_cleanup()
            return
        if _HAS_RUN_FOREVER_SETUP:  # 3.13.0
            try:
                self._run_forever_setup()
                self._zl_run()
            finally:
                self._run_forever_cleanup()
            return
        # 3.10-3.12 keep the same steps inline in BaseEventLoop.run_forever.
        self._check_closed()
        self._check_running()
        self._set_coroutine_origin_tracking(self._debug)
        old_agen_hooks = sys.get_asyncgen_hooks()
        try:
            self._thread_id = threading.get_ident()
            sys.set_asyncgen_hooks(
                firstiter=self._asyncgen_firstiter_hook,
                finalizer=self._asyncgen_finalizer_hook,
            )
            events._set_running_loop(self)
            self._zl_run()
        finally:
            self._stopping = False
            self._thread_id = None
            events._set_running_loop(None)
            self._set_coroutine_origin_tracking(False)
            sys.set_asyncgen_hooks(*old_agen_hooks)

    def close(self):
        """Close the loop: asyncio's steps (its _closed set first, its self-pipe
        unwatched), then the engine and every handle it held released."""
        super().close()
        self._zl_close()

    if _THREADSAFE_HANDLE is not None:  # 3.14+

        def _zl_call_soon_threadsafe_python(self, callback, *args, context=None):
            """call_soon_threadsafe in debug mode (the adapter's own outside
            it): asyncio's steps, its _ThreadSafeHandle queued natively
            behind the adapter's runner (and the reactor woken)."""
            self._check_closed()
            if self._debug:
                self._check_callback(callback, "call_soon_threadsafe")
            handle = _THREADSAFE_HANDLE(callback, args, self, context)
            # asyncio's own steps: this frame and the handle's __init__
            if handle._source_traceback:
                del handle._source_traceback[-1]
            if handle._source_traceback:
                del handle._source_traceback[-1]
            _engine.LoopCore.call_soon_threadsafe(self, _RUN_THREADSAFE, handle)
            return handle

    # ---- name resolution -----------------------------------------------

    async def getaddrinfo(self, host, port, *, family=0, type=0, proto=0, flags=0):
        """asyncio's getaddrinfo: the exact list socket.getaddrinfo returns,
        answered in place for a numeric host, else looked up by the C
        library on zloopgo's resolver threads (capi/resolver.c) instead of
        the default executor. Debug mode keeps asyncio's logged lookup."""
        if self._debug:
            return await super().getaddrinfo(
                host, port, family=family, type=type, proto=proto, flags=flags
            )
        self._check_closed()  # run_in_executor's first step
        infos = numeric_getaddrinfo(host, port, family, type, proto, flags)
        if infos is not None:
            return infos
        future = self.create_future()
        self._zl_getaddrinfo(future, host, port, family, type, proto, flags)
        return await future

    async def getnameinfo(self, sockaddr, flags=0):
        """asyncio's getnameinfo, looked up by the C library on zloopgo's
        resolver threads instead of the default executor."""
        if self._debug:
            return await super().getnameinfo(sockaddr, flags)
        self._check_closed()
        future = self.create_future()
        self._zl_getnameinfo(future, sockaddr, flags)
        return await future

    # ---- descriptors ----

    def _watched_fd(self, fileobj):
        """The descriptor fileobj names, found as asyncio's selector finds
        it: from fileno(), or, when that fails (a closed socket), by the
        file object a watched descriptor was registered with."""
        try:
            return selectors._fileobj_to_fd(fileobj)
        except ValueError:
            fd = self._zl_find_fileobj(fileobj)
            if fd is None:
                raise
            return fd

    if _WATCH_TAKES_CONTEXT:  # 3.15+: a transport's handles run in its context

        def _add_reader(self, fd, callback, *args, context=None):
            handle = self._zl_add_reader(self._watched_fd(fd), fd, callback, *args)
            if context is not None:
                _engine.set_handle_context(handle, context)
            return handle

        def _add_writer(self, fd, callback, *args, context=None):
            handle = self._zl_add_writer(self._watched_fd(fd), fd, callback, *args)
            if context is not None:
                _engine.set_handle_context(handle, context)
            return handle

    else:

        def _add_reader(self, fd, callback, *args):
            return self._zl_add_reader(self._watched_fd(fd), fd, callback, *args)

        def _add_writer(self, fd, callback, *args):
            return self._zl_add_writer(self._watched_fd(fd), fd, callback, *args)

    def _remove_reader(self, fd):
        if self.is_closed():
            return False
        return self._zl_remove_reader(self._watched_fd(fd))

    def _remove_writer(self, fd):
        if self.is_closed():
            return False
        return self._zl_remove_writer(self._watched_fd(fd))

    if _TRANSPORT_TAKES_CONTEXT:  # 3.15+: base_events passes the connection's context

        def _make_socket_transport(
            self, sock, protocol, waiter=None, *, extra=None, server=None, context=None
        ):
            self._ensure_fd_no_transport(sock)
            cls = _socket_transport_class(sock)
            return cls(self, sock, protocol, waiter, extra, server, context=context)

    else:

        def _make_socket_transport(self, sock, protocol, waiter=None, *, extra=None, server=None):
            self._ensure_fd_no_transport(sock)
            return _socket_transport_class(sock)(self, sock, protocol, waiter, extra, server)

    if _tls.NATIVE_TLS:
        start_tls = _tls.start_tls

    def _zl_ssl_transport(self, rawsock, protocol, sslcontext, waiter, side, extra, server, **how):
        # asyncio's TLS connection: its SSLProtocol state machine over this
        # loop's SocketTransport (the selector loop's own method builds the
        # stock Python transport). side: (server_side, server_hostname);
        # how: this Python's SSLProtocol timeouts and 3.15's context.
        if _SSL_ENSURES_FD:
            self._ensure_fd_no_transport(rawsock)
        transport_options = {"context": how.pop("context")} if _TRANSPORT_TAKES_CONTEXT else {}
        ssl_protocol = _tls.protocol_class(self, protocol, sslcontext, waiter, *side, **how)
        transport_class = _socket_transport_class(rawsock)
        transport_class(self, rawsock, ssl_protocol, None, extra, server, **transport_options)
        return ssl_protocol._app_transport

    if _TRANSPORT_TAKES_CONTEXT:  # 3.15+

        def _make_ssl_transport(
            self,
            rawsock,
            protocol,
            sslcontext,
            waiter=None,
            *,
            server_side=False,
            server_hostname=None,
            extra=None,
            server=None,
            ssl_handshake_timeout=constants.SSL_HANDSHAKE_TIMEOUT,
            ssl_shutdown_timeout=constants.SSL_SHUTDOWN_TIMEOUT,
            context=None,
        ):
            return self._zl_ssl_transport(
                rawsock,
                protocol,
                sslcontext,
                waiter,
                (server_side, server_hostname),
                extra,
                server,
                ssl_handshake_timeout=ssl_handshake_timeout,
                ssl_shutdown_timeout=ssl_shutdown_timeout,
                context=context,
            )

    elif hasattr(constants, "SSL_SHUTDOWN_TIMEOUT"):  # 3.11-3.14

        def _make_ssl_transport(
            self,
            rawsock,
            protocol,
            sslcontext,
            waiter=None,
            *,
            server_side=False,
            server_hostname=None,
            extra=None,
            server=None,
            ssl_handshake_timeout=constants.SSL_HANDSHAKE_TIMEOUT,
            ssl_shutdown_timeout=constants.SSL_SHUTDOWN_TIMEOUT,
        ):
            return self._zl_ssl_transport(
                rawsock,
                protocol,
                sslcontext,
                waiter,
                (server_side, server_hostname),
                extra,
                server,
                ssl_handshake_timeout=ssl_handshake_timeout,
                ssl_shutdown_timeout=ssl_shutdown_timeout,
            )

    else:  # 3.10

        def _make_ssl_transport(
            self,
            rawsock,
            protocol,
            sslcontext,
            waiter=None,
            *,
            server_side=False,
            server_hostname=None,
            extra=None,
            server=None,
            ssl_handshake_timeout=constants.SSL_HANDSHAKE_TIMEOUT,
        ):
            return self._zl_ssl_transport(
                rawsock,
                protocol,
                sslcontext,
                waiter,
                (server_side, server_hostname),
                extra,
                server,
                ssl_handshake_timeout=ssl_handshake_timeout,
            )

    if ReadPipeTransport is not None:

        def _make_read_pipe_transport(self, pipe, protocol, waiter=None, extra=None):
            return ReadPipeTransport(self, pipe, protocol, waiter, extra)

    def _make_datagram_transport(self, sock, protocol, address=None, waiter=None, extra=None):
        self._ensure_fd_no_transport(sock)
        # a socket.socket subclass may have its own recvfrom and sendto: asyncio's calls them
        cls = (
            DatagramTransport
            if type(sock) is socket.socket
            else selector_events._SelectorDatagramTransport
        )
        return cls(self, sock, protocol, address, waiter, extra)

    def _add_callback(self, handle):
        # asyncio queues handles made outside call_soon (signal handlers)
        # on BaseEventLoop._ready, which this loop does not run.
        if not handle._cancelled:
            self.call_soon(_run_unless_cancelled, handle)

    def _process_events(self, event_list):  # pragma: no cover - never called
        raise AssertionError("zloopgo dispatches descriptor events natively")

    # ---- asyncio's signatures, for the call_* calls the adapter does not bind

    # LoopCore's call_* bind their usual shape in C (the callback and its
    # arguments by position, context= by keyword) and hand any other to
    # these (capi/schedule.c, bind_as_asyncio): Python's binding of
    # asyncio's signature raises what asyncio's raises for a missing or
    # unexpected argument, named as asyncio's (their __qualname__, set
    # below), and takes callback=, delay= or when= by keyword; then the
    # call goes back to LoopCore in its usual shape.
    def _zl_bind_call_soon(self, callback, *args, context=None):
        return _engine.LoopCore.call_soon(self, callback, *args, context=context)

    def _zl_bind_call_soon_threadsafe(self, callback, *args, context=None):
        return _engine.LoopCore.call_soon_threadsafe(self, callback, *args, context=context)

    def _zl_bind_call_later(self, delay, callback, *args, context=None):
        return _engine.LoopCore.call_later(self, delay, callback, *args, context=context)

    def _zl_bind_call_at(self, when, callback, *args, context=None):
        return _engine.LoopCore.call_at(self, when, callback, *args, context=context)

    # ---- hooks the adapter calls (rare paths) --------------------------

    def _zl_callback_error(self, exc, handle):
        """Report an exception raised by a callback, as Handle._run does;
        the adapter calls it with exc as the exception being handled, as
        in Handle._run's `except` clause (capi/handle.c)."""
        cb = _format_callback(handle._callback, handle._args, self.get_debug())
        context = {
            "message": f"Exception in callback {cb}",
            "exception": exc,
            "handle": handle,
        }
        if handle._source_traceback:
            context["source_traceback"] = handle._source_traceback
        self.call_exception_handler(context)

    def _zl_debug_schedule(self, method, callback):
        """Debug mode's checks for call_* and the handle's source traceback."""
        if callback is _run_unless_cancelled or (
            _RUN_THREADSAFE is not None and callback is _RUN_THREADSAFE
        ):
            # an asyncio handle this loop queues (3.14's _ThreadSafeHandle, a
            # signal handler's): it has its stack and asyncio checks nothing more
            return None
        if method != "call_soon_threadsafe":
            self._check_thread()
        self._check_callback(callback, method)
        return format_helpers.extract_stack(sys._getframe(1))

    def _zl_run_debug(self, handle):
        """Run one handle the way asyncio's debug mode does: timed, with
        slow callbacks logged."""
        # a _ThreadSafeHandle behind the adapter's runner is asyncio's handle here
        runner = _RUN_THREADSAFE is not None and handle._callback is _RUN_THREADSAFE
        shown = handle._args[0] if runner else handle
        try:
            self._current_handle = shown
            t0 = self.time()
            handle._run()
            t1 = self.time()
            dt = t1 - t0
            if dt >= self.slow_callback_duration:
                base_events.logger.warning(
                    "Executing %s took %.3f seconds", base_events._format_handle(shown), dt
                )
                for listener in self._zl_slow_listeners:
                    listener(handle, int(t0 * 1e9), int(t1 * 1e9))
        finally:
            self._current_handle = None
            # A failed task's traceback reaches this frame: drop the handle
            # so that the task is freed within the iteration (asyncio's
            # _run_once does the same).
            handle = shown = None

    def _zl_slow_callback(self, handle, start_ns, end_ns):
        """Report a callback the adapter timed (slow-callback detection,
        zloopgo.report_slow_callbacks) from start_ns to end_ns (monotonic):
        as debug mode does, and on 3.14+ with the awaiting call graph of
        the task it stepped."""
        runner = _RUN_THREADSAFE is not None and handle._callback is _RUN_THREADSAFE
        if (runner or handle._callback is _run_unless_cancelled) and handle._args:
            handle = handle._args[0]  # a call_soon_threadsafe handle of 3.14+, or a signal's
        text = base_events._format_handle(handle)
        seconds = (end_ns - start_ns) / 1e9
        graph = _awaiting_graph(handle)
        if graph:
            base_events.logger.warning(
                "Executing %s took %.3f seconds\n%s", text, seconds, graph.rstrip("\n")
            )
        else:
            base_events.logger.warning("Executing %s took %.3f seconds", text, seconds)
        for listener in self._zl_slow_listeners:
            listener(handle, start_ns, end_ns)


for _method in ("call_soon", "call_soon_threadsafe", "call_later", "call_at"):
    getattr(Loop, f"_zl_bind_{_method}").__qualname__ = f"BaseEventLoop.{_method}"

# The C methods Loop inherits get descriptors of Loop's own, so that the
# interpreter's specialized calls apply to loop.call_soon and the rest
# (capi/util.c, zl_own_methods): the same functions run.
_engine.own_methods(Loop)

if "debug" in inspect.signature(format_helpers._format_callback_source).parameters:  # 3.13+

    def _format_callback(callback, args, debug):
        return format_helpers._format_callback_source(callback, args, debug=debug)

else:

    def _format_callback(callback, args, debug):
        return format_helpers._format_callback_source(callback, args)


_format_call_graph = getattr(asyncio, "format_call_graph", None)  # 3.14+
if _format_call_graph is not None:

    def _awaiting_graph(handle):
        """asyncio's call graph of the task a handle steps (who awaits it),
        or None for a callback that is no task's step or a task now done."""
        task = getattr(handle._callback, "__self__", None)
        if not isinstance(task, futures.Future) or task.done():
            return None
        return _format_call_graph(task)

else:

    def _awaiting_graph(handle):
        return None


def _socket_transport_class(sock):
    """zloopgo's transport for a socket.socket, whose reads and writes are
    native system calls; asyncio's own for a subclass, whose recv and send
    may be its own (asyncio's transport calls them)."""
    if type(sock) is socket.socket:
        return SocketTransport
    return selector_events._SelectorSocketTransport


def _run_unless_cancelled(handle):
    if not handle._cancelled:
        handle._run()


_engine.set_asyncio(futures, tasks, base_events.BaseEventLoop.create_task, _CREATE_TASK_FORM)

__all__ = ["Loop"]
