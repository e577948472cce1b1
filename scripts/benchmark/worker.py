"""One measured sample in a fresh interpreter.

    python -m benchmark.worker LOOP WORKLOAD SIZE
    python -m benchmark.worker --probe LOOP
    python -m benchmark.worker --provenance

prints one line `BENCH-RESULT {json}` on stdout: the measured seconds, the
counter and checks, the process's peak RSS and what the measured part
cost in context switches and CPU time (getrusage), and whether the GIL was
on at its end (free-threaded builds). Set ZL_BENCH_GC=off to
disable the cyclic GC in the sample (explanatory runs only).
ZL_BENCH_FAULT=LOOP:WORKLOAD:{hang,crash,raise,miscount} injects a fault
into matching samples, to check that the harness records failures.
"""

import gc
import json
import os
import resource
import sys

MARK = "BENCH-RESULT "
PACKAGES = (
    "zloopgo",
    "uvloop",
    "zloop",
    "rloop",
    "rsloop",
    "zuvloop",
    "blazio",
    "trustme",
    "cryptography",
)


# Every contender: how to make its loop. A peer is imported only when asked
# for, so a missing one fails its own samples and nothing else.
FACTORIES = {
    "asyncio": ("asyncio", "SelectorEventLoop"),
    "uvloop": ("uvloop", "new_event_loop"),
    "zloopgo": ("zloopgo", "new_event_loop"),
    "zloop": ("zloop", "new_event_loop"),
    "rloop": ("rloop", "new_event_loop"),
    "rsloop": ("rsloop", "new_event_loop"),
    "zuvloop": ("zuvloop", "new_event_loop"),
    "blazio": ("blazio", "new_event_loop"),
}


# The free-threaded table's second asyncio (benchmark/harness.py, FT_GIL):
# the same loop, run with PYTHON_GIL=1, so that its row shows what the GIL
# costs asyncio. Not a contender of the other tables.
ALIASES = {"asyncio-gil": "asyncio"}


def make_loop(name):
    name = ALIASES.get(name, name)
    if name not in FACTORIES:
        raise SystemExit(f"unknown loop {name!r}")
    import importlib

    module, factory = FACTORIES[name]
    return getattr(importlib.import_module(module), factory)()


def _emit(obj):
    sys.stdout.write(MARK + json.dumps(obj) + "\n")
    sys.stdout.flush()


def _version(dist):
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def probe(name):
    loop = make_loop(name)
    loop.call_soon(loop.stop)
    loop.run_forever()
    kind = f"{type(loop).__module__}.{type(loop).__qualname__}"
    loop.close()
    dist = ALIASES.get(name, name)
    _emit({"loop": name, "class": kind, "version": _version(dist) if dist != "asyncio" else None})


def provenance():
    import platform

    info = {
        "python": sys.version.replace("\n", " "),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "gc_enabled_default": gc.isenabled(),
        "gc_threshold": gc.get_threshold(),
        "packages": {d: _version(d) for d in PACKAGES},
    }
    try:
        import zloopgo

        info["zloopgo_build_info"] = zloopgo.build_info()
        from zloopgo import _engine

        info["zloopgo_engine"] = _engine.__file__
    except Exception as exc:  # noqa: BLE001 - recorded in the report, not hidden
        info["zloopgo_build_info"] = {"error": repr(exc)}
    _emit(info)


def sample(loop_name, workload_name, size):
    from . import workloads

    if workload_name == workloads.FLOOR.name:
        wl, loop = workloads.FLOOR, None
    else:
        wl = workloads.WORKLOADS[workload_name]
        loop = make_loop(loop_name)
        import asyncio

        asyncio.set_event_loop(loop)
    if os.environ.get("ZL_BENCH_GC", "on") == "off":
        gc.disable()
    gc_on = gc.isenabled()
    fault = os.environ.get("ZL_BENCH_FAULT", "")  # harness self-test: LOOP:WORKLOAD:KIND
    if fault.startswith(f"{loop_name}:{workload_name}:"):
        _inject(fault.rsplit(":", 1)[1])
    seconds, counter, checks, extra = wl.func(loop, size)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if fault == f"{loop_name}:{workload_name}:miscount":
        counter -= 1
    if loop is not None:
        loop.close()
    _emit(
        {
            "seconds": seconds,
            "counter": counter,
            "checks": checks,
            "extra": extra,
            "gc": gc_on,
            "pid": os.getpid(),
            "peak_rss_mib": peak / 1024,  # ru_maxrss is in KiB on Linux
            "meter": workloads.METER,
            "gil": gil_enabled(),
        }
    )


def gil_enabled():
    """Whether the GIL is on now (after the workload: zloopgo's engine turns
    it on when the first loop loads it); always on before 3.13, which has no
    sys._is_gil_enabled."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return True if is_enabled is None else is_enabled()


def _inject(kind):
    if kind == "hang":
        import time

        time.sleep(3600)
    elif kind == "crash":
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "raise":
        raise RuntimeError("injected failure")


def main(argv):
    if argv[:1] == ["--probe"]:
        probe(argv[1])
    elif argv[:1] == ["--provenance"]:
        provenance()
    else:
        loop_name, workload_name, size = argv
        sample(loop_name, workload_name, int(size))


if __name__ == "__main__":
    main(sys.argv[1:])
