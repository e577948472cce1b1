"""Signals on stock asyncio and on zloopgo: add_signal_handler delivery
while the loop sleeps in the poller, removal, argument checks, and SIGINT
(KeyboardInterrupt) out of a blocked loop. Tests that could hang or kill
the interpreter on failure run in a subprocess."""

import asyncio
import os
import signal
import sys
import threading
import time

import pytest
from helpers import SCRIPT_FACTORIES, check, run_script

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Unix signals")


@pytest.fixture
def sigusr1_restored():
    old = signal.getsignal(signal.SIGUSR1)
    yield
    signal.signal(signal.SIGUSR1, old)


def test_signal_delivered_while_blocked_on_long_timer(loop, sigusr1_restored):
    got = loop.create_future()
    loop.add_signal_handler(signal.SIGUSR1, lambda *a: got.done() or got.set_result(a), "x", 1)
    far = loop.call_later(60, lambda: None)

    def sender():
        time.sleep(0.05)  # the loop is waiting for the 60 s timer
        os.kill(os.getpid(), signal.SIGUSR1)

    t = threading.Thread(target=sender)
    t.start()
    t0 = time.monotonic()
    try:
        assert loop.run_until_complete(asyncio.wait_for(got, 10)) == ("x", 1)
    finally:
        t.join(10)
        far.cancel()
        assert loop.remove_signal_handler(signal.SIGUSR1)
    assert time.monotonic() - t0 < 10  # liveness: not the 60 s timer


def test_signal_sent_from_callback(loop, sigusr1_restored):
    calls = []
    got = loop.create_future()

    def handler():
        calls.append(threading.get_ident())
        if not got.done():
            got.set_result(None)

    loop.add_signal_handler(signal.SIGUSR1, handler)
    loop.call_later(0.01, os.kill, os.getpid(), signal.SIGUSR1)
    try:
        loop.run_until_complete(asyncio.wait_for(got, 10))
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    # the handler runs as a loop callback, on the loop's thread
    assert calls == [threading.get_ident()]


def test_signal_handler_repeated_delivery(loop, sigusr1_restored):
    count = 0
    done = loop.create_future()

    def handler():
        nonlocal count
        count += 1
        if count == 3:
            done.set_result(None)
        else:
            loop.call_later(0.005, os.kill, os.getpid(), signal.SIGUSR1)

    loop.add_signal_handler(signal.SIGUSR1, handler)
    loop.call_soon(os.kill, os.getpid(), signal.SIGUSR1)
    try:
        loop.run_until_complete(asyncio.wait_for(done, 10))
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    assert count == 3


def test_signal_handler_exception_goes_to_handler(loop, loop_errors, sigusr1_restored):
    done = loop.create_future()

    def handler():
        loop.call_soon(done.set_result, None)
        raise ValueError("in signal handler")

    loop.add_signal_handler(signal.SIGUSR1, handler)
    loop.call_soon(os.kill, os.getpid(), signal.SIGUSR1)
    try:
        loop.run_until_complete(asyncio.wait_for(done, 10))
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    assert len(loop_errors) == 1
    assert isinstance(loop_errors[0]["exception"], ValueError)


def test_replaced_signal_handler(loop, sigusr1_restored):
    calls = []
    done = loop.create_future()
    loop.add_signal_handler(signal.SIGUSR1, calls.append, "old")

    def new():
        calls.append("new")
        done.set_result(None)

    loop.add_signal_handler(signal.SIGUSR1, new)
    loop.call_soon(os.kill, os.getpid(), signal.SIGUSR1)
    try:
        loop.run_until_complete(asyncio.wait_for(done, 10))
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    assert calls == ["new"]


def test_signal_between_runs_not_lost(loop, sigusr1_restored):
    # A handler added while the loop runs (as asyncio.run(main()) code
    # does); a signal that arrives after run_until_complete returned is
    # handled by the next run, through the wake-up descriptor.
    got = loop.create_future()

    async def install():
        loop.add_signal_handler(signal.SIGUSR1, lambda: got.done() or got.set_result("handled"))

    loop.run_until_complete(install())
    try:
        signal.raise_signal(signal.SIGUSR1)  # the loop is not running
        assert loop.run_until_complete(asyncio.wait_for(got, 2)) == "handled"
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)


