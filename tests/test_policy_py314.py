"""Python 3.14 readiness of zloopgo's policy API: install(), uninstall() and
EventLoopPolicy raise no warning here, and none on 3.14's asyncio (policy
getters, setters and classes deprecated, private equivalents added) or,
before 3.14, on an asyncio made to look like it, where a recorder also
lists every asyncio name zloopgo touches.

Runs under pytest, and as a script (`python tests/test_policy_py314.py`)
that scripts/wheel runs against each installed wheel.
"""

import asyncio
import subprocess
import sys
import tempfile
import textwrap
import warnings

import zloopgo

# Before 3.14 makes this interpreter's asyncio look like 3.14's where
# zloopgo could notice; then exercises zloopgo with every warning an error.
SIMULATE_314 = textwrap.dedent(
    """
    import asyncio, sys, types, warnings
    from asyncio import events

    # The module of this system's default policy, and that policy by the
    # name it has before 3.14 (3.14 names it _DefaultEventLoopPolicy).
    if sys.platform == "win32":
        from asyncio import windows_events as platform_events
        old_default = "WindowsProactorEventLoopPolicy"
    else:
        from asyncio import unix_events as platform_events
        old_default = "_UnixDefaultEventLoopPolicy"

    # What 3.14 deprecates (or renamed or removed) that zloopgo could touch.
    DEPRECATED = {
        "get_event_loop_policy", "set_event_loop_policy", "DefaultEventLoopPolicy",
        "AbstractEventLoopPolicy", "BaseDefaultEventLoopPolicy", "iscoroutinefunction",
        "get_child_watcher", "set_child_watcher", "AbstractChildWatcher",
        "SafeChildWatcher", "FastChildWatcher", "ThreadedChildWatcher",
        "PidfdChildWatcher", "MultiLoopChildWatcher",
    }
    touched = set()

    def caller_is_zloopgo(depth):
        return sys._getframe(depth).f_globals.get("__name__", "").startswith("zloopgo")

    class Recorder(types.ModuleType):
        def __getattribute__(self, name):
            if caller_is_zloopgo(2):
                touched.add((types.ModuleType.__getattribute__(self, "__name__"), name))
            return types.ModuleType.__getattribute__(self, name)

    def deprecated(func):
        # Warns when called from outside asyncio, as 3.14's public function
        # does (asyncio itself calls the private one).
        def wrapper(*args):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if not caller.startswith("asyncio"):
                warnings.warn(f"'asyncio.{func.__name__}' is deprecated", DeprecationWarning, 2)
            return func(*args)
        wrapper.__name__ = func.__name__
        return wrapper

    if sys.version_info < (3, 14):  # else asyncio is 3.14's own
        events._get_event_loop_policy = events.get_event_loop_policy
        events._set_event_loop_policy = events.set_event_loop_policy
        events._AbstractEventLoopPolicy = events.AbstractEventLoopPolicy
        events._BaseDefaultEventLoopPolicy = events.BaseDefaultEventLoopPolicy
        platform_events._DefaultEventLoopPolicy = getattr(platform_events, old_default)

        def init_event_loop_policy():
            # 3.14's: the default policy by its private name.
            with events._lock:
                if events._event_loop_policy is None:
                    events._event_loop_policy = platform_events._DefaultEventLoopPolicy()

        events._init_event_loop_policy = init_event_loop_policy
        for module in (asyncio, events):
            for name in ("get_event_loop_policy", "set_event_loop_policy"):
                setattr(module, name, deprecated(getattr(events, "_" + name)))
        hidden = {
            "DefaultEventLoopPolicy": asyncio.__dict__.pop("DefaultEventLoopPolicy"),
            "AbstractEventLoopPolicy": asyncio.__dict__.pop("AbstractEventLoopPolicy"),
        }
        del platform_events.DefaultEventLoopPolicy

        def package_getattr(name):
            if name in hidden:
                warnings.warn(f"'asyncio.{name}' is deprecated", DeprecationWarning, 2)
                return hidden[name]
            raise AttributeError(name)

        asyncio.__getattr__ = package_getattr
    for module in (asyncio, events, platform_events):
        module.__class__ = Recorder

    warnings.simplefilter("error")
    # but CPython's own warning on a free-threaded build, when the engine's
    # load turns the GIL on (docs/architecture.md, "Free-threaded builds")
    warnings.filterwarnings(
        "ignore",
        r"The global interpreter lock \\(GIL\\) has been enabled "
        r"to load module 'zloopgo\\._engine'",
        RuntimeWarning,
    )

    # The deprecations bite: these warn (as errors) from outside asyncio ...
    for attempt in (
        lambda: asyncio.set_event_loop_policy(None),
        lambda: asyncio.get_event_loop_policy(),
        lambda: asyncio.DefaultEventLoopPolicy,
    ):
        try:
            attempt()
        except DeprecationWarning:
            pass
        else:
            raise AssertionError("the deprecation did not warn")
    # ... but not asyncio's own use of them.
    asyncio.new_event_loop().close()

    import zloopgo

    policy = zloopgo.EventLoopPolicy()
    loop = policy.new_event_loop()
    assert isinstance(loop, zloopgo.Loop), loop
    loop.close()

    async def loop_type():
        return type(asyncio.get_running_loop())

    zloopgo.install()
    try:
        assert isinstance(events._get_event_loop_policy(), zloopgo.EventLoopPolicy)
        assert asyncio.run(loop_type()) is zloopgo.Loop
        loop = asyncio.new_event_loop()
        assert isinstance(loop, zloopgo.Loop), loop
        loop.close()
    finally:
        zloopgo.uninstall()
    assert type(events._get_event_loop_policy()) is platform_events._DefaultEventLoopPolicy
    assert asyncio.run(loop_type()) is not zloopgo.Loop
    assert zloopgo.run(loop_type()) is zloopgo.Loop

    assert ("asyncio.events", "_set_event_loop_policy") in touched, sorted(touched)
    bad = sorted((m, n) for m, n in touched if n in DEPRECATED)
    assert not bad, f"zloopgo touches names 3.14 deprecates: {bad}"
    print("touched:", sorted(touched))
    """
)


