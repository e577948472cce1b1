"""Every callback runs in its own copy of the context as of scheduling
time, as asyncio's do — also on zloopgo, where handles scheduled in the
same context share one snapshot until they run (capi/context.c). Dual-run:
what callbacks see and set, get_context() before, during and after the
run, explicit context=, timers, threads."""

import asyncio
import contextvars
import sys
import threading

import pytest
from helpers import SCHEDULERS, check, run_once, run_script, schedule

VAR = contextvars.ContextVar("VAR", default="unset")
OTHER = contextvars.ContextVar("OTHER", default=0)


def run_until_idle(loop):
    for _ in range(3):
        run_once(loop)


@pytest.mark.parametrize("method", SCHEDULERS)
def test_a_variable_a_callback_sets_is_never_seen_by_another(loop, method):
    seen = []

    def cb(i):
        seen.append((i, VAR.get(), OTHER.get()))
        VAR.set(f"set by {i}")
        OTHER.set(OTHER.get() + 1)

    for i in range(5):
        schedule(loop, method, cb, i)
    VAR.set("changed after scheduling")  # the snapshot is as of call time
    for i in range(5, 8):
        schedule(loop, method, cb, i)
    VAR.set("unset")
    run_until_idle(loop)
    assert sorted(seen) == [(i, "unset", 0) for i in range(5)] + [
        (i, "changed after scheduling", 0) for i in range(5, 8)
    ]


def test_callbacks_scheduled_by_a_callback_see_what_it_set_before(loop):
    seen = []

    def parent():
        loop.call_soon(child, "before")
        VAR.set("parent's")
        loop.call_soon(child, "after")
        loop.call_soon(child, "after, again")

    def child(tag):
        seen.append((tag, VAR.get()))
        VAR.set("child's")

    loop.call_soon(parent)
    run_until_idle(loop)
    assert seen == [("before", "unset"), ("after", "parent's"), ("after, again", "parent's")]
    assert VAR.get() == "unset"


@pytest.mark.skipif(sys.version_info < (3, 12), reason="Handle.get_context() is new in 3.12")
def test_get_context_is_the_context_the_callback_runs_in(loop):
    seen = {}

    def cb():
        VAR.set("inside")
        seen["during"] = handles[1].get_context()[VAR]

    handles = [loop.call_soon(cb), loop.call_soon(cb), loop.call_soon(cb)]
    before = handles[0].get_context()
    assert before.get(VAR) == "unset"
    assert handles[0].get_context() is before  # the same object every time
    assert handles[1].get_context() is not before
    run_until_idle(loop)
    # every handle's context now holds what its own callback set
    assert [h.get_context()[VAR] for h in handles] == ["inside"] * 3
    assert handles[0].get_context() is before
    assert seen["during"] == "inside"
    assert VAR.get() == "unset"


@pytest.mark.skipif(sys.version_info < (3, 12), reason="Handle.get_context() is new in 3.12")
@pytest.mark.parametrize("method", SCHEDULERS)
def test_explicit_context_is_run_in_and_keeps_what_is_set(loop, method):
    ctx = contextvars.Context()
    schedule(loop, method, VAR.set, "first", context=ctx)
    h = schedule(loop, method, lambda: VAR.set(VAR.get() + ", second"), context=ctx)
    run_until_idle(loop)
    assert h.get_context() is ctx
    assert ctx[VAR] == "first, second"


def test_cancel_cancelled_and_repr_of_handles_sharing_a_snapshot(loop):
    ran = []
    handles = [loop.call_soon(ran.append, i) for i in range(4)]
    handles[1].cancel()
    handles[1].cancel()
    assert [h.cancelled() for h in handles] == [False, True, False, False]
    assert "cancelled" in repr(handles[1]) and "cancelled" not in repr(handles[0])
    run_until_idle(loop)
    assert ran == [0, 2, 3]


def test_a_thread_schedules_in_its_own_context(loop):
    seen = []

    def from_thread():
        VAR.set("thread's")
        loop.call_soon_threadsafe(lambda: seen.append(VAR.get()))

    loop.call_soon(lambda: seen.append(VAR.get()))
    t = threading.Thread(target=from_thread)
    t.start()
    t.join()
    run_until_idle(loop)
    assert sorted(seen) == ["thread's", "unset"]


def test_many_pending_callbacks_each_see_their_snapshot(loop):
    seen = []
    for i in range(2000):
        if i % 500 == 0:
            VAR.set(f"phase {i // 500}")
        loop.call_soon(lambda: (seen.append(VAR.get()), VAR.set("overwritten")))
    VAR.set("unset")
    run_until_idle(loop)
    assert seen == [f"phase {i // 500}" for i in range(2000)]


async def _task_sees(tag):
    await asyncio.sleep(0)
    return tag, VAR.get()


def test_tasks_copy_the_context_at_creation(loop):
    async def main():
        VAR.set("a")
        t1 = asyncio.ensure_future(_task_sees(1))
        VAR.set("b")
        t2 = asyncio.ensure_future(_task_sees(2))
        return await asyncio.gather(t1, t2)

    assert loop.run_until_complete(main()) == [(1, "a"), (2, "b")]


KEPT_TOKENS_SCRIPT = """
import contextvars, gc
var = contextvars.ContextVar("var")
tokens = []
loop = factory()
def keep_a_token(i):
    tokens.append(var.set(i))  # a Token holds the context it was made in
loop.call_soon(keep_a_token, 0)
loop.call_soon_threadsafe(keep_a_token, 1)
loop.call_later(0, keep_a_token, 2)
loop.call_at(loop.time(), keep_a_token, 3)
for i in range(4, 100):
    loop.call_soon(keep_a_token, i)  # handles sharing one snapshot
loop.call_later(0.01, loop.stop)
loop.run_forever()
gc.collect()
print(len(tokens))
tokens.clear()  # the contexts' last references go with the tokens
gc.collect()
loop.close()
print("survived")
"""


def test_a_token_kept_after_its_callback_outlives_the_handle(loop_name):
    # zloopgo keeps context snapshots off the collector's lists; one that
    # a kept Token references must be back on them before its last
    # reference goes (it crashed the interpreter before).
    check(run_script(loop_name, KEPT_TOKENS_SCRIPT), "100", "survived")
