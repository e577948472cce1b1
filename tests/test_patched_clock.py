"""A clock tests can move: asyncio schedules call_later() and decides which
timers are due by loop.time(), so replacing it — mock.patch.object on the
loop, a subclass, a patch on the class — makes timers follow the
replacement. Dual-run: zloopgo must do as asyncio does (capi/clock.c)."""

import asyncio
import time
from unittest import mock

import pytest


class FakeClock:
    """A clock that moves only when told to, starting far from the real one."""

    def __init__(self, start=1_000_000.0):
        self.now = start

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


def run_briefly(loop, n=3):
    for _ in range(n):
        loop.call_soon(loop.stop)
        loop.run_forever()


def test_call_later_follows_a_patched_time(loop):
    clock = FakeClock()
    fired = []
    with mock.patch.object(loop, "time", clock):
        for delay in (30, 10, 20):
            loop.call_later(delay, fired.append, delay)
        h = loop.call_later(15, fired.append, "cancelled")
        h.cancel()
        assert h.when() == clock.now + 15
        run_briefly(loop)
        assert fired == []
        clock.advance(10)
        run_briefly(loop)
        assert fired == [10]
        clock.advance(25)
        run_briefly(loop)
        assert fired == [10, 20, 30]


def test_call_at_against_a_patched_time(loop):
    clock = FakeClock()
    fired = []
    with mock.patch.object(loop, "time", clock):
        loop.call_at(clock.now + 5, fired.append, "b")
        loop.call_at(clock.now + 1, fired.append, "a")
        clock.advance(100)
        run_briefly(loop)
    assert fired == ["a", "b"]


def test_asyncio_sleep_under_a_patched_time(loop):
    clock = FakeClock()

    async def advancer():
        for _ in range(100):
            await asyncio.sleep(0)
            clock.advance(10)

    async def main():
        t0 = time.monotonic()
        helper = asyncio.ensure_future(advancer())
        await asyncio.sleep(300)  # five fake minutes
        helper.cancel()
        return time.monotonic() - t0

    with mock.patch.object(loop, "time", clock):
        elapsed = loop.run_until_complete(main())
    assert elapsed < 10  # the real clock barely moved


@pytest.mark.skipif(not hasattr(asyncio, "timeout"), reason="asyncio.timeout is new in 3.11")
def test_asyncio_timeout_under_a_patched_time(loop):
    clock = FakeClock()

    async def main():
        async def advance_later():
            await asyncio.sleep(0)
            clock.advance(61)

        loop.call_soon(asyncio.ensure_future, advance_later())
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(60):
                await asyncio.sleep(3600)
        return clock.now

    with mock.patch.object(loop, "time", clock):
        assert loop.run_until_complete(main()) == 1_000_061.0


def test_unpatching_restores_the_real_clock(loop):
    clock = FakeClock(start=0.0)
    with mock.patch.object(loop, "time", clock):
        assert loop.time() == 0.0
    assert abs(loop.time() - time.monotonic()) < 1
    fired = []
    loop.call_later(0.01, fired.append, 1)
    loop.run_until_complete(asyncio.sleep(0.05))
    assert fired == [1]


def test_a_subclass_clock(loop_factory):
    base = type(loop_factory())

    class Shifted(base):
        shift = 0.0

        def time(self):
            return super().time() + self.shift

    lp = Shifted()
    try:
        fired = []
        lp.call_later(3600, fired.append, "an hour later")
        run_briefly(lp)
        assert fired == []
        lp.shift = 7200.0
        run_briefly(lp)
        assert fired == ["an hour later"]
    finally:
        lp.close()


def test_a_patch_on_the_loop_class(loop_factory):
    lp = loop_factory()
    clock = FakeClock()
    try:
        fired = []
        with mock.patch.object(type(lp), "time", lambda self: clock()):
            lp.call_later(50, fired.append, "x")
            run_briefly(lp)
            clock.advance(60)
            run_briefly(lp)
        assert fired == ["x"]
    finally:
        lp.close()


def test_a_clock_that_raises_ends_the_run_with_its_error(loop):
    def broken():
        raise ZeroDivisionError("clock")

    loop.call_soon(lambda: setattr(loop, "time", broken))
    with pytest.raises(ZeroDivisionError):
        loop.run_until_complete(asyncio.sleep(0.01))
    del loop.time