# CPython's own warning on a free-threaded build, when the engine's load
# turns the GIL on (docs/architecture.md, "Free-threaded builds"): the
# first loop of a process that has not loaded the engine yet (this file run
# as a script from an installed wheel) gives it
GIL_ENABLED = (
    r"The global interpreter lock \(GIL\) has been enabled to load module 'zloopgo\._engine'"
)


def test_policy_api_raises_no_warning():
    async def loop_type():
        return type(asyncio.get_running_loop())

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", GIL_ENABLED, RuntimeWarning)
        policy = zloopgo.EventLoopPolicy()
        loop = policy.new_event_loop()
        try:
            assert isinstance(loop, zloopgo.Loop)
        finally:
            loop.close()
        zloopgo.install()
        try:
            assert asyncio.run(loop_type()) is zloopgo.Loop
        finally:
            zloopgo.uninstall()
        assert asyncio.run(loop_type()) is not zloopgo.Loop
        assert zloopgo.run(loop_type()) is zloopgo.Loop


def test_policy_class_is_asyncios_default():
    # Same base as asyncio.DefaultEventLoopPolicy (on 3.10-3.13 the very class),
    # reached by a name 3.14 does not deprecate.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        default = asyncio.DefaultEventLoopPolicy
    assert issubclass(zloopgo.EventLoopPolicy, default)
    assert zloopgo.EventLoopPolicy.__mro__[1] is default


def test_no_warning_on_314():
    # On 3.14+ its own asyncio, before it the simulation.
    # A fresh interpreter, so zloopgo is imported after the simulation.
    proc = subprocess.run(
        [sys.executable, "-c", SIMULATE_314],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "touched:" in proc.stdout


if __name__ == "__main__":
    for _name, _test in sorted(globals().items()):
        if _name.startswith("test_") and callable(_test):
            _test()
            print("ok", _name)
