"""The smallest end-to-end check: a coroutine runs on each loop."""

import asyncio

import zloopgo


def test_run_returns_coroutine_result():
    async def main():
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__name__

    assert zloopgo.run(main()) == "Loop"


def test_loop_fixture_runs_both(loop, loop_name):
    async def main():
        return asyncio.get_running_loop()

    assert loop.run_until_complete(main()) is loop
    assert (type(loop).__module__ == "zloopgo._loop") == (loop_name == "zloopgo")
