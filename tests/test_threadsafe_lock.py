"""The lock in the `_lock` slot of the handle 3.14+'s call_soon_threadsafe
returns: zloopgo puts its own recursive lock there (capi/handle_lock.c)
where asyncio puts a threading.RLock. Generated programs of two threads
take, release and ask that lock on both loops' handles (with the methods
threading.Condition takes from it), bad arguments included, and every
result, exception type and message must be the same; a Condition over it
waits and is notified as over an RLock; then the waits: one bounded by a
timeout, one ended by a release from the other thread, one ended by a
signal handler that raises, and a cancel() that waits for the running
callback while its thread holds the GIL elsewhere."""

import asyncio
import queue
import random
import signal
import threading
import time

import pytest

import zloopgo

pytestmark = pytest.mark.skipif(
    not hasattr(asyncio.events, "_ThreadSafeHandle"),
    reason="the _ThreadSafeHandle and its lock are 3.14+'s",
)


class _NoTruth:
    def __bool__(self):
        raise ZeroDivisionError("no truth value")


BAD_ARGUMENTS = [
    ((_NoTruth(),), {}),
    ((), {"timeout": -2}),
    ((), {"timeout": -1.5}),
    ((False, 1), {}),
    ((False,), {"timeout": 0}),
    ((), {"timeout": float("nan")}),
    ((), {"timeout": "a"}),
    ((), {"timeout": None}),
    ((1, 2, 3), {}),
    ((), {"foo": 1}),
    ((True,), {"blocking": True}),
    ((), {"timeout": 1e300}),
    ((), {"timeout": float("inf")}),
    ((), {"timeout": 10**30}),
]


# bad arguments of _acquire_restore: each fails before it waits
BAD_STATES = [(), (5,), ((1,),), (("a", "b"),), ((1, 2, 3),), ("ab",), ((1, 2), 3)]


def _observe(call):
    try:
        return repr(call())
    except Exception as exc:  # noqa: BLE001 (the observation is the exception itself)
        return f"{type(exc).__name__}: {exc}"


class _Worker:
    """A second thread that runs the steps it is given, one at a time."""

    def __init__(self):
        self._steps = queue.Queue()
        self._results = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while (step := self._steps.get()) is not None:
            self._results.put(_observe(step))

    def run(self, step):
        self._steps.put(step)
        return self._results.get(timeout=30)

    def stop(self):
        self._steps.put(None)
        self._thread.join(30)


def _program(rng, length):
    """Steps (thread, op, args, kwargs), blocking ones only where a model of
    the lock says they would not wait forever. Besides acquire and release,
    the methods threading.Condition takes from its lock: _release_save,
    _acquire_restore (given what the same thread's last _release_save
    returned, or a bad state), _recursion_count and _at_fork_reinit."""
    owner, count, steps, saved = None, 0, [], {}
    for _ in range(length):
        thread = rng.choice(("main", "other"))
        free_or_own = owner in (None, thread)
        op = rng.choice(
            ["acquire", "acquire", "release", "release", "enter", "exit"]
            + ["locked", "owned", "try", "timed", "bad"]
            + ["save", "save", "restore", "restore", "count", "bad restore", "reinit"]
        )
        if op in ("acquire", "enter") and not free_or_own:
            op = "timed"
        if op == "restore" and not (free_or_own and thread in saved):
            op = "count"
        args, kwargs = (), {}
        if op == "save":
            steps.append((thread, "_release_save", (), {}))
            if owner == thread:
                saved[thread] = count
                owner, count = None, 0
            continue
        if op == "restore":
            # what this thread's _release_save returned, read when the step runs
            steps.append((thread, "_acquire_restore", ("saved",), {}))
            owner, count = thread, saved.pop(thread)
            continue
        if op in ("count", "reinit", "bad restore"):
            name, args = {
                "count": ("_recursion_count", ()),
                "reinit": ("_at_fork_reinit", ()),
                "bad restore": ("_acquire_restore", rng.choice(BAD_STATES)),
            }[op]
            steps.append((thread, name, args, {}))
            if op == "reinit":
                owner, count = None, 0
            continue
        if op == "try":
            op, args = "acquire", (False,)
        elif op == "timed":
            op, kwargs = "acquire", {"timeout": rng.choice((0, 0.001, 0.01))}
        elif op == "bad":
            op, (args, kwargs) = "acquire", rng.choice(BAD_ARGUMENTS)
        steps.append((thread, op, args, kwargs))
        # the model: every acquire but a bad one takes the lock when free or own
        takes = op == "enter" or (op == "acquire" and (args, kwargs) not in BAD_ARGUMENTS)
        if takes and free_or_own:
            owner, count = thread, count + 1
        elif op in ("release", "exit") and owner == thread:
            count -= 1
            owner = owner if count else None
    return steps


def _run(lock, steps):
    worker = _Worker()
    seen, states = [], {}

    def save():
        state = states[threading.current_thread().name] = lock._release_save()
        return state[0]  # the owner is a thread's ident, which differs between runs

    def restore():
        return lock._acquire_restore(states.pop(threading.current_thread().name))

    try:
        for thread, op, args, kwargs in steps:
            if op == "_release_save":
                step = save
            elif op == "_acquire_restore" and args == ("saved",):
                step = restore
            elif op in ("_acquire_restore", "_recursion_count", "_at_fork_reinit"):

                def step(name=op, a=args):
                    return getattr(lock, name)(*a)

            elif op == "acquire":

                def step(a=args, k=kwargs):
                    return lock.acquire(*a, **k)

            elif op == "enter":
                step = lock.__enter__
            elif op == "exit":

                def step():
                    return lock.__exit__(None, None, None)

            elif op == "owned":
                step = lock._is_owned
            else:
                step = getattr(lock, op)
            seen.append(_observe(step) if thread == "main" else worker.run(step))
            seen.append(repr(lock.locked()))
    finally:
        worker.stop()
    return seen


