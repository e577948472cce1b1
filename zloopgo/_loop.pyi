"""Type stub for zloopgo._loop: Loop types as asyncio's Unix selector event loop.

The runtime class also derives from the C adapter's LoopCore, whose methods
are the selector loop's own (call_soon, call_later, add_reader, ...), so
type checkers see exactly asyncio's event loop API.
"""

import asyncio

class Loop(asyncio.SelectorEventLoop):
    """An asyncio event loop run by zloopgo's Go engine."""

    def __init__(self, *, slow_callbacks: bool | None = None) -> None: ...
