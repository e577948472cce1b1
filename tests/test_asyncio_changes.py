"""What CPython 3.14 and 3.15 changed for event loops, each checked on
asyncio and on zloopgo (dual-run), on every Python with that Python's
expectation:

- 3.15: a transport's callbacks run in one context (the transport
  factories take context=, the descriptor handles run in it);
- 3.14 and 3.13's later patch releases: create_task(..., eager_start=)
  and any keyword Task takes (chosen by asyncio's signature, not the
  version);
- 3.14: asyncio.capture_call_graph, and `python -m asyncio ps` / `pstree`
  reading a process that runs the loop;
- 3.14: the per-thread task lists of _asyncio (all_tasks and
  current_task asked from another thread, a task left by a finished
  thread) and its C Task and Future;
- free-threaded builds: the engine declares with Py_mod_gil (3.13+) that
  it uses the GIL, so they run it with the GIL on; the import refuses the
  GIL forced off (PYTHON_GIL=0), and the build refuses one on Windows.

The policy deprecations of 3.14 are tests/test_policy_py314.py's.
"""

import ast
import asyncio
import contextvars
import ctypes
import importlib
import inspect
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import threading
from pathlib import Path

import pytest
from helpers import FOREIGN_CALL, ZLOOPGO_HOME, engine_without_gil, refuses_foreign_calls

ROOT = Path(__file__).resolve().parent.parent
VAR = contextvars.ContextVar("VAR", default="unset")

# 3.15's transports keep a context of their own (selector_events).
TRANSPORT_CONTEXT = sys.version_info >= (3, 15)
needs_314 = pytest.mark.skipif(sys.version_info < (3, 14), reason="new in CPython 3.14")
# BaseEventLoop.create_task hands every other keyword to Task (or to the
# task factory): 3.14, and a 3.13 patch release (3.13.0 has not, 3.13.15
# has), so asyncio's signature decides, not the version
_CREATE_TASK_PARAMS = inspect.signature(asyncio.BaseEventLoop.create_task).parameters
TASK_KEYWORDS = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in _CREATE_TASK_PARAMS.values())
needs_task_keywords = pytest.mark.skipif(
    not TASK_KEYWORDS, reason="this Python's create_task takes no **kwargs"
)
# asyncio's eager_task_factory (3.12+) takes eager_start= from 3.14
_EAGER_FACTORY = getattr(asyncio, "eager_task_factory", None)
EAGER_FACTORY_TAKES_EAGER_START = (
    _EAGER_FACTORY is not None and "eager_start" in inspect.signature(_EAGER_FACTORY).parameters
)
# 3.13's create_task with **kwargs keeps name= its own and names the
# factory's task with set_name(); 3.14's gives it to the factory too
FACTORY_GETS_NAME = "name" not in _CREATE_TASK_PARAMS


# ---- 3.15: one context per transport ----------------------------------------


class ContextProtocol(asyncio.Protocol):
    """Records what VAR reads in each callback, then sets it."""

    def __init__(self, seen, done):
        self.seen = seen
        self.done = done

    def connection_made(self, transport):
        self.seen.append(("made", VAR.get()))
        VAR.set("made")

    def data_received(self, data):
        self.seen.append(("data", VAR.get()))
        VAR.set("data")

    def eof_received(self):
        self.seen.append(("eof", VAR.get()))
        VAR.set("eof")

    def connection_lost(self, exc):
        self.seen.append(("lost", VAR.get()))
        self.done.set_result(None)


def test_server_protocol_callbacks_share_the_transports_context(loop):
    async def main():
        seen = []
        done = loop.create_future()
        VAR.set("server")
        server = await loop.create_server(lambda: ContextProtocol(seen, done), "127.0.0.1", 0)
        VAR.set("client")
        port = server.sockets[0].getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"x")
        await writer.drain()
        writer.write_eof()
        await done
        writer.close()
        await writer.wait_closed()
        server.close()
        await server.wait_closed()
        return seen, VAR.get()

    seen, ours = loop.run_until_complete(main())
    assert ours == "client"  # what the protocol set stayed in its own context
    if TRANSPORT_CONTEXT:
        # one context, copied from the server's at its creation
        assert seen == [("made", "server"), ("data", "made"), ("eof", "data"), ("lost", "eof")]
    else:
        # connection_made and the reads run in copies taken apart
        assert seen == [("made", "server"), ("data", "server"), ("eof", "data"), ("lost", "eof")]