def test_user_wakeup_fd_untouched_while_running(loop):
    # With no signal handler of the loop, asyncio leaves a wake-up
    # descriptor the application set alone, also while the loop runs.
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    old_handler = signal.signal(signal.SIGUSR2, lambda *args: None)
    old_fd = signal.set_wakeup_fd(w)
    try:

        async def main():
            current = signal.set_wakeup_fd(-1)
            signal.set_wakeup_fd(current)
            os.kill(os.getpid(), signal.SIGUSR2)
            await asyncio.sleep(0.02)
            return current

        assert loop.run_until_complete(main()) == w
        assert os.read(r, 16) == bytes([signal.SIGUSR2])
        assert signal.set_wakeup_fd(-1) == w  # still the application's after the run
    finally:
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGUSR2, old_handler)
        os.close(r)
        os.close(w)


def test_remove_signal_handler(loop, sigusr1_restored):
    assert loop.remove_signal_handler(signal.SIGUSR1) is False
    loop.add_signal_handler(signal.SIGUSR1, lambda: None)
    assert signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, signal.SIG_IGN)
    assert loop.remove_signal_handler(signal.SIGUSR1) is True
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    assert loop.remove_signal_handler(signal.SIGUSR1) is False
    # with no handler left, the wake-up descriptor is unset again
    assert signal.set_wakeup_fd(-1) == -1


def test_close_removes_signal_handlers(loop_factory, sigusr1_restored):
    lp = loop_factory()
    lp.add_signal_handler(signal.SIGUSR1, lambda: None)
    lp.close()
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    assert signal.set_wakeup_fd(-1) == -1


def test_invalid_signal_value_error(loop):
    for sig in (0, -1, signal.NSIG, 10_000):
        with pytest.raises(ValueError):
            loop.add_signal_handler(sig, lambda: None)
        with pytest.raises(ValueError):
            loop.remove_signal_handler(sig)
    with pytest.raises(TypeError):
        loop.add_signal_handler("SIGUSR1", lambda: None)


def test_sigkill_runtime_error(loop):
    with pytest.raises(RuntimeError, match=f"sig {int(signal.SIGKILL)} cannot be caught"):
        loop.add_signal_handler(signal.SIGKILL, lambda: None)
    assert loop.remove_signal_handler(signal.SIGKILL) is False


def test_coroutine_function_handler_type_error(loop):
    async def handler():
        pass

    with pytest.raises(TypeError, match="coroutines cannot be used with add_signal_handler"):
        loop.add_signal_handler(signal.SIGUSR1, handler)
    coro = handler()
    try:
        with pytest.raises(TypeError, match="coroutines cannot be used with add_signal_handler"):
            loop.add_signal_handler(signal.SIGUSR1, coro)
    finally:
        coro.close()
    assert loop.remove_signal_handler(signal.SIGUSR1) is False


def test_add_signal_handler_on_closed_loop(loop):
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        loop.add_signal_handler(signal.SIGUSR1, lambda: None)


def test_add_signal_handler_from_other_thread(loop):
    errors = []

    def other():
        try:
            loop.add_signal_handler(signal.SIGUSR1, lambda: None)
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert len(errors) == 1
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_sigint_interrupts_blocked_loop(loop_name):
    # No SIGINT handler of the loop: Python's default turns SIGINT into
    # KeyboardInterrupt, which must come out of run_until_complete while the
    # loop waits in the poller; the loop then runs again.
    proc = run_script(
        loop_name,
        """
        loop = factory()
        main = threading.main_thread().ident

        def sender():
            time.sleep(0.1)
            signal.pthread_kill(main, signal.SIGINT)

        t = threading.Thread(target=sender)
        t.start()
        t0 = time.monotonic()
        try:
            loop.run_until_complete(asyncio.sleep(60))
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
        print("fast", time.monotonic() - t0 < 20)
        t.join()
        print("running", loop.is_running())
        print("again", loop.run_until_complete(asyncio.sleep(0.01, "ok")))
        fut = loop.create_future()
        loop.call_later(0.01, fut.set_result, "timer")
        print("timer", loop.run_until_complete(fut))
        loop.close()
        """,
    )
    check(proc, "KeyboardInterrupt", "fast True", "running False", "again ok", "timer timer")


