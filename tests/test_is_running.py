"""loop.is_running(): asyncio answers `self._thread_id is not None`, and so
does zloopgo's native method (capi/loop.c), which every Task made with
eager_start=True asks (aiohttp's request task, once per request). What
must hold: the answer follows _thread_id as run_forever sets and clears
it, or as anything else sets it; a subclass's override is called; an
eager task starts at once on a running loop only. And on zloopgo the
question costs no Python frame.

It knows the loop only through asyncio's surface and _thread_id."""

import asyncio
import sys

import zloopgo

HAS_EAGER_START = sys.version_info >= (3, 12)  # asyncio.Task(eager_start=) arrived in 3.12


def test_is_running_follows_the_running_thread(loop):
    seen = []

    def callback():
        seen.append(("callback", loop.is_running()))

    async def main():
        seen.append(("coroutine", loop.is_running()))
        loop.call_soon(callback)
        await asyncio.sleep(0)

    seen.append(("before", loop.is_running()))
    loop.run_until_complete(main())
    seen.append(("after", loop.is_running()))
    loop.call_soon(loop.stop)
    loop.run_forever()
    seen.append(("after stop", loop.is_running()))
    assert seen == [
        ("before", False),
        ("coroutine", True),
        ("callback", True),
        ("after", False),
        ("after stop", False),
    ]


def test_is_running_reads_thread_id_whoever_sets_it(loop):
    loop._thread_id = 12345
    try:
        assert loop.is_running() is True
    finally:
        loop._thread_id = None
    assert loop.is_running() is False


def test_a_subclass_override_of_is_running_is_called(loop_factory):
    probe = loop_factory()
    base = type(probe)
    probe.close()
    answers = []

    class Claims(base):
        def is_running(self):
            answer = super().is_running()
            answers.append(answer)
            return answer

    loop = Claims()
    answers.clear()  # what construction asked (set_debug asks it) is not this test's
    try:
        assert loop.is_running() is False
        assert answers == [False]
        assert loop.run_until_complete(_ask_running()) is True
        assert True in answers  # the coroutine's question reached the override
    finally:
        loop.close()


async def _ask_running():
    return asyncio.get_running_loop().is_running()


def test_an_eager_task_starts_at_once_only_on_a_running_loop(loop):
    steps = []

    async def child():
        steps.append("child ran")

    async def main():
        if HAS_EAGER_START:
            task = asyncio.Task(child(), loop=loop, eager_start=True)
            steps.append(f"made, done={task.done()}")
            await task
        else:  # 3.11: no eager start; the task runs at the next iteration
            task = loop.create_task(child())
            steps.append(f"made, done={task.done()}")
            await task

    loop.run_until_complete(main())
    if HAS_EAGER_START:
        assert steps == ["child ran", "made, done=True"]
        # not running: the eager start is declined and the task waits for the loop
        task = asyncio.Task(child(), loop=loop, eager_start=True)
        assert not task.done() and steps[-1] == "made, done=True"
        loop.run_until_complete(task)
        assert steps[-1] == "child ran"
    else:
        assert steps == ["made, done=False", "child ran"]


def test_zloopgo_answers_is_running_without_a_python_frame():
    loop = zloopgo.new_event_loop()
    frames = []

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "is_running":
            frames.append(frame.f_code.co_filename)

    async def main():
        sys.setprofile(profiler)
        try:
            running = loop.is_running()
            if HAS_EAGER_START:  # the call _asyncio's Task makes from C
                await asyncio.Task(asyncio.sleep(0), loop=loop, eager_start=True)
        finally:
            sys.setprofile(None)
        return running

    try:
        assert loop.run_until_complete(main()) is True
    finally:
        loop.close()
    assert frames == []
