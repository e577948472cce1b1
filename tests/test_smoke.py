"""The smallest end-to-end check: a coroutine runs on a zloopgo loop."""

import asyncio

import zloopgo


def test_run_returns_coroutine_result():
    async def main():
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__name__

    assert zloopgo.run(main()) == "Loop"
