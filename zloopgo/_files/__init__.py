"""zloopgo.open(): asynchronous files with open()'s semantics.

``async with zloopgo.open(path, "rb") as f: data = await f.read()`` gives
the object open() would give, with every method that can touch the disk
made awaitable (aiofiles' interface), plus ``pread``/``pwrite``.

How it stays exactly open(): the object open() builds is built here too,
from CPython's own io classes (BufferedReader, BufferedWriter,
BufferedRandom; text mode adds _pyio's TextIOWrapper made to behave as
the C one). Only the raw layer under them is ours: it answers from bytes
already fetched and says "not now" for the rest; the awaitable method
then fetches those bytes off the loop thread and lets the io class go on,
and sends the writes the io class made before it returns. So every
result, position, buffer state and exception is the io classes' own.

The modules, one job each; each imports only modules above it here:

- raw.py: the raw layer (FileIO's interface over fetched bytes and kept
  writes);
- base.py: what both kinds of file share (the turn, the attributes that
  need no I/O, io's conversions);
- text.py: the re-created text layer (_pyio's TextIOWrapper as the C one,
  and the saving of its state);
- engine.py: how the engine's file operations are reached without
  loading the engine;
- native.py: the native layer, a file whose raw operations are the
  engine's (capi/files.c), on a zloopgo loop;
- executor.py: the fallback, open()'s own object with each call in the
  loop's default executor;
- opening.py: the public API, open() and the opening itself.

It knows the io classes' public behaviour and _engine.file_op; nothing of
Go or of how the engine schedules.
"""

from .opening import open

__all__ = ["open"]
