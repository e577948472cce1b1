"""Typed use of zloopgo's public API: checked by mypy --strict and pyright (strict),
and run, by tests/test_typing_checkers.py."""
# pyright: strict

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import zloopgo

if sys.version_info >= (3, 11):
    from typing import assert_type
elif TYPE_CHECKING:
    from typing_extensions import assert_type
else:

    def assert_type(value, _type):
        return value


async def answer() -> int:
    await asyncio.sleep(0)
    return 42


def use_run() -> int:
    assert_type(zloopgo.run(answer(), debug=False), int)
    return zloopgo.run(answer())


def use_loop() -> str:
    loop = zloopgo.new_event_loop()
    assert_type(loop, zloopgo.Loop)
    as_abstract: asyncio.AbstractEventLoop = loop
    as_selector: asyncio.SelectorEventLoop = loop
    assert as_abstract is as_selector
    try:
        fut: asyncio.Future[str] = loop.create_future()
        loop.call_soon(fut.set_result, "done")
        timer = loop.call_later(3600, fut.cancel)
        assert_type(timer, asyncio.TimerHandle)
        result = loop.run_until_complete(fut)
        timer.cancel()
        assert_type(result, str)
        return result
    finally:
        loop.close()


def use_factories() -> list[int]:
    factory: Callable[[], asyncio.AbstractEventLoop] = zloopgo.new_event_loop
    results = [zloopgo.run(answer())]
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=factory) as runner:
            results.append(runner.run(answer()))
    if sys.version_info >= (3, 12):
        results.append(asyncio.run(answer(), loop_factory=zloopgo.new_event_loop))
    return results


def use_policy() -> type[asyncio.AbstractEventLoop]:
    policy = zloopgo.EventLoopPolicy()
    loop = policy.new_event_loop()
    loop.close()
    zloopgo.install()
    try:
        loop = asyncio.new_event_loop()
        loop.close()
    finally:
        zloopgo.uninstall()
    return type(loop)


def use_build_info() -> str:
    info = zloopgo.build_info()
    assert_type(info, dict[str, Any])
    go_version: str = info["go_version"]
    return go_version


def use_stats() -> int:
    loop = zloopgo.new_event_loop(slow_callbacks=False)
    try:
        zloopgo.reset_stats(loop)
        was_on: bool = zloopgo.report_slow_callbacks(True, loop=loop)
        assert not was_on
        stats = zloopgo.stats(loop)
        assert_type(stats, dict[str, Any])
        iterations: int = stats["iterations"]
        return iterations
    finally:
        loop.close()


def main() -> None:
    assert use_run() == 42
    assert use_loop() == "done"
    assert set(use_factories()) == {42}
    assert issubclass(use_policy(), zloopgo.Loop)
    assert use_build_info().startswith("go")
    assert use_stats() == 0
    loop_class: type[asyncio.AbstractEventLoop] = zloopgo.Loop
    assert issubclass(loop_class, asyncio.SelectorEventLoop)
    print("usage ok")


if __name__ == "__main__":
    main()
