"""fork() and zloopgo (Linux). The Go runtime does not survive fork():
importing zloopgo must not start it, so children of a parent that only
imported it can use it; a child forked after the engine started must get a
clear RuntimeError, never a hang. Every scenario runs in its own process
with a timeout, so a hang fails the test instead of stalling the suite."""

import subprocess
import sys
import textwrap

import pytest
from helpers import SCRIPT_FACTORIES, check, run_script

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

# Shared by the scenario scripts: wait for a forked child with a deadline.
PRELUDE = """
import asyncio, os, signal, sys, time

def wait_child(pid, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hung"

async def main(x):
    await asyncio.sleep(0.001)
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    loop.call_later(0.001, fut.set_result, x * 2)
    return type(loop).__module__, await fut
"""


def run_scenario(tmp_path, body, timeout=60):
    script = tmp_path / "scenario.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(tmp_path),
    )
    return proc


def test_import_alone_does_not_start_engine(tmp_path):
    proc = run_scenario(
        tmp_path,
        """
        import zloopgo
        print("loaded" if "zloopgo._engine" in sys.modules else "not loaded")
        zloopgo.install()
        asyncio.get_event_loop_policy()
        print("loaded" if "zloopgo._engine" in sys.modules else "not loaded")
        zloopgo.uninstall()
        zloopgo.run(main(1))
        print("loaded" if "zloopgo._engine" in sys.modules else "not loaded")
        """,
    )
    check(proc)
    assert proc.stdout.split("\n")[:3] == ["not loaded", "not loaded", "loaded"]


def test_os_fork_after_import_child_runs(tmp_path):
    # (a) the parent only imported zloopgo; the child runs a loop.
    proc = run_scenario(
        tmp_path,
        """
        import zloopgo
        assert "zloopgo._engine" not in sys.modules
        pid = os.fork()
        if pid == 0:
            try:
                result = zloopgo.run(main(21))
                code = 0 if result == ("zloopgo._loop", 42) else 1
            except BaseException as exc:
                print("child failed:", repr(exc), flush=True)
                code = 2
            os._exit(code)
        else:
            print("child exit", wait_child(pid))
            # the parent can still start the engine afterwards
            print("parent", zloopgo.run(main(1))[1])
        """,
    )
    check(proc, "child exit 0", "parent 2")


def test_os_fork_after_loop_ran_child_gets_runtime_error(tmp_path):
    # (b) the parent ran a loop (the engine started), then forks.
    proc = run_scenario(
        tmp_path,
        """
        import zloopgo
        assert zloopgo.run(main(1)) == ("zloopgo._loop", 2)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                zloopgo.new_event_loop()
            except RuntimeError as exc:
                print("child error:", exc, flush=True)
                if "fork" not in str(exc):
                    code = 3
            else:
                print("child: no error", flush=True)
                code = 4
            try:
                zloopgo.run(main(1))
            except RuntimeError as exc:
                if "fork" not in str(exc):
                    code = 5
            else:
                code = 6
            # stock asyncio still works in the child
            if asyncio.run(main(5)) != ("asyncio.unix_events", 10):
                code = 7
            sys.stdout.flush()
            os._exit(code)
        else:
            print("child exit", wait_child(pid))
            # and the parent's engine is unaffected
            print("parent", zloopgo.run(main(2))[1])
        """,
    )
    check(proc, "child exit 0", "parent 4")
    assert "child error: " in proc.stdout


OPEN_LOOP = """
import zloopgo
loop = zloopgo.new_event_loop()
r, w = os.pipe()
loop.add_reader(r, lambda: None)
loop.call_later(100, print)
loop.run_until_complete(asyncio.sleep(0))
"""


