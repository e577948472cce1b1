"""How the package reaches the engine's file operations without loading
the engine: native_engine(loop) is the _engine module only when loop is a
zloopgo loop (and so the engine is loaded already) whose engine has the
file operations (every platform's has, Windows' too:
capi/files_windows.c; an operation the platform does not perform has no
number, which its caller checks), and run_op starts one operation
(capi/files.c's file_op, whose operation numbers are the module's
FILE_OP_* constants) and awaits its result.

It knows _engine.file_op's arguments; nothing of files, io or Go.
"""

from __future__ import annotations

import sys


def native_engine(loop):
    """The _engine module when loop is a zloopgo loop whose engine has the
    file operations, else None."""
    mod = sys.modules.get("zloopgo._engine")
    if mod is not None and isinstance(loop, mod.LoopCore) and hasattr(mod, "FILE_OP_OPEN"):
        return mod
    return None


async def run_op(
    loop, engine, code, fd=-1, n=0, offset=0, obj=None, obj2=None, mode=0, name=None, name2=None
):
    fut = loop.create_future()
    engine.file_op(loop, fut, code, fd, n, offset, obj, obj2, mode, False, name, name2, None)
    return await fut
