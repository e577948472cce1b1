"""Event loops by name, for the reliability tools (soak.py, load.py): the
stock asyncio selector loop, uvloop, or zloopgo."""

import asyncio


def factory(name):
    """What makes a new loop of the named kind."""
    if name == "asyncio":
        return asyncio.SelectorEventLoop
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    if name == "zloopgo":
        import zloopgo

        return zloopgo.new_event_loop
    raise SystemExit(f"unknown loop {name}")