def test_client_protocol_callbacks_share_the_transports_context(loop):
    async def main():
        server_seen = []
        server_done = loop.create_future()

        class Echo(asyncio.Protocol):
            def connection_made(self, transport):
                self.transport = transport

            def data_received(self, data):
                self.transport.write(data)
                self.transport.close()

            def connection_lost(self, exc):
                server_done.set_result(None)

        server = await loop.create_server(Echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        done = loop.create_future()
        VAR.set("caller")
        transport, _ = await loop.create_connection(
            lambda: ContextProtocol(server_seen, done), "127.0.0.1", port
        )
        transport.write(b"ping")
        await done
        await server_done
        server.close()
        await server.wait_closed()
        return server_seen

    seen = loop.run_until_complete(main())
    if TRANSPORT_CONTEXT:
        assert seen == [("made", "caller"), ("data", "made"), ("eof", "data"), ("lost", "eof")]
    else:
        assert seen == [("made", "caller"), ("data", "caller"), ("eof", "data"), ("lost", "eof")]


@pytest.mark.skipif(not TRANSPORT_CONTEXT, reason="the transport factories take context= from 3.15")
def test_socket_transport_factory_takes_a_context(loop):
    # What base_events hands _make_socket_transport is where the
    # transport's callbacks run (connect_accepted_socket passes a copy of
    # the caller's context).
    async def main():
        import socket

        seen = []
        done = loop.create_future()
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        ctx = contextvars.copy_context()
        ctx.run(VAR.set, "given")
        waiter = loop.create_future()
        transport = loop._make_socket_transport(
            ours, ContextProtocol(seen, done), waiter, context=ctx
        )
        await waiter
        peer.sendall(b"x")
        peer.shutdown(socket.SHUT_WR)
        await done
        transport.close()
        peer.close()
        return seen, ctx[VAR]

    seen, final = loop.run_until_complete(main())
    assert seen == [("made", "given"), ("data", "made"), ("eof", "data"), ("lost", "eof")]
    assert final == "eof"  # the very context given, not a copy


# ---- 3.14: create_task(eager_start=) and Task's keywords ---------------------


@needs_task_keywords
def test_create_task_eager_start(loop):
    async def main():
        order = []

        async def child(tag):
            order.append(f"{tag} starts")
            await asyncio.sleep(0)
            order.append(f"{tag} ends")
            return tag

        async def at_once():
            return "done already"

        eager = loop.create_task(child("eager"), eager_start=True)
        order.append("created eager")
        lazy = loop.create_task(child("lazy"), eager_start=False)
        order.append("created lazy")
        # asyncio.create_task passes the keywords on from 3.14; 3.13's does not
        takes = inspect.Parameter.VAR_KEYWORD in (
            p.kind for p in inspect.signature(asyncio.create_task).parameters.values()
        )
        make = asyncio.create_task if takes else loop.create_task
        quick = make(at_once(), eager_start=True, name="quick")
        assert quick.done() and quick.result() == "done already"
        assert quick.get_name() == "quick"
        assert await eager == "eager" and await lazy == "lazy"
        return order

    assert loop.run_until_complete(main()) == [
        "eager starts",
        "created eager",
        "created lazy",
        "eager ends",
        "lazy starts",
        "lazy ends",
    ]


@needs_task_keywords
def test_create_task_keywords_before_the_loop_runs(loop):
    # Created outside a running loop, an eager task cannot start at once
    # (Task asks loop.is_running()): it runs in the first iteration, in the
    # order created, with its name and in its context.
    order = []
    ctx = contextvars.copy_context()
    ctx.run(VAR.set, "given")

    async def child(tag):
        order.append((tag, VAR.get()))
        return tag

    eager = loop.create_task(child("eager"), eager_start=True, name="e", context=ctx)
    lazy = loop.create_task(child("lazy"), eager_start=False)
    plain = loop.create_task(child("plain"), name="p")
    assert not eager.done() and order == []
    assert eager.get_name() == "e" and plain.get_name() == "p"
    loop.run_until_complete(asyncio.gather(eager, lazy, plain))
    assert order == [("eager", "given"), ("lazy", "unset"), ("plain", "unset")]


def _keywords_from_another_thread(lp):
    """lp runs; another thread creates a task with name= and context=, and
    one with eager_start=True. Returns what the first task returned (or
    the refusal of a foreign call) and what the eager one did."""
    made = {}
    ctx = contextvars.copy_context()
    ctx.run(VAR.set, "given")

    async def child():
        return asyncio.get_running_loop(), VAR.get()

    async def main():
        def other_thread():
            try:
                made["task"] = lp.create_task(child(), name="t", context=ctx)
            except RuntimeError as exc:  # per-loop ownership: the Task's call_soon
                made["foreign"] = str(exc)
                return
            eager = child()
            try:
                task = lp.create_task(eager, eager_start=True, name="e")
            except RuntimeError as exc:
                made["eager"] = ("refused", re.sub(r"<.*>", "<loop>", str(exc)))
            else:
                made["eager"] = ("started", task.done(), task.get_name(), repr(task.exception()))
            finally:
                eager.close()

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        if "foreign" in made:
            return made["foreign"]
        return await made["task"]

    return lp.run_until_complete(main()), made


@needs_task_keywords
def test_create_task_keywords_from_another_thread_of_a_running_loop(loop):
    # Not the loop's own thread: Task is given loop= with the keywords. An
    # eager start there is Task's to decide: 3.14's refuses it (the loop
    # runs, but not in that thread) and leaves the coroutine to its
    # caller; 3.13's starts the task in the calling thread, where no loop
    # runs. asyncio's own loop, run the same way, says which.
    result, made = _keywords_from_another_thread(loop)
    if refuses_foreign_calls(loop):
        # where the engine runs without the GIL, zloopgo refuses the call
        # (docs/compatibility.md); everywhere else it is asyncio's
        assert result == FOREIGN_CALL
        return
    assert result == (loop, "given")
    assert made["task"].get_name() == "t" and made["task"].get_loop() is loop
    reference = asyncio.SelectorEventLoop()
    try:
        _, theirs = _keywords_from_another_thread(reference)
    finally:
        reference.close()
    assert made["eager"] == theirs["eager"]
    assert made["eager"] in (
        ("refused", "loop <loop> is not the running loop"),
        ("started", True, "e", "RuntimeError('no running event loop')"),
    )


@needs_task_keywords
@pytest.mark.skipif(
    not EAGER_FACTORY_TAKES_EAGER_START,
    reason="this Python's eager_task_factory takes no eager_start= (3.13's refuses it)",
)
def test_create_task_eager_start_false_overrides_the_eager_factory(loop):
    loop.set_task_factory(asyncio.eager_task_factory)

    async def main():
        order = []

        async def child():
            order.append("child")

        task = loop.create_task(child(), eager_start=False)
        order.append("created")
        await task
        eager = loop.create_task(child())
        order.append("created eager")
        await eager
        return order

    assert loop.run_until_complete(main()) == ["created", "child", "child", "created eager"]


@needs_task_keywords
def test_task_factory_receives_every_keyword(loop):
    got = []

    def factory(lp, coro, **kwargs):
        got.append(sorted(kwargs))
        return asyncio.Task(coro, loop=lp, **kwargs)

    loop.set_task_factory(factory)

    async def child():
        return 1

    async def main():
        t = loop.create_task(child(), name="n", eager_start=True)
        return await t, t.get_name()

    assert loop.run_until_complete(main()) == (1, "n")
    # main's own task, then ours (3.13's names it after, with set_name)
    assert got == [[], ["eager_start", "name"] if FACTORY_GETS_NAME else ["eager_start"]]


def _asyncio_error(call):
    """The exception stock asyncio raises for `call(loop, coro)`."""
    lp = asyncio.SelectorEventLoop()

    async def coro():
        pass

    c = coro()
    try:
        call(lp, c)
    except Exception as exc:  # noqa: BLE001 - compared with zloopgo's below
        return exc
    finally:
        c.close()
        lp.close()
    raise AssertionError("asyncio raised nothing")


@pytest.mark.parametrize(
    "call",
    [
        lambda lp, c: lp.create_task(c, bogus=1),
        lambda lp, c: lp.create_task(c, "positional"),
        lambda lp, c: lp.create_task(c, name="a", context=None, bogus=1),
        lambda lp, c: lp.create_task(c, context=contextvars.copy_context(), eager=1),
        lambda lp, c: lp.create_task(c, loop=lp),
        lambda lp, c: lp.create_task(c, eager_start=True, loop=None),
        lambda lp, c: lp.create_task(c, a=1, b=2, d=3, e=4, f=5, g=6, h=7),
        lambda lp, c: lp.create_task(c, a=1, b=2, d=3, e=4, f=5, g=6),
        lambda lp, c: lp.create_task(c, name="n", eager_start=True, bogus=1),
    ],
    ids=[
        "unknown-keyword",
        "extra-positional",
        "three-keywords",
        "context-and-unknown",
        "loop-keyword",
        "eager-and-loop",
        "seven-keywords",
        "six-keywords",
        "eager-and-unknown",
    ],
)
def test_create_task_refuses_what_asyncio_refuses(loop, call):
    expected = _asyncio_error(call)

    async def coro():
        pass

    c = coro()
    try:
        with pytest.raises(type(expected)) as got:
            call(loop, c)
    finally:
        c.close()
    assert str(got.value) == str(expected)


# ---- 3.14: call_soon_threadsafe's _ThreadSafeHandle --------------------------

needs_threadsafe_handle = pytest.mark.skipif(
    not hasattr(asyncio.events, "_ThreadSafeHandle"), reason="3.14's _ThreadSafeHandle"
)


@needs_threadsafe_handle
@pytest.mark.parametrize("ask", ["cancel", "cancelled"])
def test_threadsafe_handle_waits_for_its_running_callback(loop, ask):
    # From another thread, cancel() and cancelled() wait until the running
    # callback returns (asyncio takes the handle's lock in both and in _run).
    started, finished = threading.Event(), threading.Event()
    seen = {}

    def callback():
        started.set()
        threading.Event().wait(0.3)  # releases the GIL, as a blocking call would
        finished.set()

    def other_thread():
        handle = loop.call_soon_threadsafe(callback)
        seen["type"] = type(handle)
        started.wait(10)
        seen["answer"] = getattr(handle, ask)()
        seen["finished first"] = finished.is_set()
        loop.call_soon_threadsafe(loop.stop)

    t = threading.Thread(target=other_thread)
    t.start()
    loop.run_forever()
    t.join(10)
    assert seen["type"] is asyncio.events._ThreadSafeHandle
    assert seen["finished first"] is True
    assert seen["answer"] is (None if ask == "cancel" else False)


@needs_threadsafe_handle
def test_threadsafe_handle_cancelled_by_its_own_callback_still_runs_to_the_end(loop):
    handles = []

    def callback():
        handles[0].cancel()  # the same thread: the lock is re-entrant
        handles.append("ran on")
        loop.stop()

    handles.append(loop.call_soon_threadsafe(callback))
    loop.run_forever()
    assert handles[1:] == ["ran on"]
    assert handles[0].cancelled()


@needs_threadsafe_handle
def test_threadsafe_handle_cancelled_before_it_runs_does_not_run(loop):
    ran = []
    handle = loop.call_soon_threadsafe(ran.append, 1)
    handle.cancel()
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert ran == [] and handle.cancelled()
    assert repr(handle).startswith("<_ThreadSafeHandle cancelled")


# ---- 3.14: call graphs and `python -m asyncio ps` ----------------------------


@needs_314
def test_capture_call_graph(loop):
    async def leaf(event):
        await event.wait()

    async def worker(event):
        await leaf(event)

    async def main():
        event = asyncio.Event()
        graphs = {}
        async with asyncio.TaskGroup() as tg:
            a = tg.create_task(worker(event), name="alpha")
            tg.create_task(worker(event), name="beta")
            await asyncio.sleep(0)
            graphs["alpha"] = asyncio.capture_call_graph(a)
            graphs["self"] = asyncio.capture_call_graph()
            graphs["text"] = asyncio.format_call_graph(a)
            event.set()
        return graphs

    graphs = loop.run_until_complete(loop.create_task(main(), name="main"))
    alpha = graphs["alpha"]
    assert alpha.future.get_name() == "alpha"
    assert [f.frame.f_code.co_name for f in alpha.call_stack] == ["wait", "leaf", "worker"]
    (parent,) = alpha.awaited_by
    assert parent.future.get_name() == "main"
    assert [f.frame.f_code.co_name for f in graphs["self"].call_stack][:1] == ["main"]
    text = graphs["text"]
    assert re.search(r"\* Task\(name='alpha', id=0x[0-9a-f]+\)", text), text
    for name in ("Event.wait", "leaf", "worker", "Awaited by"):
        assert name in text, text


PS_TARGET = textwrap.dedent(
    """
    import asyncio, ctypes, sys, threading
    # Any process may read this one (Yama's ptrace_scope 1 allows only
    # ancestors otherwise): PR_SET_PTRACER, PR_SET_PTRACER_ANY.
    ctypes.CDLL(None).prctl(0x59616D61, ctypes.c_ulong(-1), 0, 0, 0)
    if sys.argv[1] == "zloopgo":
        import zloopgo
        new_loop = zloopgo.new_event_loop
    else:
        new_loop = asyncio.SelectorEventLoop
    release = threading.Event()

    async def leaf(event):
        await event.wait()

    async def worker(event):
        await leaf(event)

    async def main(names, ready):
        event = asyncio.Event()
        loop = asyncio.get_running_loop()
        threading.Thread(target=lambda: (release.wait(), loop.call_soon_threadsafe(event.set)),
                         daemon=True).start()
        async with asyncio.TaskGroup() as tg:
            for n in names:
                tg.create_task(worker(event), name=n)
            await asyncio.sleep(0)
            ready.set()

    def run(names, ready, main_name):
        loop = new_loop()
        try:
            loop.run_until_complete(loop.create_task(main(names, ready), name=main_name))
        finally:
            loop.close()

    ready = threading.Event()
    other = threading.Thread(target=run, args=(["gamma"], ready, "thread-main"))
    other.start()
    ready.wait()
    mine = threading.Event()
    threading.Thread(target=lambda: (mine.wait(), print("ready", flush=True), sys.stdin.read(),
                                     release.set()), daemon=True).start()
    run(["alpha", "beta"], mine, "main-main")
    other.join()
    """
)


def _normalized(text):
    """ps/pstree output without what differs between two runs: task ids
    (0x...) and thread ids (the first column of ps)."""
    text = re.sub(r"0x[0-9a-f]+", "0x?", text)
    return re.sub(r"(?m)^\d+\s", "tid ", text)


def _read_tasks(loop_name, script, env):
    """What `python -m asyncio ps` and `pstree` print for PS_TARGET running
    on `loop_name`'s loops."""
    target = subprocess.Popen(
        [sys.executable, str(script), loop_name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(env, PYTHONPATH=str(ZLOOPGO_HOME)),
    )
    out = {}
    try:
        assert target.stdout.readline().strip() == "ready"
        for command in ("ps", "pstree"):
            proc = subprocess.run(
                [sys.executable, "-m", "asyncio", command, str(target.pid)],
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
            )
            assert proc.returncode == 0, proc.stdout + proc.stderr
            out[command] = _normalized(proc.stdout)
    finally:
        target.stdin.close()
        target.wait(timeout=30)
    assert target.returncode == 0
    return out


@needs_314
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process on Linux")
def test_python_m_asyncio_ps_and_pstree_read_the_loops_tasks(tmp_path):
    # Two loops, one in the main thread and one in another: the tools print
    # the same for zloopgo as for asyncio (3.14's read the main thread's
    # tasks only, 3.15's every thread's).
    script = tmp_path / "target.py"
    script.write_text(PS_TARGET)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    stock = _read_tasks("asyncio", script, env)
    ours = _read_tasks("zloopgo", script, env)
    for name in ("main-main", "alpha", "beta"):
        assert name in stock["ps"] and f"(T) {name}" in stock["pstree"], stock
    assert "Event.wait -> leaf -> worker" in stock["ps"], stock
    assert ours["ps"] == stock["ps"]
    assert ours["pstree"] == stock["pstree"]


# ---- 3.14: per-thread task lists, _asyncio's C Task and Future ---------------


def test_tasks_and_futures_are_asyncios_c_types(loop):
    async def main():
        return asyncio.current_task(), loop.create_future()

    task = loop.create_task(main())
    current, fut = loop.run_until_complete(task)
    assert current is task
    try:
        import _asyncio
    except ImportError:  # pragma: no cover - CPython always has it
        return
    assert type(task) is _asyncio.Task
    assert type(fut) is _asyncio.Future
    fut.cancel()


def test_all_tasks_and_current_task_from_another_thread(loop_factory):
    lp = loop_factory()
    started = threading.Event()
    release = threading.Event()
    seen = {}

    async def blocker():
        started.set()
        release.wait(10)  # keeps this task the running one
        return "blocked"

    async def idle():
        await asyncio.sleep(10)

    async def main():
        idler = asyncio.create_task(idle(), name="idle")
        result = await asyncio.create_task(blocker(), name="blocker")
        idler.cancel()
        return result

    def run():
        seen["result"] = lp.run_until_complete(lp.create_task(main(), name="main"))

    t = threading.Thread(target=run)
    t.start()
    try:
        assert started.wait(10)
        running = asyncio.current_task(lp)
        names = sorted(task.get_name() for task in asyncio.all_tasks(lp))
    finally:
        release.set()
        t.join(10)
    try:
        assert names == ["blocker", "idle", "main"]
        assert running is not None and running.get_name() == "blocker"
        assert seen["result"] == "blocked"
        assert asyncio.all_tasks(lp) == set()
        assert asyncio.current_task(lp) is None
    finally:
        lp.close()


def test_a_task_left_pending_by_a_finished_thread_is_still_listed(loop_factory):
    lp = loop_factory()
    box = {}

    async def forever():
        await asyncio.Event().wait()

    def run():
        box["task"] = lp.create_task(forever(), name="orphan")
        lp.run_until_complete(asyncio.sleep(0.01))

    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    try:
        assert [task.get_name() for task in asyncio.all_tasks(lp)] == ["orphan"]
        assert not box["task"].done()
    finally:
        box["task"].cancel()
        lp.run_until_complete(asyncio.sleep(0))
        assert box["task"].cancelled()
        lp.close()


def test_current_task_in_callbacks_and_eager_tasks(loop):
    async def main():
        seen = []
        fut = loop.create_future()
        loop.call_soon(lambda: (seen.append(asyncio.current_task()), fut.set_result(None)))
        await fut

        async def eager():
            seen.append(asyncio.current_task())

        task = asyncio.eager_task_factory(loop, eager()) if sys.version_info >= (3, 12) else None
        if task is not None:
            await task
        return seen, task

    seen, task = loop.run_until_complete(main())
    assert seen[0] is None  # a plain callback runs outside any task
    if task is not None:
        assert seen[1] is task


# ---- free-threaded builds ----------------------------------------------------


FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
needs_free_threaded = pytest.mark.skipif(
    not FREE_THREADED, reason="needs a free-threaded CPython (scripts/ftpython makes one)"
)
# CPython's own warning when a module that declares Py_MOD_GIL_USED loads
GIL_ENABLED_WARNING = (
    "RuntimeWarning: The global interpreter lock (GIL) has been enabled to load "
    "module 'zloopgo._engine'"
)


def run_clean(args, env=None):
    """sys.executable with ARGS in an environment of its own: no PYTHON*
    variable the test run was started with (PYTHON_GIL, PYTHONWARNINGS),
    only PATH and what env adds."""
    return subprocess.run(
        [sys.executable, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ZLOOPGO_HOME,
        env={"PATH": os.defpath, **(env or {})},
    )


def test_import_refuses_the_gil_forced_off_faked():
    # On any build: sys.flags as a free-threaded CPython started with
    # PYTHON_GIL=0 shows it (gil 0). The real one: below.
    code = (
        "import sys, types; "
        "sys.flags = types.SimpleNamespace(**{n: getattr(sys.flags, n) for n in dir(sys.flags)"
        " if not n.startswith('_') and n not in ('count', 'index')} | {'gil': 0}); "
        "import zloopgo"
    )
    proc = run_clean(["-c", code])
    assert proc.returncode != 0
    assert "ImportError: zloopgo cannot run with the GIL forced off" in proc.stderr
    assert "PYTHON_GIL=0" in proc.stderr
    assert_names_the_free_threaded_section(proc.stderr)


@needs_free_threaded
@pytest.mark.parametrize(
    "options, env", [(["-X", "gil=0"], None), ([], {"PYTHON_GIL": "0"})], ids=["X", "env"]
)
def test_import_refuses_the_gil_forced_off(options, env):
    # A real free-threaded CPython with the GIL kept off: the import fails
    # before anything loads the engine.
    proc = run_clean([*options, "-c", "import sys; import zloopgo"], env)
    assert proc.returncode != 0
    assert "ImportError: zloopgo cannot run with the GIL forced off" in proc.stderr
    assert "PYTHON_GIL=0" in proc.stderr
    assert_names_the_free_threaded_section(proc.stderr)


@needs_free_threaded
def test_a_free_threaded_build_runs_with_the_gil_on():
    # The GIL is off until the engine loads (the first loop), then on, with
    # CPython's warning; the loop runs a task and a thread's call.
    code = textwrap.dedent(
        """
        import asyncio, sys, threading, zloopgo
        before = sys._is_gil_enabled()

        async def main():
            loop = asyncio.get_running_loop()
            done = asyncio.Event()
            threading.Thread(target=loop.call_soon_threadsafe, args=(done.set,)).start()
            await done.wait()
            return type(loop).__module__

        print(before, zloopgo.run(main()), sys._is_gil_enabled())
        """
    )
    proc = run_clean(["-c", code])
    assert proc.returncode == 0, proc.stderr
    if engine_without_gil():  # scripts/gil-off's test-only build keeps it off
        assert proc.stdout.split() == ["False", "zloopgo._loop", "False"]
        assert GIL_ENABLED_WARNING not in proc.stderr
        return
    assert proc.stdout.split() == ["False", "zloopgo._loop", "True"]
    assert GIL_ENABLED_WARNING in proc.stderr


def assert_names_the_free_threaded_section(message):
    """The message points to a section that exists, so that it cannot go
    stale when the docs move."""
    assert f"docs/architecture.md, '{FREE_THREADED_SECTION}'" in message
    headings = (ROOT / "docs" / "architecture.md").read_text().splitlines()
    assert f"## {FREE_THREADED_SECTION}" in headings


FREE_THREADED_SECTION = "Free-threaded builds: what is still missing"


def test_build_refuses_a_free_threaded_build_on_windows_only():
    # setup.py's refuse_free_threaded_windows, run alone against a sys and a
    # sysconfig that report each platform and build, and called first by
    # the build command.
    tree = ast.parse((ROOT / "setup.py").read_text())
    (fn,) = [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name == "refuse_free_threaded_windows"
    ]
    (build,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GoBuildExt"]
    (method,) = [
        n for n in build.body if isinstance(n, ast.FunctionDef) and n.name == "build_extension"
    ]
    first = method.body[0]
    assert isinstance(first, ast.Expr) and ast.unparse(first) == "refuse_free_threaded_windows()"

    class Sysconfig:
        def __init__(self, gil_disabled):
            self.gil_disabled = gil_disabled

        def get_config_var(self, name):
            return self.gil_disabled if name == "Py_GIL_DISABLED" else None

    class Sys:
        def __init__(self, platform):
            self.platform = platform
            self.exit = sys.exit

    ns = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "setup.py", "exec"), ns)
    for platform in ("linux", "darwin", "win32"):
        for default in (None, 0):
            ns["sys"], ns["sysconfig"] = Sys(platform), Sysconfig(default)
            ns["refuse_free_threaded_windows"]()  # a GIL build goes on
    for platform in ("linux", "darwin"):
        ns["sys"], ns["sysconfig"] = Sys(platform), Sysconfig(1)
        ns["refuse_free_threaded_windows"]()  # so does a free-threaded one
    ns["sys"], ns["sysconfig"] = Sys("win32"), Sysconfig(1)
    with pytest.raises(SystemExit) as stop:
        ns["refuse_free_threaded_windows"]()
    assert "free-threaded" in str(stop.value.code) and "Windows" in str(stop.value.code)
    assert_names_the_free_threaded_section(str(stop.value.code))


def test_the_engine_declares_that_it_uses_the_gil():
    # Py_mod_gil (3.13+), read from the built module's PyModuleDef: said
    # outright, Py_MOD_GIL_USED, so that a free-threaded interpreter would
    # keep the GIL on for the adapter. Before 3.13 the slot does not exist
    # (a module declaring it would not load): there the test reads the
    # definition only.
    engine = importlib.import_module("zloopgo._engine")

    class Slot(ctypes.Structure):
        _fields_ = [("slot", ctypes.c_int), ("value", ctypes.c_void_p)]

    if FREE_THREADED:  # PyObject_HEAD: a thread id, flags, a lock, two counts
        head = [
            ("ob_tid", ctypes.c_size_t),
            ("ob_flags", ctypes.c_uint16),
            ("ob_mutex", ctypes.c_uint8),
            ("ob_gc_bits", ctypes.c_uint8),
            ("ob_ref_local", ctypes.c_uint32),
            ("ob_ref_shared", ctypes.c_ssize_t),
        ]
    else:
        head = [("ob_refcnt", ctypes.c_ssize_t)]

    class ModuleDef(ctypes.Structure):  # this build's PyModuleDef
        _fields_ = [
            *head,
            ("ob_type", ctypes.c_void_p),
            ("m_init", ctypes.c_void_p),
            ("m_index", ctypes.c_ssize_t),
            ("m_copy", ctypes.c_void_p),
            ("m_name", ctypes.c_char_p),
            ("m_doc", ctypes.c_char_p),
            ("m_size", ctypes.c_ssize_t),
            ("m_methods", ctypes.c_void_p),
            ("m_slots", ctypes.POINTER(Slot)),
        ]

    get_def = ctypes.pythonapi.PyModule_GetDef
    get_def.argtypes, get_def.restype = [ctypes.py_object], ctypes.POINTER(ModuleDef)
    module_def = get_def(engine).contents
    assert module_def.m_name.decode() in ("_engine", "zloopgo._engine")
    slots = {}
    i = 0
    while module_def.m_slots[i].slot != 0:
        slots[module_def.m_slots[i].slot] = module_def.m_slots[i].value
        i += 1
    # Py_mod_exec is 2 and Py_mod_gil 4 up to 3.14; 3.15 numbers every
    # slot anew (slots_generated.h): 85 and 87
    exec_slot, gil_slot = (85, 87) if sys.version_info >= (3, 15) else (2, 4)
    assert exec_slot in slots
    if sys.version_info >= (3, 13):
        assert gil_slot in slots, "no Py_mod_gil slot: the default is left to the interpreter"
        if engine_without_gil():  # scripts/gil-off's test-only build
            assert slots[gil_slot] == 1  # Py_MOD_GIL_NOT_USED, (void *)1
        else:
            assert slots[gil_slot] is None  # Py_MOD_GIL_USED, (void *)0
