"""Start-up hooks for the downstream suites of scripts/compat (this folder is on PYTHONPATH).

Python imports this module in every process of a compat run: pytest, its
xdist workers and the subprocesses the suites start.

- ZL_COMPAT_COUNTS=DIR: counts the event loops the process builds, by class
  (every asyncio loop runs ``BaseEventLoop.__init__``), and writes them to
  DIR/<pid>.json at exit. The scripts read these to prove which loop ran.
- ZL_COMPAT_LOOP=zloopgo: asyncio builds zloopgo loops.
  ``asyncio.new_event_loop`` and ``asyncio.events.new_event_loop`` (which
  ``asyncio.run``, ``asyncio.Runner`` and aiohttp's ``pyloop`` call) become
  ``zloopgo.new_event_loop``, and so does the loop factory of asyncio's
  default policy (``get_event_loop`` outside a loop, ``set_event_loop_policy(None)``).
- ``anyio_backend_fixture()`` builds the ``anyio_backend`` fixture that the
  scripts append to an anyio-based suite's ``tests/conftest.py`` (a ``-p``
  plugin would be shadowed by the suite's own fixture).

Nothing here changes what a test sees on the asyncio run except the counter.
"""

import os


def _count_loops(directory):
    import asyncio
    import atexit
    import json

    counts = {}
    init = asyncio.BaseEventLoop.__init__

    def counting_init(self, *args, **kwargs):
        name = f"{type(self).__module__}.{type(self).__qualname__}"
        counts[name] = counts.get(name, 0) + 1
        init(self, *args, **kwargs)

    def write():
        if counts:
            with open(os.path.join(directory, f"{os.getpid()}.json"), "w") as f:
                json.dump(counts, f)

    asyncio.BaseEventLoop.__init__ = counting_init
    atexit.register(write)
    # A forked child counts its own loops, not its parent's again.
    os.register_at_fork(after_in_child=counts.clear)


def _use_zloopgo():
    import asyncio
    import asyncio.unix_events

    import zloopgo

    asyncio.new_event_loop = asyncio.events.new_event_loop = zloopgo.new_event_loop
    policy = asyncio.unix_events._UnixDefaultEventLoopPolicy
    policy._loop_factory = staticmethod(zloopgo.new_event_loop)


def anyio_backend_fixture(params=None):
    """An ``anyio_backend`` fixture whose asyncio backend makes zloopgo loops.

    ``params``: the suite's own fixture parameters (``pytest.param`` objects),
    kept with their ids and marks so both runs have the same test ids; each
    asyncio backend without a ``loop_factory`` gets zloopgo's. ``None``: the
    suite's fixture has no parameters (it returns "asyncio").
    """
    import pytest

    import zloopgo

    def swapped(backend):
        if isinstance(backend, str):
            backend = (backend, {})
        name, options = backend
        if name == "asyncio" and "loop_factory" not in options:
            options = {**options, "loop_factory": zloopgo.new_event_loop}
        return (name, options)

    if params is None:

        @pytest.fixture
        def anyio_backend():
            return swapped("asyncio")

        return anyio_backend

    def swapped_param(p):
        # A plain "asyncio" keeps its id; other plain values and non-asyncio
        # backends stay as they are.
        if p == "asyncio":
            return pytest.param(swapped(p), id=p)
        values = getattr(p, "values", None)
        if values and isinstance(values[0], tuple) and values[0][0] == "asyncio":
            return pytest.param(swapped(values[0]), marks=p.marks, id=p.id)
        return p

    swapped_params = [swapped_param(p) for p in params]

    @pytest.fixture(params=swapped_params)
    def anyio_backend(request):
        return request.param

    return anyio_backend


if os.environ.get("ZL_COMPAT_COUNTS"):
    _count_loops(os.environ["ZL_COMPAT_COUNTS"])
if os.environ.get("ZL_COMPAT_LOOP") == "zloopgo":
    _use_zloopgo()