def test_os_fork_inherited_loop_raises_in_child(tmp_path):
    # The parent forks while one of its loops is open: in the child, using
    # that loop raises RuntimeError instead of calling into Go.
    proc = run_scenario(
        tmp_path,
        OPEN_LOOP
        + """
pid = os.fork()
if pid == 0:
    errors = []
    coro = asyncio.sleep(0)
    # a name lookup would start or wake a resolver goroutine (issue 19, row 8)
    lookups = [loop.getaddrinfo("127.1", 80), loop.getnameinfo(("127.0.0.1", 80))]
    for action in (
        lambda: loop.run_until_complete(coro),
        lambda: loop.add_reader(w, print),
        lambda: lookups[0].send(None),
        lambda: lookups[1].send(None),
    ):
        try:
            action()
        except RuntimeError as exc:
            errors.append("fork" in str(exc))
        else:
            errors.append("no error")
    print("child errors", errors, flush=True)
    # a removal is only forgotten: the reactor is shared with the parent
    print("child removes", loop.remove_reader(r), loop.remove_reader(r), flush=True)
    os._exit(0)
else:
    print("child exit", wait_child(pid))
    print("parent removes", loop.remove_reader(r))
    print("parent", loop.run_until_complete(main(3))[1])
    loop.close()
""",
    )
    check(
        proc,
        "child exit 0",
        "child errors [True, True, True, True]",
        "child removes True False",
        "parent removes True",
        "parent 6",
    )


def test_os_fork_inherited_loop_closes_in_child(tmp_path):
    # Closing the inherited loop in the child works (the adapter leaks the
    # engine's descriptors rather than calling the parent's Go runtime), and
    # the interpreter then exits normally with nothing reported.
    proc = run_scenario(
        tmp_path,
        OPEN_LOOP
        + """
pid = os.fork()
if pid == 0:
    try:
        loop.close()
        print("child closed", loop.is_closed(), flush=True)
    except RuntimeError as exc:
        print("child close failed:", exc, flush=True)
    sys.exit(0)  # a normal interpreter exit
else:
    print("child exit", wait_child(pid))
    loop.remove_reader(r)
    print("parent", loop.run_until_complete(main(3))[1])
    loop.close()
""",
    )
    check(proc, "child exit 0", "child closed True", "parent 6")
    assert "Exception ignored" not in proc.stderr, proc.stderr


def test_os_fork_inherited_unclosed_loop_finalized_in_child(tmp_path):
    # The child never touches the inherited loop; when it is finalized
    # (asyncio's __del__ closes an unclosed loop) nothing is reported, and
    # the child exits normally without hanging.
    proc = run_scenario(
        tmp_path,
        OPEN_LOOP
        + """
pid = os.fork()
if pid == 0:
    import gc, warnings
    print("child", asyncio.run(main(1))[1], flush=True)
    unraisable = []
    sys.unraisablehook = lambda u: unraisable.append(repr(u.exc_value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        del loop
        gc.collect()
    print("unraisable", unraisable, flush=True)
    sys.exit(0)
else:
    print("child exit", wait_child(pid))
    loop.remove_reader(r)
    loop.close()
""",
    )
    check(proc, "child 2", "unraisable []", "child exit 0")


MP_BODY = """
import multiprocessing as mp
import zloopgo

def child_run(q):
    q.put(zloopgo.run(main(21)))

def child_catch(q):
    try:
        zloopgo.new_event_loop()
    except RuntimeError as exc:
        q.put(("RuntimeError", str(exc)))
    else:
        q.put(("no error", ""))

def child_raise():
    zloopgo.new_event_loop()

def start(ctx, target, *args, timeout=30):
    p = ctx.Process(target=target, args=args)
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        p.join()
        return "hung"
    return p.exitcode

if __name__ == "__main__":
{scenario}
"""


def mp_scenario(tmp_path, scenario):
    body = MP_BODY.format(scenario=textwrap.indent(textwrap.dedent(scenario), "    "))
    return run_scenario(tmp_path, body)


def test_multiprocessing_fork_after_import_child_works(tmp_path):
    # (c)
    proc = mp_scenario(
        tmp_path,
        """
        assert "zloopgo._engine" not in sys.modules
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        print("exit", start(ctx, child_run, q))
        print("result", q.get(timeout=10))
        """,
    )
    check(proc, "exit 0", "result ('zloopgo._loop', 42)")


