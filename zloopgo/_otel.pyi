"""Type stub for zloopgo._otel: what zloopgo.instrument() returns."""

from typing import Any

class Instrumentation:
    def __init__(
        self, loop: Any, *, interval: float, meter_provider: Any, tracer_provider: Any
    ) -> None: ...
    def sample(self) -> None: ...
    def close(self) -> None: ...