@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_sigint_process_directed_with_wakeup_fd(loop_name):
    # With a signal handler installed, the wake-up descriptor wakes the loop
    # whichever thread the kernel delivers SIGINT to.
    proc = run_script(
        loop_name,
        """
        loop = factory()
        loop.add_signal_handler(signal.SIGUSR1, lambda: None)

        def sender():
            time.sleep(0.1)
            os.kill(os.getpid(), signal.SIGINT)

        t = threading.Thread(target=sender)
        t.start()
        try:
            loop.run_until_complete(asyncio.sleep(60))
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
        t.join()
        print("again", loop.run_until_complete(asyncio.sleep(0.01, "ok")))
        loop.close()
        """,
    )
    check(proc, "KeyboardInterrupt", "again ok")


@pytest.mark.skipif(not hasattr(asyncio, "Runner"), reason="asyncio.Runner is new in 3.11")
@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_runner_sigint_cancels_main_task(loop_name):
    # asyncio.Runner installs its own SIGINT handler: the main task is
    # cancelled (its finally runs), then KeyboardInterrupt is raised.
    proc = run_script(
        loop_name,
        """
        main_ident = threading.main_thread().ident

        async def main():
            loop = asyncio.get_running_loop()
            print("loop", type(loop).__module__, flush=True)
            threading.Timer(0.1, signal.pthread_kill, (main_ident, signal.SIGINT)).start()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                print("cancelled", flush=True)
                raise

        try:
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(main())
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
        print("handler restored", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        """,
    )
    check(proc, "cancelled", "KeyboardInterrupt", "handler restored True")
    module = "zloopgo._loop" if loop_name == "zloopgo" else "asyncio.unix_events"
    assert f"loop {module}" in proc.stdout.splitlines()


@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_add_signal_handler_sigint(loop_name):
    # A loop handler for SIGINT replaces KeyboardInterrupt.
    proc = run_script(
        loop_name,
        """
        loop = factory()
        got = loop.create_future()
        loop.add_signal_handler(signal.SIGINT, got.set_result, "handled")
        main_ident = threading.main_thread().ident
        threading.Timer(0.05, signal.pthread_kill, (main_ident, signal.SIGINT)).start()
        print(loop.run_until_complete(asyncio.wait_for(got, 10)))
        loop.remove_signal_handler(signal.SIGINT)
        print("restored", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        loop.close()
        """,
    )
    check(proc, "handled", "restored True")


def test_zloopgo_many_signals_from_threads():
    # Many SIGUSR1s sent from other threads, most delivered while the Go
    # engine waits: each must reach the handler (none lost to a Go thread),
    # and the process must not crash.
    proc = run_script(
        "zloopgo",
        """
        loop = factory()
        seen = 0
        done = loop.create_future()

        def handler():
            global seen
            seen += 1
            if seen == 50:
                done.set_result(None)
            else:
                threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGUSR1)).start()

        loop.add_signal_handler(signal.SIGUSR1, handler)
        loop.call_soon(os.kill, os.getpid(), signal.SIGUSR1)
        loop.run_until_complete(asyncio.wait_for(done, 20))
        print("seen", seen)
        loop.close()
        """,
    )
    check(proc, "seen 50")


