"""Runs hostile programs on both loops and finds, confirms and shrinks
differences.

Program i of seed S is generate(random.Random(f"{S}:{i}")): each program
can be made again alone, and a search's count (how many programs it took
to meet a difference) is the same on every run. A difference is confirmed
in fresh workers (transport_diff.search.run_pair), then `minimize` deletes
steps, trap methods and actions, and simplifies the program's settings,
keeping each change after which the program still shows a difference of
the same kind (the same signature, and what `accept` asks).
"""

import copy
import os
import random

from transport_diff import compare
from transport_diff import search as transport_search
from transport_diff.workers import Pair

from . import machines

# Freed memory filled with a pattern: a use after free crashes, where
# pymalloc's freed blocks would still look like the object they were.
MALLOC = {"PYTHONMALLOC": "debug"}


def pair(python=None, timeout=None, malloc=True, against="zloopgo", companion=False):
    """Workers for asyncio and `against` (asyncio: the harness against
    itself); with `companion`, each with an interpreter running a loop of
    its kind beside the programs (host.start_companion)."""
    kw = {"main": "hostile.host:worker_main", "journal": True}
    env = dict(MALLOC) if malloc else {}
    if companion:
        env["ZL_HOSTILE_COMPANION"] = "1"
    if env:
        kw["env"] = env
    if timeout is not None:
        kw["timeout"] = timeout
    return Pair("asyncio", against, python, **kw)


def program_for(machine, seed, i):
    return machines.generate(machine, random.Random(f"{seed}:{i}"))


run_pair = transport_search.run_pair


def run_accepted(p, program, accept):
    """(Difference or None, notes) for program: a difference `accept`
    takes is confirmed in fresh workers (as run_pair does); one it does
    not take is not run again (the workers are restarted all the same,
    so that the next program does not run in what this one left)."""
    ref, other = p.run(program)
    diff = compare.first_difference(ref["obs"], other["obs"], p.names)
    if diff is None:
        return None, (ref["notes"], other["notes"])
    if accept is not None and not accept(diff, program):
        p.restart()
        return diff, (ref["notes"], other["notes"])
    return run_pair(p, program)


class Found:
    def __init__(self, machine, seed, index, program, diff, notes):
        self.machine = machine
        self.seed = seed
        self.index = index  # 0-based: index + 1 programs were run
        self.program = program
        self.diff = diff
        self.notes = notes
        self.minimal = None  # (program, diff, notes)


def search(p, machine, seed, examples, accept=None, start=0, on_program=None):
    """The first program of `machine` (seed, start..examples-1) whose
    confirmed difference `accept` takes (any, when None), or None."""
    for i in range(start, examples):
        program = program_for(machine, seed, i)
        if on_program is not None:
            on_program(i, program)
        diff, notes = run_accepted(p, program, accept)
        if diff is not None and (accept is None or accept(diff, program)):
            return Found(machine, seed, i, program, diff, notes)
    return None


def _action_lists(value, out):
    """Every list of actions or steps inside value (lists whose items are
    all lists starting with a name), and every trap's method dict."""
    if isinstance(value, dict):
        for v in value.values():
            _action_lists(v, out)
        return
    if not isinstance(value, list):
        return
    if len(value) == 4 and value[0] == "trap" and isinstance(value[2], dict):
        out.append(value[2])
    elif value and all(isinstance(x, list) and x and isinstance(x[0], str) for x in value):
        out.append(value)
    for item in value:
        _action_lists(item, out)


SIMPLER = {"debug": False, "handler": "custom"}


def candidates(program):
    """Simpler variants of program, most promising first."""
    for key, value in SIMPLER.items():
        if key in program and program[key] != value:
            yield dict(copy.deepcopy(program), **{key: value})
    steps = program.get("steps", [])
    for i in range(len(steps)):
        p = copy.deepcopy(program)
        del p["steps"][i]
        yield p
    found = []
    _action_lists(program["steps"], found)
    for k in range(len(found)):
        container = found[k]
        keys = list(container) if isinstance(container, dict) else range(len(container))
        for key in reversed(list(keys)):
            p = copy.deepcopy(program)
            lists = []
            _action_lists(p["steps"], lists)
            del lists[k][key]
            yield p


def minimize(p, found, accept=None, budget=None):
    """The smallest variant of found's program that still differs the same
    way; sets found.minimal and returns it."""
    budget = budget or int(os.environ.get("ZL_HOSTILE_SHRINK", "400"))
    sig = found.diff.signature
    best = (found.program, found.diff, found.notes)
    runs = 0
    changed = True
    while changed and runs < budget:
        changed = False
        for candidate in candidates(best[0]):
            runs += 1
            diff, notes = run_pair(p, candidate)
            if (
                diff is not None
                and diff.signature == sig
                and (accept is None or accept(diff, candidate))
            ):
                best = (candidate, diff, notes)
                changed = True
                break
            if runs >= budget:
                break
    found.minimal = best
    return best
