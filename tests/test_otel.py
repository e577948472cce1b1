"""zloopgo.instrument() against the OpenTelemetry SDK's in-memory metric
reader and span exporter: the instruments report what stats() read on the
loop's thread for a workload of known counts, the loop's timer refreshes
them, slow callbacks become spans with their real start and end, close()
undoes it all, and a missing opentelemetry-api is said plainly. These are
zloopgo's own: stock asyncio has neither counters nor such spans."""

import asyncio
import logging
import sys
import time

import pytest
from helpers import accepted_pair, check, run_script, zloop
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import zloopgo


class Telemetry:
    """An SDK meter provider with an in-memory reader, and a tracer
    provider with an in-memory exporter."""

    def __init__(self):
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.exporter = InMemorySpanExporter()
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.exporter))

    def instrument(self, loop, interval=60.0):
        return zloopgo.instrument(
            loop, interval=interval, meter_provider=self.meters, tracer_provider=self.tracers
        )

    def points(self):
        """{instrument name: {frozenset of attributes: value}} as collected now."""
        out = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                assert scope.scope.name == "zloopgo"
                for metric in scope.metrics:
                    out[metric.name] = {
                        frozenset(p.attributes.items()): p.value for p in metric.data.data_points
                    }
        return out

    def close(self):
        self.meters.shutdown()
        self.tracers.shutdown()


@pytest.fixture
def telemetry():
    t = Telemetry()
    yield t
    t.close()


def value(points, name, **attributes):
    return points[name][frozenset(attributes.items())]


def test_the_instruments_report_a_known_workload(telemetry):
    with zloop() as loop:
        zloopgo.reset_stats(loop)
        inst = telemetry.instrument(loop)

        async def main():
            transport, _got, peer = await accepted_pair(loop)
            with peer:
                for size in (100, 20, 3):
                    transport.write(b"w" * size)
                for _ in range(25):
                    loop.call_soon(int)
                handles = [loop.call_later(100, print) for _ in range(4)]
                await asyncio.sleep(0)
                inst.sample()
                expected = zloopgo.stats(loop)
                for h in handles:
                    h.cancel()
                transport.close()
            return expected

        expected = loop.run_until_complete(main())
        points = telemetry.points()
        inst.close()
    assert value(points, "zloopgo.transport.writes", **{"zloopgo.transport.kind": "unix"}) == 3
    assert (
        value(points, "zloopgo.transport.write.bytes", **{"zloopgo.transport.kind": "unix"}) == 123
    )
    assert value(points, "zloopgo.transport.writes", **{"zloopgo.transport.kind": "tcp"}) == 0
    assert value(points, "zloopgo.loop.timers") == expected["timers"] >= 4
    assert value(points, "zloopgo.loop.callbacks") == expected["callbacks"] >= 25
    assert value(points, "zloopgo.loop.iterations") == expected["iterations"]
    assert value(points, "zloopgo.loop.descriptors") == expected["descriptors"]
    assert value(points, "zloopgo.loop.poll.time") == pytest.approx(expected["poll_ns"] / 1e9)
    assert value(points, "zloopgo.go.goroutines") == expected["go"]["goroutines"] > 0
    assert value(points, "zloopgo.go.gc.cycles") == expected["go"]["gc_cycles"]


def test_the_loops_timer_refreshes_the_reading(telemetry):
    with zloop() as loop:
        zloopgo.reset_stats(loop)
        inst = telemetry.instrument(loop, interval=0.01)
        before = value(telemetry.points(), "zloopgo.loop.timers.fired")

        async def main():
            await asyncio.sleep(0.03)  # due after the instrument's timer: it ran first

        loop.run_until_complete(main())
        after = value(telemetry.points(), "zloopgo.loop.timers.fired")
        inst.close()
    assert before == 0
    assert after >= 1  # at least the timer's own firing, read by itself


def test_a_slow_callback_is_a_span_with_its_real_times(telemetry, caplog):
    with zloop() as loop:
        loop.slow_callback_duration = 0.01
        inst = telemetry.instrument(loop)
        assert zloopgo.stats(loop)["slow_callback_detection"] is True

        def slow_one():
            time.sleep(0.03)

        wall_before = time.time_ns()
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            loop.call_soon(slow_one)
            loop.call_soon(int)  # fast: no span
            loop.stop()
            loop.run_forever()
        wall_after = time.time_ns()
        inst.close()
    (span,) = telemetry.exporter.get_finished_spans()
    assert span.name == "zloopgo slow callback"
    assert wall_before <= span.start_time < span.end_time <= wall_after
    # the span lasts what the callback was timed to have taken, as logged
    (logged,) = [r for r in caplog.records if ".slow_one() at " in r.getMessage()]
    assert span.end_time - span.start_time >= 10_000_000
    assert f"{(span.end_time - span.start_time) / 1e9:.3f}" == f"{logged.args[-1]:.3f}"
    assert "slow_one()" in span.attributes["zloopgo.callback"]
    assert span.attributes["zloopgo.slow_callback_duration"] == 0.01


def test_a_slow_task_step_span_names_the_task(telemetry):
    with zloop() as loop:
        loop.slow_callback_duration = 0.01
        inst = telemetry.instrument(loop)

        async def stalls():
            time.sleep(0.03)
            await asyncio.sleep(0)

        async def main():
            await asyncio.create_task(stalls(), name="staller")

        loop.run_until_complete(main())
        inst.close()
    (span,) = telemetry.exporter.get_finished_spans()
    assert span.attributes["asyncio.task.name"] == "staller"
    if sys.version_info >= (3, 14):
        assert "* Task(name='staller'" in span.attributes["asyncio.call_graph"]
        assert "main()" in span.attributes["asyncio.call_graph"]
    else:
        assert "asyncio.call_graph" not in span.attributes


def test_close_stops_the_timer_the_spans_and_the_timing(telemetry):
    with zloop() as loop:
        loop.slow_callback_duration = 0.01
        timers = zloopgo.stats(loop)["timers"]
        inst = telemetry.instrument(loop)
        assert zloopgo.stats(loop)["timers"] == timers + 1
        inst.close()
        inst.close()  # twice is once
        s = zloopgo.stats(loop)
        assert s["timers"] == timers and s["slow_callback_detection"] is False
        loop.call_soon(time.sleep, 0.03)
        loop.stop()
        loop.run_forever()
    assert telemetry.exporter.get_finished_spans() == ()


def test_close_keeps_timing_that_was_on_before(telemetry):
    with zloop() as loop:
        zloopgo.report_slow_callbacks(loop=loop)
        telemetry.instrument(loop).close()
        assert zloopgo.stats(loop)["slow_callback_detection"] is True


def test_instrument_refuses_what_it_cannot_use(telemetry):
    stock = asyncio.SelectorEventLoop()
    try:
        with pytest.raises(TypeError, match="needs a zloopgo loop"):
            telemetry.instrument(stock)
    finally:
        stock.close()
    with zloop() as loop:
        for bad in (0, -1.0, float("nan")):
            with pytest.raises(ValueError, match="positive number of seconds"):
                telemetry.instrument(loop, interval=bad)
        telemetry.instrument(loop, interval=1e-6).close()  # the smallest kind is fine


def test_without_opentelemetry_it_says_what_to_install():
    proc = run_script(
        "zloopgo",
        """
        sys.modules["opentelemetry"] = None  # as if not installed
        loop = factory()
        try:
            zloopgo.instrument(loop)
        except ImportError as exc:
            print(exc)
        loop.close()
        """,
    )
    check(proc, "zloopgo.instrument() needs opentelemetry-api: pip install 'zloopgo[otel]'")
