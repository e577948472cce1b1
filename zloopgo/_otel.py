"""zloopgo.instrument(): one loop's stats() as OpenTelemetry metrics, and
its slow callbacks as spans, through opentelemetry-api alone (the optional
extra zloopgo[otel]); the SDK or whatever the program configured does the
rest.

The figures are read by a timer of the loop, on the loop's own thread
(stats() refuses any other while the loop runs); the observable
instruments' callbacks, which a metric reader calls on its own thread,
hand out the last reading. Slow callbacks come from the adapter's timing
(zloopgo.report_slow_callbacks), which instrument() turns on, with their
real start and end. This module knows the names of stats()'s figures and
the OpenTelemetry API; nothing of how the figures are counted.
"""

import time
from asyncio import base_events

from . import __version__, _engine

# stats() key -> (instrument name, unit, description, scale): the totals,
# emitted as observable counters (reset_stats() reads as a counter reset).
COUNTERS = [
    ("iterations", "zloopgo.loop.iterations", "{iteration}", "Loop iterations", 1),
    ("callbacks", "zloopgo.loop.callbacks", "{callback}", "Callbacks run", 1),
    ("poll_ns", "zloopgo.loop.poll.time", "s", "Time in the wait for events", 1e-9),
    ("idle_ns", "zloopgo.loop.idle.time", "s", "Time in waits that could block", 1e-9),
    ("busy_ns", "zloopgo.loop.busy.time", "s", "Time between waits (callbacks)", 1e-9),
    ("waits", "zloopgo.loop.waits", "{wait}", "Waits for events made", 1),
    ("events", "zloopgo.loop.events", "{event}", "Descriptor events the waits returned", 1),
    ("timers_fired", "zloopgo.loop.timers.fired", "{timer}", "Timers that came due", 1),
    ("slow_callbacks", "zloopgo.loop.slow_callbacks", "{callback}", "Slow callbacks", 1),
    ("lookups_done", "zloopgo.lookups.done", "{lookup}", "Name lookups finished", 1),
]
# per transport kind (the attribute zloopgo.transport.kind)
TRANSPORT_COUNTERS = [
    ("reads", "zloopgo.transport.reads", "{call}", "Native recv calls"),
    ("read_bytes", "zloopgo.transport.read.bytes", "By", "Bytes the native reads returned"),
    ("writes", "zloopgo.transport.writes", "{call}", "Native send calls"),
    ("write_bytes", "zloopgo.transport.write.bytes", "By", "Bytes the native sends took"),
    ("writes_buffered", "zloopgo.transport.writes.buffered", "{write}", "Writes left buffered"),
]
# stats() key -> instrument: what is there now, emitted as observable gauges
GAUGES = [
    ("ready", "zloopgo.loop.ready", "{callback}", "Callbacks ready to run"),
    ("timers", "zloopgo.loop.timers", "{timer}", "Timers pending"),
    ("descriptors", "zloopgo.loop.descriptors", "{descriptor}", "Descriptors watched"),
    ("lookups_in_flight", "zloopgo.lookups.in_flight", "{lookup}", "Name lookups waiting"),
]
# stats()["go"] key -> instrument, for the process
GO_GAUGES = [
    ("goroutines", "zloopgo.go.goroutines", "{goroutine}", "Live goroutines"),
    ("heap_bytes", "zloopgo.go.heap.bytes", "By", "Go heap memory in live and unswept objects"),
    ("memory_bytes", "zloopgo.go.memory.bytes", "By", "Memory the Go runtime has mapped"),
    ("threads", "zloopgo.go.threads", "{thread}", "OS threads the Go runtime made"),
]
GO_COUNTERS = [
    ("gc_cycles", "zloopgo.go.gc.cycles", "{cycle}", "Go GC cycles completed"),
]

SPAN_NAME = "zloopgo slow callback"


