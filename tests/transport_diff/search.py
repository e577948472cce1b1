"""Drives hypothesis over programs: generates them from a seed, runs each
on a Pair, stops at the first difference that `accept` takes, shrinks it
to a minimal program and returns what happened. Used by the pytest module
and by the command line.

Hypothesis's shrinker works on the choices that made a program and often
stops with ops that do nothing left in it (it gives up after so many
successful shrinks); `minimize` then deletes and simplifies the JSON
program itself, step by step, op by op, keeping each change after which
the program still shows a difference of the same kind.
"""

import copy

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Flaky

from . import compare


class Found(AssertionError):
    pass


class Result:
    def __init__(self):
        self.examples = 0  # programs run before the first accepted difference, and it
        self.found_at = None
        self.first = None  # (program, difference, notes) as first met
        self.minimal = None  # the same after shrinking
        self.flaky = False
        self.seconds = {"ref": 0.0, "other": 0.0}
        self.sync_timeouts = 0  # TCP waits that gave up (see runner.tcp_quiet)
        self.slowest = (0.0, None)  # (seconds, program)
        self.signatures = {}  # every difference met: signature -> count
        self.samples = {}  # signature -> the first (program, difference, notes) with it
        # per worker, what became of the freed numbers the canary met
        # (hostile.canary's tally: landed, taken, gave_up), summed
        self.canary = {"ref": {}, "other": {}}


def run_pair(pair, program):
    """(Difference or None, (ref notes, other notes)) for one program. A
    difference is confirmed in fresh workers (a program must not differ
    because of what an earlier one left behind in the process); one that
    is not is reported as None, with notes[0]["unconfirmed"] set."""
    ref, other = pair.run(program)
    diff = compare.first_difference(ref["obs"], other["obs"], pair.names)
    if diff is None:
        return None, (ref["notes"], other["notes"])
    pair.restart()
    ref, other = pair.run(program)
    again = compare.first_difference(ref["obs"], other["obs"], pair.names)
    if again is None or again.signature != diff.signature:
        ref["notes"]["unconfirmed"] = diff.signature
        ref["notes"]["unconfirmed_diff"] = diff.describe()
        return None, (ref["notes"], other["notes"])
    # the next program starts in fresh workers too
    pair.restart()
    return again, (ref["notes"], other["notes"])


def search(pair, strategy, examples, seed, accept=None, shrink=True):
    """Runs up to `examples` programs drawn from `strategy` with hypothesis
    seeded by `seed`; see Result."""
    result = Result()
    accept = accept or (lambda diff: True)
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=False,
        verbosity=hypothesis.Verbosity.quiet,
    )
    @hypothesis.seed(seed)
    @given(strategy)
    def check(program):
        diff, notes = run_pair(pair, program)
        for n, key in zip(notes, ("ref", "other"), strict=True):
            result.seconds[key] += n.get("seconds", 0.0)
            result.sync_timeouts += n.get("sync_timeouts", 0)
            for outcome, count in n.get("canary", {}).items():
                result.canary[key][outcome] = result.canary[key].get(outcome, 0) + count
            result.slowest = max(
                result.slowest, (n.get("seconds", 0.0), program), key=lambda x: x[0]
            )
        if result.found_at is None:
            result.examples += 1
        if notes[0].get("unconfirmed"):
            sig = "unconfirmed: " + notes[0]["unconfirmed"]
            result.signatures[sig] = result.signatures.get(sig, 0) + 1
            result.samples.setdefault(sig, (program, None, notes))
        if diff is None:
            return
        if result.found_at is None:
            result.signatures[diff.signature] = result.signatures.get(diff.signature, 0) + 1
            result.samples.setdefault(diff.signature, (program, diff, notes))
        if not accept(diff):
            return
        if result.found_at is None:
            result.found_at = result.examples
            result.first = (program, diff, notes)
        result.minimal = (program, diff, notes)
        raise Found(diff.signature)

    try:
        check()
    except Found:
        pass
    except Flaky:
        result.flaky = True
    if shrink and result.minimal is not None:
        same = result.minimal[1].signature
        result.minimal = minimize(pair, result.minimal, lambda d: accept(d) and d.signature == same)
    return result


def _op_lists(program):
    """Every list of ops in a program, nested ones too."""
    lists = [program["log_ops"], program["handler_ops"]]
    for step in program["steps"]:
        if step[0] in ("call", "direct", "task"):
            lists.append(step[1])
        elif step[0] == "arm":
            lists.append(step[3])
    i = 0
    while i < len(lists):
        for op in lists[i]:
            if op[0] in ("soon", "fin"):
                lists.append(op[1])
        i += 1
    return lists


def _candidates(program):
    """Smaller or simpler variants of a program, most promising first."""
    for i in reversed(range(len(program["steps"]))):
        p = copy.deepcopy(program)
        del p["steps"][i]
        if p["steps"]:
            yield p
    for k in range(len(_op_lists(program))):
        for i in reversed(range(len(_op_lists(program)[k]))):
            p = copy.deepcopy(program)
            ops = _op_lists(p)[k]
            if len(ops) > 1 or k < 2:
                del ops[i]
                yield p
    for key, value in (("debug", False), ("sockbuf", 65536)):
        if program[key] != value:
            yield dict(copy.deepcopy(program), **{key: value})
    for k in range(len(_op_lists(program))):
        for i, op in enumerate(_op_lists(program)[k]):
            if op[0] == "write" and op[2:] != ["bytes", 1, False] and op[3] > 0:
                p = copy.deepcopy(program)
                _op_lists(p)[k][i][2:] = ["bytes", min(op[3], 1), False]
                yield p
    for i, step in enumerate(program["steps"]):
        if step[0] == "arm" and (step[4] or step[5] is not None):
            p = copy.deepcopy(program)
            p["steps"][i][4:] = [False, None]
            yield p


def minimize(pair, found, accept):
    """The smallest variant of found=(program, diff, notes) that `accept`
    still takes, by greedy deletion and simplification."""
    best = found
    changed = True
    while changed:
        changed = False
        for candidate in _candidates(best[0]):
            diff, notes = run_pair(pair, candidate)
            if diff is not None and accept(diff):
                best = (candidate, diff, notes)
                changed = True
                break
    return best
