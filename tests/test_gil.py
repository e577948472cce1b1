"""zloopgo releases the GIL while its Go engine waits in the poller, so
other Python threads run meanwhile. Liveness checks, not timing targets."""

import asyncio
import subprocess
import sys
import textwrap
import threading

import zloopgo


def run_script(code, timeout=60):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_thread_progresses_while_loop_waits_on_timer():
    loop = zloopgo.new_event_loop()
    counter = 0
    stop = threading.Event()

    def spin():
        nonlocal counter
        while not stop.is_set():
            counter += 1  # pure-Python work

    async def main():
        before = counter
        await asyncio.sleep(0.3)  # a timer: the engine waits in epoll
        return counter - before

    t = threading.Thread(target=spin)
    t.start()
    try:
        progress = loop.run_until_complete(main())
    finally:
        stop.set()
        t.join(10)
        loop.close()
    assert progress > 1000, progress


def test_thread_progresses_while_loop_waits_without_timeout():
    # No timer: the engine waits until a descriptor is ready. The only thing
    # that makes it ready is another Python thread, which must get the GIL
    # to count to 100000 first. A GIL held across the wait is a deadlock, so
    # this runs in a subprocess.
    proc = run_script(
        """
        import os, threading, zloopgo

        loop = zloopgo.new_event_loop()
        r, w = os.pipe()
        counted = []

        def spin():
            n = 0
            while n < 100_000:
                n += 1
            counted.append(n)
            os.write(w, b"x")

        fut = loop.create_future()
        loop.add_reader(r, lambda: fut.set_result(os.read(r, 1)))
        t = threading.Thread(target=spin)
        loop.call_soon(t.start)
        assert loop.run_until_complete(fut) == b"x"
        t.join()
        loop.remove_reader(r)
        loop.close()
        print("progress", counted[0])
        """,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["progress", "100000"]


def test_threads_progress_while_several_loops_wait():
    # Two zloopgo loops in two threads both waiting in their pollers, and a
    # third thread doing Python work: all make progress.
    proc = run_script(
        """
        import asyncio, threading, zloopgo

        counter = 0
        stop = threading.Event()

        def spin():
            global counter
            while not stop.is_set():
                counter += 1

        progress = {}

        def loop_thread(name):
            loop = zloopgo.new_event_loop()

            async def main():
                before = counter
                await asyncio.sleep(0.3)
                return counter - before

            try:
                progress[name] = loop.run_until_complete(main())
            finally:
                loop.close()

        s = threading.Thread(target=spin)
        s.start()
        ts = [threading.Thread(target=loop_thread, args=(n,)) for n in "ab"]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        stop.set()
        s.join()
        print(min(progress.values()))
        """,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 1000, proc.stdout
