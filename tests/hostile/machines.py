"""The hostile machines by name: each one's program generator
(`generate(rng)` -> a JSON program) and runner (`run(program, loop_name,
journal)` -> (observations, notes), in a worker)."""

import importlib

# name -> module (in tests/hostile/ or a differential test module of tests/)
MODULES = {
    "handles": "hostile.handles",
    "files": "hostile.files",
    "datagram": "hostile.datagram",
    "sockops": "hostile.sockops",
    "pipes": "hostile.pipes",
    "natives": "hostile.natives",
}


def module(name):
    return importlib.import_module(MODULES[name])


def generate(name, rng):
    return module(name).generate(rng)


def run(program, loop_name, journal=None):
    return module(program["machine"]).run(program, loop_name, journal)
