"""System calls a task costs that asyncio's does not: create_task from the
running loop's own thread (capi/tasks.c) leaves out loop= on CPython 3.12+,
where Task finds the running loop without a system call. Before 3.12
_asyncio's running-loop lookup calls getpid() to check the process, so
leaving loop= out there cost a getpid per task, which asyncio's
create_task (it passes loop=self) does not make. Counted with strace in a
fresh interpreter, 2,001 tasks less 1, on both loops.
"""

import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import syscall_count

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="strace is Linux's")

TASKS = textwrap.dedent(
    """
    import asyncio, sys
    import zloopgo

    async def nothing():
        pass

    async def main(loop, n):
        for _ in range(n):
            await loop.create_task(nothing())

    loop = zloopgo.new_event_loop() if sys.argv[2] == "zloopgo" else asyncio.new_event_loop()
    loop.run_until_complete(main(loop, int(sys.argv[1])))
    loop.close()
    """
)


def _getpids(tasks, loop_name, tmp):
    script = Path(tmp) / "tasks.py"
    script.write_text(TASKS)
    out = Path(tmp) / f"strace-{loop_name}-{tasks}.txt"
    return syscall_count.count(script, [tasks, loop_name], ["getpid"], out) or 0


def test_a_task_makes_no_getpid_asyncios_does_not(loop_name):
    with tempfile.TemporaryDirectory(prefix="zl-getpid-") as tmp:
        per_task = {
            name: (_getpids(2001, name, tmp) - _getpids(1, name, tmp)) / 2000
            for name in ("asyncio", loop_name)
        }
    assert per_task[loop_name] <= per_task["asyncio"] + 0.01, (
        f"getpid() per task on {sys.version.split()[0]}: {per_task}"
    )
