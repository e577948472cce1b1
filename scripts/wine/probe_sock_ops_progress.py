"""A probe, not a test: one program of tests/test_sock_ops_diff.py (a
socket kind and the program's number, made as the test makes it) run
RUNS times on each loop, with the descriptor canary watching or not, and
where the observations differ: between runs of one loop as well as
between the loops.

    python scripts/wine/probe_sock_ops_progress.py KIND N [RUNS] [SETTING] [SHOW] [LOOPS] [SHOWN]

SETTING: canary (the descriptor canary fills as in the test), plain (no
canary), sleep (no canary, a sleep of SLEEP seconds, 0.01, where each
fill would be: time without the canary's handles and traffic), both
(canary and plain; the default) or all.

Printed: the program's steps; then for each setting, each observation
index at which the runs did not all agree, with each distinct value and
which runs of which loop gave it (a1, a2: asyncio's first and second
run; z1: zloopgo's first), shortened to SHOW characters (200). LOOPS
(asyncio,zloopgo) names the loops each run runs, in order: asyncio alone
shows what the process's past (zloopgo's engine and threads loaded, the
handle values earlier runs left) changes. SHOWN (a comma list of
observation indexes) prints those even where every run agrees. An index
where asyncio's runs disagree among themselves, as they do with
zloopgo's, is the machine's timing, not a loop's; one where every
asyncio run agrees and every zloopgo run gives another is a loop's.

Runs on the installed zloopgo (the Windows wheel under Wine; Linux
too), importing tests/ beside this checkout (so the test's own masking
of a TCP pair's progress, Direction, applies: the runs below were made
before it). It knows nothing of what the test accepts: it only reruns
and compares.

Under Wine 8 (2026-12-07, the cp314 wheel at 8f94ee5, load 4 to 7),
subclass program 34's recv(131071) at observation 34: with the canary
it got 128,000, 128,512 or 129,024 bytes, asyncio's runs alone 1, 1
and 4 of 6, zloopgo's 3, 1 and 2 of 6 in one probe (always 128,000 in
three others); without the canary every run of both loops got
128,000; with the sleep, every run of both 129,024. unix program 31's
peer_recv (observation 14) got 104,352 with the canary in all 8 of
zloopgo's runs and 6 of asyncio's 8, 128,928 in asyncio's other 2, and
128,928 in every run of both with the sleep; tcp program
16's sendall outcome varied on both loops with the canary and agreed
without it. So it is loopback TCP's progress under Wine, which the
steps' length moves, not zloopgo's (docs/compatibility.md, "Windows").
"""

import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

import test_sock_ops_diff as sockops  # noqa: E402
from helpers import canary_tallies  # noqa: E402
from hostile.canary import Unwatched  # noqa: E402

_HOST = sockops._Host


def program(kind, number):
    """Program `number` of `kind` and its settings, as the test makes it."""
    rng = random.Random(repr(("sock_ops", kind)))
    for n in range(number + 1):
        debug, derived = n % 3 == 0, n % 4 == 1
        steps = sockops.make_program(rng, kind, debug)
    return steps, debug, derived


SLEEP = 0.01


class _Unwatched(sockops._Host):
    """The test's host without the canary."""

    def __init__(self, loop, log):
        super().__init__(loop, log)
        self.canary.close()
        self.canary = Unwatched()


class _Sleeping(_Unwatched):
    """The test's host without the canary, and a sleep where each fill
    would be."""

    def fill_canary(self):
        time.sleep(SLEEP)


def runs_of(kind, steps, debug, derived, runs, setting, loops):
    sockops._Host = {"canary": _HOST, "plain": _Unwatched, "sleep": _Sleeping}[setting]
    logs = {}
    for r in range(1, runs + 1):
        for name in loops:
            tallies = canary_tallies()
            logs[f"{name[0]}{r}"] = sockops.observe(name, kind, steps, debug, derived, tallies)
    return logs


def report(logs, show, shown):
    width = max(len(log) for log in logs.values())
    differing = 0
    for i in range(width):
        values = {}
        for run, log in logs.items():
            values.setdefault(repr(log[i]) if i < len(log) else "(none)", []).append(run)
        if len(values) == 1 and i not in shown:
            continue
        differing += len(values) > 1
        print(f"  observation {i}:")
        for value, who in values.items():
            print(f"    {' '.join(who)}: {value[:show]}")
    if not differing:
        print("  every run of both loops agrees")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    kind, number = argv[0], int(argv[1])
    runs = int(argv[2]) if len(argv) > 2 else 3
    which = argv[3] if len(argv) > 3 else "both"
    show = int(argv[4]) if len(argv) > 4 else 200
    loops = argv[5].split(",") if len(argv) > 5 else ["asyncio", "zloopgo"]
    shown = {int(i) for i in argv[6].split(",")} if len(argv) > 6 else set()
    steps, debug, derived = program(kind, number)
    print(f"{kind} program {number} (debug={debug}, derived={derived}): {steps}")
    for setting in ("canary", "plain", "sleep"):
        if which in (setting, "all") or (which == "both" and setting != "sleep"):
            print(f"== {setting}: {runs} runs a loop")
            report(runs_of(kind, steps, debug, derived, runs, setting, loops), show, shown)


if __name__ == "__main__":
    main(sys.argv[1:])
