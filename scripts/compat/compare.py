"""Compares one downstream suite's outcomes on asyncio and on zloopgo (scripts/compat).

report ASYNCIO ZLOOPGO --project P --allowlist FILE --suspects OUT
    Prints each run's counts and every test whose outcome differs, and
    writes to OUT the tests that passed on asyncio and failed, errored or
    did not run on zloopgo, less the allow-listed ones: the suspects.
loops DIR --run asyncio|zloopgo
    Adds up the loops each process of a run built (DIR/<pid>.json, written
    by site/sitecustomize.py) and fails if the zloopgo run built no zloopgo
    loop or the asyncio run built one: the proof that the swap took effect.
confirm SUSPECTS RERUN_ASYNCIO RERUN_ZLOOPGO
    Reads the suspects' reruns (each loop once, only the suspects) and
    exits 1 if any still passes on asyncio and fails on zloopgo.

Inputs are pytest-reportlog's files (`--report-log=FILE`: a JSON line per
report, flushed as it comes, so a run killed by its timeout leaves what it
did; under pytest-xdist only the controller writes, with every worker's).
"""

import argparse
import glob
import json
import os
import sys
from collections import Counter

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
# A failure in any phase outranks what the other phases said.
RANK = {"failed": 2, "error": 1}


def phase_outcome(line):
    """The outcome one report-log line gives its test (a test phase's
    report, or a collection that failed), or None if it gives none."""
    kind = line.get("$report_type")
    if kind == "CollectReport":
        return "error" if line["outcome"] == "failed" else None
    if kind != "TestReport":
        return None  # the session's start and finish, warnings
    xfail = "wasxfail" in line
    if line["outcome"] == "failed":
        return "failed" if line["when"] == "call" else "error"
    if line["outcome"] == "skipped":
        return "xfailed" if xfail else "skipped"
    if line["when"] == "call":
        return "xpassed" if xfail else "passed"
    return None  # a setup or teardown that passed says nothing alone


def message(longrepr):
    """A report's one-line reason: a skip's, or the exception that failed it."""
    if isinstance(longrepr, list):  # a skip: [path, line, reason]
        return str(longrepr[2])
    if isinstance(longrepr, dict):  # a traceback, serialized
        return ((longrepr.get("reprcrash") or {}).get("message") or "").strip()[:300]
    return (longrepr or "").strip()[:300]


def load(path):
    """{nodeid: (outcome, message)}; a test without a verdict is left out."""
    tests = {}
    with open(path) as f:
        for text in f:
            line = json.loads(text)
            outcome = phase_outcome(line)
            if outcome is None:
                continue
            said = message(line["longrepr"]) if line["outcome"] != "passed" else ""
            old = tests.get(line["nodeid"])
            if old is None or RANK.get(outcome, 0) > RANK.get(old[0], 0):
                tests[line["nodeid"]] = (outcome, said)
    return tests


def summary(tests):
    counts = Counter(outcome for outcome, _ in tests.values())
    return ", ".join(f"{counts[o]} {o}" for o in OUTCOMES)


def load_allowlist(path, project):
    """{nodeid: reason} for PROJECT; lines are 'PROJECT NODEID -- REASON'."""
    allowed = {}
    with open(path) as f:
        for number, text in enumerate(f, 1):
            text = text.strip()
            if not text or text.startswith("#"):
                continue
            head, sep, reason = text.partition(" -- ")
            fields = head.split(None, 1)
            if not sep or not reason.strip() or len(fields) != 2:
                sys.exit(f"{path}:{number}: expected 'PROJECT NODEID -- REASON'")
            if fields[0] == project:
                allowed[fields[1].strip()] = reason.strip()
    return allowed


def describe(result):
    if result is None:
        return "did not run"
    outcome, message = result
    return f"{outcome}: {message}" if message else outcome


def report(args):
    base, zl = load(args.asyncio), load(args.zloopgo)
    allowed = load_allowlist(args.allowlist, args.project)
    print(f"asyncio: {summary(base)}")
    print(f"zloopgo: {summary(zl)}")
    suspects, other = [], []
    for nodeid in sorted(base.keys() | zl.keys()):
        a, z = base.get(nodeid), zl.get(nodeid)
        if (a and a[0]) == (z and z[0]):
            continue
        regressed = a is not None and a[0] == "passed" and (z is None or z[0] in RANK)
        if regressed and nodeid not in allowed:
            suspects.append(nodeid)
        else:
            other.append(nodeid)
    print(f"\n{len(suspects)} passed on asyncio and not on zloopgo:")
    for nodeid in suspects:
        print(f"  {nodeid}\n      zloopgo: {describe(zl.get(nodeid))}")
    print(f"\n{len(other)} other differences:")
    for nodeid in other:
        note = f"\n      allowed: {allowed[nodeid]}" if nodeid in allowed else ""
        print(
            f"  {nodeid}\n      asyncio: {describe(base.get(nodeid))}"
            f"\n      zloopgo: {describe(zl.get(nodeid))}{note}"
        )
    with open(args.suspects, "w") as f:
        f.writelines(f"{nodeid}\n" for nodeid in suspects)


def loops(args):
    counts = Counter()
    files = glob.glob(os.path.join(args.dir, "*.json"))
    for path in files:
        with open(path) as f:
            counts.update(json.load(f))
    ours = sum(n for name, n in counts.items() if name.startswith("zloopgo."))
    built = ", ".join(f"{n:,} {name}" for name, n in counts.most_common())
    print(f"   loops built, by class, in {len(files)} processes: {built or 'none'}")
    if args.run == "zloopgo" and ours == 0:
        print("   the zloopgo run built no zloopgo loop: the swap did not take effect")
        return 1
    if args.run == "asyncio" and ours:
        print("   the asyncio run built zloopgo loops")
        return 1
    return 0


def confirm(args):
    with open(args.suspects) as f:
        suspects = [line.strip() for line in f if line.strip()]
    base, zl = load(args.asyncio), load(args.zloopgo)
    confirmed = 0
    print(f"\nRerun of the {len(suspects)} suspects, alone, once on each loop:")
    for nodeid in suspects:
        a, z = base.get(nodeid), zl.get(nodeid)
        if a is not None and a[0] == "passed" and (z is None or z[0] in RANK):
            confirmed += 1
            verdict = "FAILS ON ZLOOPGO ONLY"
        elif a is None or a[0] != "passed":
            verdict = "not confirmed: did not pass on asyncio either when rerun"
        else:
            verdict = "not confirmed: passed on zloopgo when rerun (flaky)"
        print(f"  {nodeid}: {verdict}\n      asyncio: {describe(a)}\n      zloopgo: {describe(z)}")
    print(f"\n{confirmed} test(s) pass on asyncio and fail on zloopgo")
    return 1 if confirmed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("report")
    p.add_argument("asyncio")
    p.add_argument("zloopgo")
    p.add_argument("--project", required=True)
    p.add_argument("--allowlist", required=True)
    p.add_argument("--suspects", required=True)
    p = commands.add_parser("loops")
    p.add_argument("dir")
    p.add_argument("--run", choices=("asyncio", "zloopgo"), required=True)
    p = commands.add_parser("confirm")
    p.add_argument("suspects")
    p.add_argument("asyncio")
    p.add_argument("zloopgo")
    args = parser.parse_args()
    return {"report": report, "loops": loops, "confirm": confirm}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