def test_multiprocessing_fork_after_loop_ran_child_gets_runtime_error(tmp_path):
    # (d)
    proc = mp_scenario(
        tmp_path,
        """
        zloopgo.run(main(1))
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        print("catch exit", start(ctx, child_catch, q))
        kind, message = q.get(timeout=10)
        print("kind", kind)
        print("mentions fork", "fork" in message)
        # uncaught, the error ends the child with exit code 1
        print("raise exit", start(ctx, child_raise))
        print("parent", zloopgo.run(main(4))[1])
        """,
    )
    check(
        proc,
        "catch exit 0",
        "kind RuntimeError",
        "mentions fork True",
        "raise exit 1",
        "parent 8",
    )
    assert "RuntimeError" in proc.stderr  # the child's traceback


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_multiprocessing_fresh_interpreter_after_loop_ran_child_works(tmp_path, method):
    # (e): spawn and forkserver children start without the parent's Go runtime
    proc = mp_scenario(
        tmp_path,
        f"""
        zloopgo.run(main(1))
        ctx = mp.get_context({method!r})
        q = ctx.Queue()
        print("exit", start(ctx, child_run, q))
        print("result", q.get(timeout=10))
        """,
    )
    check(proc, "exit 0", "result ('zloopgo._loop', 42)")


def test_forked_child_flag(tmp_path):
    proc = run_scenario(
        tmp_path,
        """
        import zloopgo
        zloopgo.run(main(1))
        from zloopgo import _engine
        print("parent", _engine.forked_child())
        pid = os.fork()
        if pid == 0:
            print("child", _engine.forked_child(), flush=True)
            try:
                zloopgo.build_info()
            except RuntimeError:
                print("build_info RuntimeError", flush=True)
            os._exit(0)
        else:
            print("child exit", wait_child(pid))
        """,
    )
    check(proc, "parent False", "child True", "build_info RuntimeError", "child exit 0")


@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_call_soon_threadsafe_in_a_forked_child_wakes_nothing_of_the_parent(loop_name):
    # A thread forks while the loop sleeps in the poller; the child calls
    # the inherited loop's call_soon_threadsafe (a library's callback, a
    # signal handler such as asyncio.Runner's SIGINT one). The child gets
    # its handle (the call works, as on asyncio) and never hangs; on
    # zloopgo nothing reaches the parent: the waker the child inherited
    # is the parent's reactor's (issue 39, row 18: its copy of the loop
    # said the loop slept, and the child's wake-up woke the parent's).
    # asyncio's child writes the self-pipe it shares with its parent, which
    # wakes the parent's selector; that is asyncio's and not compared.
    proc = run_script(
        loop_name,
        """
        loop = factory()
        loop.run_until_complete(asyncio.sleep(0.01))

        # The parent waits on a pipe that only the forking thread writes,
        # once the child has exited: no timer is pending meanwhile, so the
        # loop wakes for that write alone unless something else wakes it
        # (a timer's deadline would add iterations of its own).
        def forker(wake_w, fork):
            time.sleep(0.3)  # the loop sleeps in the poller meanwhile
            if fork:
                pid = os.fork()
                if pid == 0:
                    try:
                        handles = [loop.call_soon_threadsafe(print, "never") for _ in range(3)]
                        ok = all(isinstance(h, asyncio.Handle) for h in handles)
                        os.write(1, f"child call works {ok}\\n".encode())
                    except BaseException as exc:
                        os.write(1, f"child error {exc!r}\\n".encode())
                    os._exit(0)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        print("child exit", os.waitstatus_to_exitcode(status), flush=True)
                        break
                    time.sleep(0.01)
                else:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    print("child hung", flush=True)
                time.sleep(0.3)  # a wake-up the child caused lands meanwhile
            os.write(wake_w, b"x")

        def iterations():
            if type(loop).__module__.startswith("zloopgo"):
                return zloopgo.stats(loop)["iterations"]
            return 0

        def run_until_written(fork):
            wake_r, wake_w = os.pipe()
            written = loop.create_future()
            loop.add_reader(wake_r, lambda: written.done() or written.set_result(None))
            before = iterations()
            thread = threading.Thread(target=forker, args=(wake_w, fork))
            thread.start()
            loop.run_until_complete(written)
            woken = iterations() - before
            thread.join()
            loop.remove_reader(wake_r)
            os.close(wake_r)
            os.close(wake_w)
            return woken

        quiet = run_until_written(False)
        forked = run_until_written(True)
        print("parent woken", forked > quiet)
        print("iterations quiet", quiet, "forked", forked)
        loop.close()
        """,
    )
    check(proc, "child call works True", "child exit 0")
    if loop_name == "zloopgo":
        check(proc, "parent woken False")