def test_a_signal_before_the_first_handler_does_not_reach_it(loop, sigusr1_restored):
    # A signal with a Python handler and no loop handler, then the loop's
    # first handler for it, some iterations later: asyncio routes nothing to
    # its self-pipe before add_signal_handler, so the handler hears only the
    # signal sent after it. (zloopgo's run made the self-pipe the wakeup fd
    # until issue 39, and skips the waits that cannot block while only the
    # self-pipe is watched, capi/fds.c, zl_fds_only_self_pipe: a byte left
    # there must not reach the first handler.)
    signal.signal(signal.SIGUSR1, lambda *a: None)
    calls = []

    async def spin():
        for _ in range(5):
            await asyncio.sleep(0)

    async def main():
        os.kill(os.getpid(), signal.SIGUSR1)
        await spin()
        loop.add_signal_handler(signal.SIGUSR1, calls.append, "handled")
        await spin()
        before = list(calls)
        os.kill(os.getpid(), signal.SIGUSR1)
        await spin()
        return before, list(calls)

    try:
        assert loop.run_until_complete(main()) == ([], ["handled"])
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)


def test_zloopgo_polls_only_what_a_program_could_see(sigusr1_restored):
    # Waits that cannot block: skipped while the loop's self-pipe is all it
    # watches and no signal handler is set (its reader would do nothing a
    # program sees); made on every iteration once a handler is set or
    # another descriptor is watched, as asyncio's.
    import socket

    import zloopgo

    loop = zloopgo.new_event_loop()

    def waits(n):
        async def spin():
            for _ in range(n):
                await asyncio.sleep(0)

        before = zloopgo.stats(loop)
        loop.run_until_complete(spin())
        after = zloopgo.stats(loop)
        return after["waits"] - before["waits"], after["waits_skipped"] - before["waits_skipped"]

    a, b = socket.socketpair()
    try:
        made, skipped = waits(100)
        assert made <= 2 and skipped >= 99  # the first iteration may poll
        loop.add_signal_handler(signal.SIGUSR1, lambda: None)
        made, skipped = waits(100)
        assert made >= 100 and skipped <= 1
        loop.remove_signal_handler(signal.SIGUSR1)
        assert waits(100)[1] >= 99
        loop.add_reader(a, lambda: None)  # another descriptor: polled
        made, skipped = waits(100)
        assert made >= 100 and skipped <= 1
        loop.remove_reader(a)
        assert waits(100)[1] >= 99
    finally:
        loop.close()
        a.close()
        b.close()


def test_signals_without_a_handler_never_fill_the_self_pipe_loudly(loop_name):
    # Thousands of signals with a Python handler and no loop handler while
    # the loop only yields: asyncio routes none to its self-pipe (nor does
    # zloopgo since issue 39; it made the self-pipe the wakeup fd while it
    # ran, and watching nothing else read it only when it waited). Nothing
    # may print CPython's "Exception ignored when trying to write to the
    # signal wakeup fd", on both loops; and the loop still hears the
    # signals its first handler is set for afterwards.
    proc = run_script(
        loop_name,
        """
        loop = factory()
        loop._csock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1024)
        heard = []
        signal.signal(signal.SIGUSR1, lambda *a: heard.append(1))

        async def main():
            for _ in range(5000):
                os.kill(os.getpid(), signal.SIGUSR1)
                await asyncio.sleep(0)
            got = loop.create_future()
            loop.add_signal_handler(signal.SIGUSR1, got.set_result, "handled")
            os.kill(os.getpid(), signal.SIGUSR1)
            return await asyncio.wait_for(got, 10)

        print(loop.run_until_complete(main()), len(heard))
        loop.remove_signal_handler(signal.SIGUSR1)
        loop.close()
        """,
    )
    check(proc, "handled 5000")
    assert "wakeup fd" not in proc.stderr, proc.stderr


