"""asyncio's own introspection on zloopgo, dual-run against stock asyncio:
all_tasks() and current_task(), a task's stack and (3.14+) its call
graph, the `python -m asyncio ps/pstree PID` tools and sys.remote_exec
(3.14+) against a process running a loop, debug mode from
PYTHONASYNCIODEBUG=1 and -X dev, and the perf trampoline of -X perf /
PYTHONPERFSUPPORT=1 (3.12+). The external tools read the process with
ptrace rights: this suite runs them as root, as README.md tells users to.
Tests of what a Python version does not have are not defined on it."""

import asyncio
import io
import os
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import SCRIPT_FACTORIES, check, run_script


def test_all_tasks_and_current_task(loop):
    async def child(started):
        started.set()
        await asyncio.sleep(10)

    async def main():
        me = asyncio.current_task()
        started = asyncio.Event()
        task = asyncio.create_task(child(started), name="child")
        await started.wait()
        tasks = asyncio.all_tasks()
        assert asyncio.current_task(loop) is me
        task.cancel()
        return me, task, tasks

    me, task, tasks = loop.run_until_complete(main())
    assert tasks == {me, task}
    assert asyncio.current_task(loop) is None
    assert asyncio.all_tasks(loop) == set()


def test_a_suspended_tasks_stack(loop):
    async def inner(ready):
        ready.set()
        await asyncio.sleep(10)

    async def main():
        ready = asyncio.Event()
        task = asyncio.create_task(inner(ready))
        await ready.wait()
        frames = task.get_stack()
        out = io.StringIO()
        task.print_stack(file=out)
        task.cancel()
        return frames, out.getvalue()

    frames, printed = loop.run_until_complete(main())
    assert [f.f_code.co_name for f in frames] == ["inner"]
    assert "in inner" in printed


if sys.version_info >= (3, 14):

    def test_capture_and_print_call_graph(loop):
        async def leaf(ready):
            ready.set()
            await asyncio.sleep(10)

        async def middle(ready):
            await leaf(ready)

        async def main():
            ready = asyncio.Event()
            task = asyncio.create_task(middle(ready), name="worker")
            await ready.wait()
            graph = asyncio.capture_call_graph(task)
            out = io.StringIO()
            asyncio.print_call_graph(task, file=out)
            own = asyncio.capture_call_graph()  # the current task's
            task.cancel()
            return task, graph, out.getvalue(), own

        task, graph, printed, own = loop.run_until_complete(main())
        assert graph.future is task
        assert [f.frame.f_code.co_name for f in graph.call_stack] == ["sleep", "leaf", "middle"]
        assert "* Task(name='worker'" in printed and "middle()" in printed
        assert [f.frame.f_code.co_name for f in own.call_stack][-1] == "main"


# A process running a loop with known tasks until its stdin closes; it
# prints its pid once they all wait.
TARGET = """
import asyncio, sys, zloopgo, threading
factory = {factory}
async def leaf(ready):
    ready.set()
    await asyncio.sleep(3600)
async def branch(ready):
    await asyncio.gather(asyncio.create_task(leaf(ready), name="leaf-task"))
async def main():
    ready = asyncio.Event()
    asyncio.create_task(branch(ready), name="branch-task")
    await ready.wait()
    done = asyncio.get_running_loop().create_future()
    def wait_for_stdin():
        sys.stdin.read()
        done.get_loop().call_soon_threadsafe(done.set_result, None)
    threading.Thread(target=wait_for_stdin, daemon=True).start()
    print(os.getpid(), flush=True)
    # Python code runs now and then: sys.remote_exec's script waits for it
    while not done.done():
        await asyncio.sleep(0.01)
import os
loop = factory()
loop.run_until_complete(main())
loop.close()
"""


class Target:
    """A process running TARGET on one loop kind, stopped when left."""

    def __init__(self, loop_name):
        code = TARGET.format(factory=SCRIPT_FACTORIES[loop_name])
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = int(self.proc.stdout.readline())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        try:
            assert self.proc.wait(timeout=30) == 0
        finally:
            self.proc.stdout.close()


