"""zloopgo: a drop-in asyncio event loop whose engine is written in Go.

Use it with ``zloopgo.run(main())``,
``asyncio.run(main(), loop_factory=zloopgo.new_event_loop)`` (3.12+),
``asyncio.Runner(loop_factory=zloopgo.new_event_loop)`` (3.11+) or
``uvicorn app:app --loop zloopgo:new_event_loop``; ``zloopgo.install()``
(asyncio's event loop policy) is for code that cannot pass a loop factory.

Importing this package does not load the engine: the Go runtime starts
when the first loop is created. A Go runtime does not survive fork(), so a
parent that only imports zloopgo (gunicorn --preload, multiprocessing)
leaves its children free to use it.
"""

from __future__ import annotations

import asyncio
import json
import platform
import sys
import threading
from asyncio import events
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    if sys.version_info >= (3, 14):
        from asyncio.events import _AbstractEventLoopPolicy as _Policy
    else:
        from asyncio.events import AbstractEventLoopPolicy as _Policy

    from ._loop import Loop
    from ._otel import Instrumentation

__version__ = "0.1.0"

# A free-threaded build (3.13t+) runs zloopgo with the GIL on: the engine
# declares Py_MOD_GIL_USED, so the interpreter turns the GIL on when the
# engine loads (with CPython's RuntimeWarning saying so). PYTHON_GIL=0 or
# -X gil=0 keeps it off even then (sys.flags.gil is 0; None by default on a
# free-threaded build, 1 on a GIL build), and the adapter is not safe without
# it (docs/architecture.md, "Free-threaded builds: what is still missing").
# Checked here, before anything loads the engine: importing this package
# does not start the Go runtime (above).
if getattr(sys.flags, "gil", 1) == 0:
    raise ImportError(
        "zloopgo cannot run with the GIL forced off: this free-threaded CPython "
        f"{sys.version.split()[0]} was started with PYTHON_GIL=0 or -X gil=0, which "
        "keeps the GIL off even for zloopgo's C adapter, which needs it (it declares "
        "Py_MOD_GIL_USED). Run without PYTHON_GIL=0 and -X gil=0: the GIL then comes "
        "on when the engine loads. docs/architecture.md, 'Free-threaded builds: what "
        "is still missing', lists what running without the GIL needs."
    )

__all__ = [
    "EventLoopPolicy",
    "Loop",
    "build_info",
    "install",
    "instrument",
    "new_event_loop",
    "open",
    "os",
    "report_slow_callbacks",
    "reset_stats",
    "run",
    "stats",
    "uninstall",
]

_T = TypeVar("_T")


# asyncio's policy system by names that do not warn. Python 3.14 deprecates
# asyncio.get_event_loop_policy() / set_event_loop_policy() and
# asyncio.DefaultEventLoopPolicy (removal planned for 3.16) and keeps private
# equivalents for its own use: events._get_event_loop_policy,
# events._set_event_loop_policy and unix_events._UnixDefaultEventLoopPolicy
# (asyncio.DefaultEventLoopPolicy itself on Unix, 3.10 to 3.14).
def _policy_function(name: str) -> Any:
    # events._<name> where asyncio has it (3.14+), else events.<name>.
    return getattr(events, "_" + name, None) or getattr(events, name)


_get_policy: Callable[[], _Policy] = _policy_function("get_event_loop_policy")
_set_policy: Callable[[_Policy | None], None] = _policy_function("set_event_loop_policy")

# asyncio's default policy of this platform, whose loops EventLoopPolicy
# replaces: the Unix one (its child watchers up to 3.13), or Windows'
# (3.14's private name first: the public one warns there).
if sys.platform == "win32":
    from asyncio import windows_events

    _DefaultPolicy = (
        getattr(windows_events, "_DefaultEventLoopPolicy", None)
        or windows_events.DefaultEventLoopPolicy
    )
else:
    from asyncio import unix_events

    _DefaultPolicy = unix_events._UnixDefaultEventLoopPolicy


# after the names above, which the file modules do not need
from . import os  # noqa: E402
from ._files import open  # noqa: E402


def new_event_loop(*, slow_callbacks: bool | None = None) -> Loop:
    """Return a new zloopgo event loop. ``slow_callbacks=True`` reports
    callbacks slower than ``loop.slow_callback_duration`` without debug
    mode (report_slow_callbacks); None, the default, reads the
    ZLOOPGO_SLOW_CALLBACKS environment variable."""
    from ._loop import Loop

    return Loop(slow_callbacks=slow_callbacks)


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any
    # attribute of the module; they see Loop through the import above.
    def __getattr__(name):
        if name == "Loop":
            from ._loop import Loop

            return Loop
        raise AttributeError(f"module 'zloopgo' has no attribute {name!r}")