def test_no_wakeup_fd_while_running_without_a_signal_handler(loop, sigusr1_restored):
    # A host that sets its own wakeup descriptor while the loop runs (Trio's
    # guest mode does, and warns unless it finds -1) finds none, as on
    # asyncio, which sets one only for add_signal_handler; and keeps its
    # own after the run. zloopgo made its self-pipe the wakeup fd for every
    # run on the main thread (issue 39, row 12).
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    signal.signal(signal.SIGUSR1, lambda *args: None)

    async def main():
        await asyncio.sleep(0)
        found = signal.set_wakeup_fd(w)  # the host's, as a guest run begins
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.sleep(0.02)
        return found

    try:
        before = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(before)
        found = loop.run_until_complete(main())
        assert (before, found) == (-1, -1)
        assert os.read(r, 16) == bytes([signal.SIGUSR1])
        assert signal.set_wakeup_fd(-1) == w  # the host's still, after the run
    finally:
        signal.set_wakeup_fd(-1)
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("busy", ["idle", "a thread holding the GIL"])
@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_ctrl_c_from_another_process_ends_a_wait_in_the_poller(loop_name, busy):
    # SIGINT as a terminal's Ctrl+C sends it: to the process, from another
    # process, while the loop sleeps in the poller with the GIL released
    # (and, in one variant, another thread runs Python code and holds the
    # GIL most of the time), with no signal handler and no wakeup
    # descriptor: KeyboardInterrupt comes out of run_until_complete at
    # once, every time, and the loop runs again afterwards.
    proc = run_script(
        loop_name,
        f"""
        import subprocess

        loop = factory()
        if {busy!r} != "idle":
            def spin():
                while True:
                    sum(range(1000))
            threading.Thread(target=spin, daemon=True).start()
        killer = subprocess.Popen(
            [sys.executable, "-c",
             "import os, signal, sys, time\\n"
             "print('ready', flush=True)\\n"
             "for line in sys.stdin:\\n"
             "    time.sleep(0.05)\\n"
             f"    os.kill({{os.getpid()}}, signal.SIGINT)\\n"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        # the killer's start-up is no part of a wait: under qemu-user on a
        # loaded machine one wait of 20, start-up included, took over 5 s
        assert killer.stdout.readline() == "ready\\n"

        async def wait_long():
            assert signal.set_wakeup_fd(-1) == -1  # none set: the poller must be interrupted
            await asyncio.sleep(60)

        prompt = 0
        for _ in range(20):
            killer.stdin.write("go\\n")
            killer.stdin.flush()
            t0 = time.monotonic()
            try:
                loop.run_until_complete(wait_long())
            except KeyboardInterrupt:
                prompt += time.monotonic() - t0 < 5
        killer.stdin.close()
        killer.wait()
        killer.stdout.close()
        print("prompt", prompt)
        print("again", loop.run_until_complete(asyncio.sleep(0.01, "ok")))
        loop.close()
        """,
        timeout=300,
    )
    check(proc, "prompt 20", "again ok")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/task")
def test_the_go_runtimes_threads_leave_process_signals_to_pythons():
    # What lets Ctrl+C end a wait without a wakeup descriptor: the kernel
    # delivers a process-directed signal to a thread that does not block
    # it, and Go's runtime threads (which Python's handlers never run on)
    # block the ones Python may handle, so these reach the main thread.
    proc = run_script(
        "zloopgo",
        """
        loop = factory()
        loop.run_until_complete(asyncio.sleep(0.05))
        python_threads = {threading.get_native_id()}
        def blocks(tid, sig):
            status = open(f"/proc/self/task/{tid}/status").read()
            mask = int(status.split("SigBlk:")[1].split()[0], 16)
            return bool(mask & (1 << (sig - 1)))
        others = [int(t) for t in os.listdir("/proc/self/task") if int(t) not in python_threads]
        print("go threads", len(others) > 0)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
            print(sig.name, "blocked on go threads", all(blocks(t, sig) for t in others))
            print(sig.name, "blocked on the main thread", blocks(threading.get_native_id(), sig))
        loop.close()
        """,
    )
    check(proc, "go threads True")
    for sig in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1"):
        check(proc, f"{sig} blocked on go threads True", f"{sig} blocked on the main thread False")
