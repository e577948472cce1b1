"""Slow callbacks reported without debug mode (zloopgo.report_slow_callbacks,
new_event_loop(slow_callbacks=True), ZLOOPGO_SLOW_CALLBACKS=1): the
asyncio logger's warning is debug mode's, "Executing <handle> took N
seconds". Dual-run tests compare it with stock asyncio in debug mode (the
only way asyncio reports them); the rest are zloopgo's own: both sides of
the threshold, the setting off, a task's step with its call graph (3.14+),
and the counters stats() keeps."""

import asyncio
import logging
import re
import sys
import time

import pytest
from helpers import check, run_once, run_script, zloop

import zloopgo

MESSAGE = re.compile(r"^Executing (.+) took (\d+\.\d{3}) seconds")


def slow_records(caplog):
    return [r for r in caplog.records if r.name == "asyncio" and MESSAGE.match(r.getMessage())]


def report_slow(loop, loop_name):
    """asyncio reports slow callbacks in debug mode; zloopgo also without."""
    if loop_name == "asyncio":
        loop.set_debug(True)
    else:
        assert zloopgo.report_slow_callbacks(loop=loop) is False


def slow_callback():
    time.sleep(0.03)


def test_a_slow_callback_is_logged_as_asyncio_does(loop, loop_name, caplog):
    report_slow(loop, loop_name)
    loop.slow_callback_duration = 0.01
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        handle = loop.call_soon(slow_callback)
        run_once(loop)
    (record,) = slow_records(caplog)
    assert record.levelno == logging.WARNING
    assert record.msg == "Executing %s took %.3f seconds"
    what, seconds = MESSAGE.match(record.getMessage()).groups()
    assert float(seconds) >= 0.01
    # debug mode's handle repr adds where it was created
    assert what.startswith("<Handle slow_callback() at ") or what == "<Handle slow_callback()>"
    assert what.split(" created at ")[0].rstrip(">") in repr(handle)


def test_a_callback_under_the_threshold_is_not_logged(loop, loop_name, caplog):
    report_slow(loop, loop_name)
    loop.slow_callback_duration = 10
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        loop.call_soon(slow_callback)
        run_once(loop)
    assert not slow_records(caplog)


def test_a_slow_task_step_names_the_task(loop, loop_name, caplog):
    report_slow(loop, loop_name)
    loop.slow_callback_duration = 0.01

    async def stalls():
        time.sleep(0.03)
        await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        loop.run_until_complete(stalls())
    (record,) = slow_records(caplog)
    assert record.getMessage().startswith("Executing <Task ")
    assert "coro=<test_a_slow_task_step_names_the_task.<locals>.stalls()" in record.getMessage()


def test_nothing_is_timed_when_off():
    with zloop() as loop:
        loop.slow_callback_duration = 0
        loop.call_soon(slow_callback)
        run_once(loop)
        s = zloopgo.stats(loop)
    assert s["slow_callback_detection"] is False
    assert s["callbacks_timed"] == 0 and s["slow_callbacks"] == 0


def test_turned_off_again_it_reports_nothing(caplog):
    with zloop() as loop:
        loop.slow_callback_duration = 0.01
        zloopgo.report_slow_callbacks(loop=loop)
        assert zloopgo.report_slow_callbacks(False, loop=loop) is True
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            loop.call_soon(slow_callback)
            run_once(loop)
    assert not slow_records(caplog)


@pytest.mark.parametrize("keep_handle", [True, False])
def test_stats_count_timed_and_slow_callbacks(caplog, keep_handle):
    # A call_soon whose handle nobody kept runs without one (the report
    # makes one to name it); a cancelled handle does not run, is not timed.
    with zloop() as loop:
        zloopgo.report_slow_callbacks(loop=loop)
        loop.slow_callback_duration = 0.02
        zloopgo.reset_stats(loop)
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            if keep_handle:
                handles = [loop.call_soon(f) for f in (slow_callback, int, int)]
                handles[2].cancel()
            else:
                for f in (slow_callback, int, int):
                    loop.call_soon(f)
            run_once(loop)
        s = zloopgo.stats(loop)
    assert s["slow_callback_detection"] is True
    assert s["callbacks_timed"] == (2 if keep_handle else 3)
    assert s["slow_callbacks"] == 1
    assert s["callback_ns"] >= 20_000_000
    (record,) = slow_records(caplog)
    assert record.getMessage().startswith("Executing <Handle slow_callback() at ")