class EventLoopPolicy(_DefaultPolicy):
    """asyncio's default policy, making zloopgo loops."""

    def _loop_factory(self) -> Loop:
        return new_event_loop()


def install() -> None:
    """Make asyncio create zloopgo loops: sets asyncio's event loop policy
    to a zloopgo.EventLoopPolicy, so that asyncio.run(),
    asyncio.new_event_loop() and the policy's get_event_loop() make zloopgo
    loops. uninstall() restores asyncio's default policy.

    Prefer ``zloopgo.run`` or a ``loop_factory``: asyncio deprecates its
    policy system from Python 3.14 (removal planned for 3.16). There
    install() sets the policy through asyncio's own non-deprecated
    ``asyncio.events._set_event_loop_policy``, so it neither warns nor
    raises, even with warnings as errors.
    """
    _set_policy(EventLoopPolicy())


def uninstall() -> None:
    """Restore asyncio's default policy if zloopgo's is installed."""
    if isinstance(_get_policy(), EventLoopPolicy):
        _set_policy(None)


def run(main: Coroutine[Any, Any, _T], *, debug: bool | None = None) -> _T:
    """Run coroutine ``main`` on a new zloopgo loop, as asyncio.run does."""
    if events._get_running_loop() is not None:
        raise RuntimeError("asyncio.run() cannot be called from a running event loop")
    if sys.version_info >= (3, 11):
        with asyncio.Runner(debug=debug, loop_factory=new_event_loop) as runner:
            return runner.run(main)
    return _run_310(main, debug)


def _run_310(main: Coroutine[Any, Any, _T], debug: bool | None) -> _T:
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


def _cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
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


def build_info() -> dict[str, Any]:
    """Versions, reactor and processor features of this build."""
    from . import _engine

    info: dict[str, Any] = json.loads(_engine.build_info_json())
    info.update(
        zloopgo_version=__version__,
        python_version=platform.python_version(),
        python_implementation=platform.python_implementation(),
    )
    return info


def _own_loop(loop: Any, what: str) -> Loop:
    # The loop stats() and its kin read: the running one by default, and
    # only on its own thread while it runs (the engine updates its figures
    # outside the GIL, right after each wait).
    from ._loop import Loop

    if loop is None:
        loop = events.get_running_loop()
    if not isinstance(loop, Loop):
        raise TypeError(f"zloopgo.{what}() needs a zloopgo loop, got {type(loop).__name__}")
    if loop.is_running() and getattr(loop, "_thread_id", None) != threading.get_ident():
        raise RuntimeError(
            f"zloopgo.{what}() of a running loop must be called on the loop's own "
            "thread (use loop.call_soon_threadsafe)"
        )
    return loop


def stats(loop: Loop | None = None) -> dict[str, Any]:
    """The loop's native counters and gauges, and the Go runtime's figures,
    as a new dict (docs/observability.md lists each). ``loop`` defaults to
    the running loop; a running loop is read on its own thread."""
    from . import _engine

    result: dict[str, Any] = _engine.stats(_own_loop(loop, "stats"))
    return result


def reset_stats(loop: Loop | None = None) -> None:
    """Make stats() count the loop's running totals from now on (gauges
    and the Go runtime's figures are unaffected)."""
    from . import _engine

    _engine.reset_stats(_own_loop(loop, "reset_stats"))


def report_slow_callbacks(on: bool = True, loop: Loop | None = None) -> bool:
    """Time each callback of the loop and report those that take
    ``loop.slow_callback_duration`` or longer through the ``asyncio``
    logger, as debug mode does, without debug mode's other costs. Returns
    whether it was on. Off (the default, unless ZLOOPGO_SLOW_CALLBACKS=1 or
    new_event_loop(slow_callbacks=True)) it costs nothing."""
    from . import _engine

    return bool(_engine.set_slow_callbacks(_own_loop(loop, "report_slow_callbacks"), bool(on)))


def instrument(
    loop: Loop | None = None,
    *,
    interval: float = 10.0,
    meter_provider: Any = None,
    tracer_provider: Any = None,
) -> Instrumentation:
    """Emit the loop's stats() as OpenTelemetry metrics, sampled every
    ``interval`` seconds by a timer of the loop (so on its own thread), and
    each slow callback as a span; needs ``opentelemetry-api``
    (``pip install zloopgo[otel]``). Returns a handle whose ``close()``
    stops it. docs/observability.md names the instruments."""
    from ._otel import Instrumentation as _Instrumentation

    return _Instrumentation(
        _own_loop(loop, "instrument"),
        interval=interval,
        meter_provider=meter_provider,
        tracer_provider=tracer_provider,
    )