def run_tool(*args):
    return subprocess.run(
        [sys.executable, "-m", "asyncio", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


if sys.version_info >= (3, 14):

    @pytest.mark.skipif(os.geteuid() != 0, reason="reading another process needs ptrace rights")
    def test_asyncio_ps_and_pstree_see_the_loops_tasks(loop_name):
        with Target(loop_name) as target:
            ps = run_tool("ps", str(target.pid))
            pstree = run_tool("pstree", str(target.pid))
        assert ps.returncode == 0, ps.stderr
        assert pstree.returncode == 0, pstree.stderr
        rows = ps.stdout.splitlines()
        leaf = [r for r in rows if "leaf-task" in r]
        branch = [r for r in rows if "branch-task" in r]
        assert leaf and branch, ps.stdout
        assert "leaf" in leaf[0] and "branch-task" in leaf[0]  # its coroutine and who awaits it
        assert "Task-1" in ps.stdout  # main()
        tree = pstree.stdout
        assert tree.index("Task-1") < tree.index("branch-task") < tree.index("leaf-task"), tree

    @pytest.mark.skipif(os.geteuid() != 0, reason="reading another process needs ptrace rights")
    def test_sys_remote_exec_runs_in_the_loops_process(loop_name, tmp_path):
        out = tmp_path / "seen.txt"
        script = tmp_path / "probe.py"
        script.write_text(
            textwrap.dedent(f"""
            import asyncio
            loop = asyncio.get_running_loop()
            names = sorted(t.get_name() for t in asyncio.all_tasks())
            with open({str(out)!r}, "w") as f:
                f.write(type(loop).__module__ + " " + ",".join(names))
            """)
        )
        with Target(loop_name) as target:
            sys.remote_exec(target.pid, str(script))
            deadline = time.monotonic() + 30
            while not out.exists() or not out.read_text():
                assert time.monotonic() < deadline, "the remote script never ran"
                time.sleep(0.01)
        module, names = out.read_text().split(" ")
        assert module == ("zloopgo._loop" if loop_name == "zloopgo" else "asyncio.unix_events")
        assert names == "Task-1,branch-task,leaf-task"


DEBUG_BODY = """
import logging, warnings
logging.basicConfig(format="%(name)s %(message)s")
loop = factory()
print("debug", loop.get_debug())
loop.slow_callback_duration = 0.01
loop.call_soon(time.sleep, 0.03)
async def never():
    pass
async def main():
    never()  # debug mode's warning says where it was made
    await asyncio.sleep(0)
loop.run_until_complete(main())
loop.close()
print("done")
"""


@pytest.mark.parametrize(
    "how",
    [({"PYTHONASYNCIODEBUG": "1"}, ()), ({}, ("-X", "dev"))],
    ids=["PYTHONASYNCIODEBUG", "X-dev"],
)
def test_debug_mode_from_the_environment_or_dev_mode(loop_name, how):
    env, args = how
    proc = run_script(loop_name, DEBUG_BODY, env={"PYTHONASYNCIODEBUG": "", **env}, args=args)
    check(proc, "debug True", "done")
    assert "asyncio Executing <Handle sleep(0.03) created at <string>:" in proc.stderr, proc.stderr
    assert "coroutine 'never' was never awaited" in proc.stderr
    assert "Coroutine created at" in proc.stderr  # debug mode's origin tracking


PERF_BODY = """
def busy_callback_for_perf():
    return sum(range(1000))
loop = factory()
for _ in range(100):
    loop.call_soon(busy_callback_for_perf)
loop.run_until_complete(asyncio.sleep(0))
loop.close()
active = getattr(sys, "is_stack_trampoline_active", lambda: None)()
print("trampoline", active, os.getpid())
"""


@pytest.mark.parametrize("how", ["X", "env"])
def test_perf_support_runs_and_maps_the_callbacks(loop_name, how):
    if how == "X":
        proc = run_script(loop_name, PERF_BODY, args=("-X", "perf"))
    else:
        proc = run_script(loop_name, PERF_BODY, env={"PYTHONPERFSUPPORT": "1"})
    assert proc.returncode == 0, proc.stderr
    _, active, pid = proc.stdout.split()
    perf_map = f"/tmp/perf-{pid}.map"
    try:
        if sys.version_info < (3, 12):  # no perf trampoline: the option changes nothing
            assert active == "None"
            return
        assert active == "True"
        with open(perf_map) as f:
            assert "py::busy_callback_for_perf:<string>" in f.read()
    finally:
        if os.path.exists(perf_map):
            os.unlink(perf_map)