def test_a_threshold_of_zero_reports_every_callback(caplog):
    with zloop() as loop:
        zloopgo.report_slow_callbacks(loop=loop)
        loop.slow_callback_duration = 0
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            for _ in range(3):
                loop.call_soon(int)
            run_once(loop)
    assert len(slow_records(caplog)) == 3


@pytest.mark.parametrize("bad", ["soon", None, float("nan")])
def test_a_threshold_that_is_not_a_number_reports_nothing(caplog, bad):
    with zloop() as loop:
        zloopgo.report_slow_callbacks(loop=loop)
        loop.slow_callback_duration = bad
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            loop.call_soon(slow_callback)
            run_once(loop)
        assert zloopgo.stats(loop)["callbacks_timed"] == 1
    assert not slow_records(caplog)


def test_a_threadsafe_callback_is_reported_by_the_handle_it_returned(loop, loop_name, caplog):
    report_slow(loop, loop_name)
    loop.slow_callback_duration = 0.01
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        handle = loop.call_soon_threadsafe(slow_callback)
        run_once(loop)
    (record,) = slow_records(caplog)
    what = MESSAGE.match(record.getMessage()).group(1)
    # a Handle, or 3.14's _ThreadSafeHandle
    assert what.startswith(f"<{type(handle).__name__} slow_callback() at "), what


def test_a_slow_step_of_an_awaited_task_carries_the_call_graph_on_314(caplog):
    with zloop() as loop:
        zloopgo.report_slow_callbacks(loop=loop)
        loop.slow_callback_duration = 0.01

        async def stalls():
            time.sleep(0.03)
            await asyncio.sleep(0)

        async def awaits_it():
            await asyncio.create_task(stalls(), name="the-staller")

        with caplog.at_level(logging.WARNING, logger="asyncio"):
            loop.run_until_complete(awaits_it())
    (record,) = slow_records(caplog)
    text = record.getMessage()
    if sys.version_info < (3, 14):  # no asyncio.format_call_graph: debug mode's one line
        assert "\n" not in text and "name='the-staller'" in text
        return
    first, graph = text.split("\n", 1)
    assert "name='the-staller'" in first
    assert "* Task(name='the-staller'" in graph
    assert "awaits_it()" in graph  # who awaits it


def test_the_option_and_the_environment_variable_turn_it_on():
    with zloop() as plain:
        assert zloopgo.stats(plain)["slow_callback_detection"] is False
    loop = zloopgo.new_event_loop(slow_callbacks=True)
    try:
        assert zloopgo.stats(loop)["slow_callback_detection"] is True
    finally:
        loop.close()
    body = """
        import logging
        logging.basicConfig(format="%(name)s %(message)s")
        loop = factory()
        loop.slow_callback_duration = 0.01
        loop.call_soon(time.sleep, 0.03)
        loop.stop()
        loop.run_forever()
        print(zloopgo.stats(loop)["slow_callback_detection"])
        loop.close()
        off = zloopgo.new_event_loop(slow_callbacks=False)
        print("off", zloopgo.stats(off)["slow_callback_detection"])
        off.close()
    """
    for value, on in (("1", True), ("0", False), ("", False)):
        proc = run_script("zloopgo", body, env={"ZLOOPGO_SLOW_CALLBACKS": value})
        check(proc, str(on), "off False")
        assert ("asyncio Executing <Handle sleep(" in proc.stderr) is on, proc.stderr
