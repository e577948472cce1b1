"""zloopgo: a drop-in asyncio event loop whose engine is written in Go.

Use it with ``zloopgo.run(main())``, ``zloopgo.install()``,
``asyncio.run(main(), loop_factory=zloopgo.new_event_loop)`` (3.12+) or
``uvicorn app:app --loop zloopgo:new_event_loop``.

Importing this package does not load the engine: the Go runtime starts
when the first loop is created. A Go runtime does not survive fork(), so a
parent that only imports zloopgo (gunicorn --preload, multiprocessing)
leaves its children free to use it.
"""

import asyncio
import json
import platform
import sys

__version__ = "0.1.0"

__all__ = [
    "EventLoopPolicy",
    "Loop",
    "build_info",
    "install",
    "new_event_loop",
    "run",
    "uninstall",
]


def new_event_loop():
    """Return a new zloopgo event loop."""
    from ._loop import Loop

    return Loop()


def __getattr__(name):
    if name == "Loop":
        from ._loop import Loop

        return Loop
    raise AttributeError(f"module 'zloopgo' has no attribute {name!r}")


class EventLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """asyncio's default policy, making zloopgo loops."""

    def _loop_factory(self):
        return new_event_loop()


def install():
    """Make asyncio create zloopgo loops (sets the event loop policy)."""
    asyncio.set_event_loop_policy(EventLoopPolicy())


def uninstall():
    """Restore asyncio's default policy if zloopgo's is installed."""
    if isinstance(asyncio.get_event_loop_policy(), EventLoopPolicy):
        asyncio.set_event_loop_policy(None)


def run(main, *, debug=None):
    """Run coroutine ``main`` on a new zloopgo loop, as asyncio.run does."""
    if asyncio._get_running_loop() is not None:
        raise RuntimeError("asyncio.run() cannot be called from a running event loop")
    if sys.version_info >= (3, 11):
        with asyncio.Runner(debug=debug, loop_factory=new_event_loop) as runner:
            return runner.run(main)
    return _run_310(main, debug)


def _run_310(main, debug):
    # Python 3.10 has no asyncio.Runner: the same steps as its asyncio.run.
    if not asyncio.iscoroutine(main):
        raise ValueError(f"a coroutine was expected, got {main!r}")
    loop = new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        if debug is not None:
            loop.set_debug(debug)
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_all_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_all_tasks(loop):
    to_cancel = asyncio.all_tasks(loop)
    if not to_cancel:
        return
    for task in to_cancel:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*to_cancel, return_exceptions=True))
    for task in to_cancel:
        if task.cancelled():
            continue
        if task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during asyncio.run() shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )


def build_info():
    """Versions, reactor and processor features of this build."""
    from . import _engine

    info = json.loads(_engine.build_info_json())
    info.update(
        zloopgo_version=__version__,
        python_version=platform.python_version(),
        python_implementation=platform.python_implementation(),
    )
    return info