def _wall_offset():
    """The wall clock less the monotonic one, in ns, for moving monotonic
    readings to the wall clock spans carry: taken between two monotonic
    readings, the closest of three pairs (a thread preempted between
    readings would otherwise shift every span it converts)."""
    best = None
    for _ in range(3):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if best is None or after - before < best[0]:
            best = (after - before, wall - (before + after) // 2)
    return best[1]


def _api():
    try:
        from opentelemetry import metrics, trace
    except ImportError as exc:
        raise ImportError(
            "zloopgo.instrument() needs opentelemetry-api: pip install 'zloopgo[otel]'"
        ) from exc
    return metrics, trace


class Instrumentation:
    """What instrument() returns: sample() reads the loop's figures now (on
    its thread), close() stops the timer, the spans, and the slow-callback
    timing if instrument() turned it on."""

    def __init__(self, loop, *, interval, meter_provider, tracer_provider):
        metrics, trace = _api()
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        self._loop = loop
        self._interval = interval
        self._metrics = metrics
        self._trace = trace
        meter_provider = meter_provider or metrics.get_meter_provider()
        tracer_provider = tracer_provider or trace.get_tracer_provider()
        meter = meter_provider.get_meter("zloopgo", __version__)
        self._tracer = tracer_provider.get_tracer("zloopgo", __version__)
        self._stats = _engine.stats(loop)
        for key, name, unit, description, scale in COUNTERS:
            meter.create_observable_counter(
                name, [self._reader(key, scale)], unit=unit, description=description
            )
        for key, name, unit, description in TRANSPORT_COUNTERS:
            meter.create_observable_counter(
                name, [self._transport_reader(key)], unit=unit, description=description
            )
        for key, name, unit, description in GAUGES:
            meter.create_observable_gauge(
                name, [self._reader(key, 1)], unit=unit, description=description
            )
        for key, name, unit, description in GO_GAUGES:
            meter.create_observable_gauge(
                name, [self._go_reader(key)], unit=unit, description=description
            )
        for key, name, unit, description in GO_COUNTERS:
            meter.create_observable_counter(
                name, [self._go_reader(key)], unit=unit, description=description
            )
        self._was_timing = _engine.set_slow_callbacks(loop, True)
        loop._zl_slow_listeners.append(self._slow_span)
        self._timer = loop.call_later(interval, self._tick)
        self._closed = False

    # ---- reading, on the loop's thread ----

    def sample(self):
        """Read the loop's figures now; the instruments report them until
        the next reading. Call it on the loop's thread."""
        if not self._closed:
            self._stats = _engine.stats(self._loop)

    def _tick(self):
        self.sample()
        if not self._closed:
            self._timer = self._loop.call_later(self._interval, self._tick)

    def close(self):
        """Stop sampling and emitting spans (the instruments then report
        the last reading); slow-callback timing goes back to how it was."""
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        self._loop._zl_slow_listeners.remove(self._slow_span)
        if not self._loop.is_closed():
            _engine.set_slow_callbacks(self._loop, self._was_timing)

    # ---- the instruments' callbacks, on the metric reader's thread ----

    def _reader(self, key, scale):
        observation = self._metrics.Observation

        def observe(_options):
            value = self._stats[key]
            return [observation(value * scale if scale != 1 else value)]

        return observe

    def _transport_reader(self, key):
        observation = self._metrics.Observation

        def observe(_options):
            kinds = self._stats["transports"]
            return [
                observation(counts[key], {"zloopgo.transport.kind": kind})
                for kind, counts in kinds.items()
            ]

        return observe

    def _go_reader(self, key):
        observation = self._metrics.Observation

        def observe(_options):
            value = self._stats["go"][key]
            return [observation(value)] if value >= 0 else []

        return observe

    # ---- spans ----

    def _slow_span(self, handle, start_ns, end_ns):
        offset = _wall_offset()
        callback = handle._callback
        task = getattr(callback, "__self__", None)
        attributes = {
            "zloopgo.callback": base_events._format_handle(handle),
            "zloopgo.slow_callback_duration": float(self._loop.slow_callback_duration),
        }
        from ._loop import _awaiting_graph

        if hasattr(task, "get_name") and hasattr(task, "get_coro"):
            attributes["asyncio.task.name"] = task.get_name()
            graph = _awaiting_graph(handle)
            if graph:
                attributes["asyncio.call_graph"] = graph
        span = self._tracer.start_span(
            SPAN_NAME, start_time=start_ns + offset, attributes=attributes
        )
        span.end(end_time=end_ns + offset)