def _locks():
    loops = [asyncio.SelectorEventLoop(), zloopgo.new_event_loop()]
    try:
        handles = [loop.call_soon_threadsafe(print) for loop in loops]
        for h in handles:
            h.cancel()
        return [h._lock for h in handles]
    finally:
        for loop in loops:
            loop.close()


def test_zloopgo_puts_its_own_lock_in_the_handle():
    theirs, ours = _locks()
    assert type(theirs) is type(threading.RLock())
    assert type(ours).__name__ == "HandleLock"
    assert repr(ours).startswith("<unlocked zloopgo._engine.HandleLock object owner=0 count=0 at ")
    with pytest.raises(TypeError):
        type(ours)()


@pytest.mark.parametrize("seed", range(60))
def test_generated_programs_see_the_same_lock(seed):
    steps = _program(random.Random(seed), 14)
    theirs, ours = _locks()
    assert _run(ours, steps) == _run(theirs, steps), steps


def test_every_bad_argument_fails_as_rlocks():
    theirs, ours = _locks()
    for args, kwargs in BAD_ARGUMENTS:
        expected = _observe(lambda a=args, k=kwargs: theirs.acquire(*a, **k))
        assert _observe(lambda a=args, k=kwargs: ours.acquire(*a, **k)) == expected, (args, kwargs)
        for lock in (theirs, ours):
            while lock._is_owned():
                lock.release()


@pytest.mark.parametrize("which", [0, 1], ids=["asyncio", "zloopgo"])
def test_a_timed_wait_ends_false_and_a_release_ends_a_wait(which):
    lock = _locks()[which]
    holding, release = threading.Event(), threading.Event()

    def hold():
        with lock:
            holding.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    holding.wait(30)
    t0 = time.monotonic()
    assert lock.acquire(timeout=0.05) is False
    assert time.monotonic() - t0 >= 0.05
    threading.Timer(0.05, release.set).start()
    assert lock.acquire() is True  # waits for the release
    assert release.is_set()
    lock.release()
    t.join(30)


@pytest.mark.parametrize("which", [0, 1], ids=["asyncio", "zloopgo"])
def test_a_signal_handler_that_raises_ends_a_wait(which):
    """SIGUSR1, sent to the main thread by another after 50 ms: the test
    sets its handler itself and leaves SIGALRM and the interval timer to
    pytest-timeout."""
    lock = _locks()[which]
    holding, release = threading.Event(), threading.Event()

    class Woken(Exception):
        pass

    def handler(signum, frame):
        raise Woken

    def hold():
        with lock:
            holding.set()
            release.wait(30)

    previous = signal.signal(signal.SIGUSR1, handler)
    t = threading.Thread(target=hold)
    t.start()
    main = threading.main_thread().ident
    kick = threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGUSR1))
    try:
        holding.wait(30)
        kick.start()
        with pytest.raises(Woken):
            lock.acquire()
        assert not lock._is_owned()
    finally:
        kick.cancel()
        signal.signal(signal.SIGUSR1, previous)
        release.set()
        t.join(30)


def test_cancel_from_a_thread_waits_while_the_callback_runs_python():
    """The callback keeps the GIL busy (no sleep): the waiting cancel()
    still gets its turn only once the callback has returned."""
    loop = zloopgo.new_event_loop()
    started, order = threading.Event(), []

    def callback():
        started.set()
        end = time.monotonic() + 0.1
        while time.monotonic() < end:
            pass
        order.append("callback returned")

    def other():
        h = loop.call_soon_threadsafe(callback)
        started.wait(30)
        h.cancel()
        order.append("cancel returned")
        loop.call_soon_threadsafe(loop.stop)

    t = threading.Thread(target=other)
    t.start()
    try:
        loop.run_forever()
    finally:
        t.join(30)
        loop.close()
    assert order == ["callback returned", "cancel returned"]


def _condition_round(lock):
    """threading.Condition over the lock, held twice by the waiter: wait()
    must give it up at both depths (_release_save) for the notifier to take
    it, and take both back (_acquire_restore)."""
    cond = threading.Condition(lock)
    seen, ready = [], threading.Event()

    def notifier():
        ready.wait(30)
        with cond:
            seen.append(("notifier holds it", lock._recursion_count()))
            cond.notify()

    t = threading.Thread(target=notifier)
    with cond, cond:
        t.start()
        ready.set()
        seen.append(("notified", cond.wait(10)))
        seen.append(("depth after the wait", lock._recursion_count(), lock._is_owned()))
    t.join(30)
    seen.append(("free at the end", lock.locked(), lock._recursion_count()))
    with cond:
        seen.append(("wait_for times out", cond.wait_for(lambda: False, timeout=0.01)))
    seen.append(("not held", _observe(cond.notify), _observe(lambda: cond.wait(0))))
    return seen


def test_a_condition_over_the_lock_waits_and_is_notified():
    theirs, ours = _locks()
    want = _condition_round(theirs)
    assert want[:2] == [("notifier holds it", 1), ("notified", True)], want
    assert _condition_round(ours) == want
