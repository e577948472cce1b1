"""The command line of the transport differential test (run from the
repository root):

    python -m tests.transport_diff              # 300 programs, seed 19, stop at a difference
    python -m tests.transport_diff -n 5000 --seed 7 --machine stream --net tcp
    python -m tests.transport_diff --against asyncio -n 3000 --tally   # the harness against itself
    python -m tests.transport_diff --tally      # run all, count every kind of difference
    python -m tests.transport_diff --hunt       # per bug of issue 19: programs it took, minimal one
    python -m tests.transport_diff --replay prog.json [--show]

A difference is printed with the program (JSON) and saved under --save
(default $TMPDIR/transport-diff/) for --replay.
"""

import argparse
import json
import os
import sys
import tempfile
import time

# tests/hostile (the hostile vocabulary, the canary, the handler probe) is
# imported as the tests and the workers import it: tests/ on the path
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from . import compare, search
from .programs import MACHINES, NETS, programs
from .replay import replay, save
from .workers import Pair


def strategy(args):
    machine = None if args.machine == "any" else args.machine
    net = None if args.net == "any" else args.net
    if machine is None and net == "tls":
        machine = "transport"
    return programs(machine, net)


def report(args, program, diff, notes, title):
    print(f"== {title}")
    print(json.dumps(program))
    print(diff.describe(notes))
    path = save(args.save, program, f"{title.split()[0]}-seed{args.seed}.json")
    print(f"saved: {path}; replay: python -m tests.transport_diff --replay {path}")


def hunt(args, pair):
    """For each bug of compare.KNOWN: how many programs it took to meet it
    with this seed, and the minimal program it shrinks to."""
    status = 0
    for bug in args.bugs.split(","):
        start = time.monotonic()
        result = search.search(
            pair, strategy(args), args.examples, args.seed, compare.KNOWN[bug], not args.no_shrink
        )
        took = time.monotonic() - start
        if result.found_at is None:
            print(
                f"bug {bug}: not found in {args.examples} programs (seed {args.seed}, {took:.0f} s)"
            )
            status = 1
            continue
        flaky = " (FLAKY while shrinking)" if result.flaky else ""
        print(
            f"bug {bug}: found at program {result.found_at} (seed {args.seed}, {took:.0f} s){flaky}"
        )
        for sig, count in result.signatures.items():
            if sig.startswith("unconfirmed"):
                print(f"  {count} {sig}")
        program, diff, notes = result.minimal
        report(args, program, diff, notes, f"bug{bug} minimal")
    return status


def canary_rate(tally):
    """What the canary's fills did with the freed numbers they met."""
    met = sum(tally.values())
    if not met:
        return "met no freed number"
    return (
        f"landed on {tally.get('landed', 0)} of {met} freed numbers "
        f"({100 * tally.get('landed', 0) / met:.1f}%; another handle took "
        f"{tally.get('taken', 0)}, gave up on {tally.get('gave_up', 0)})"
    )


def _accept_none(diff):
    return False  # --tally: run every program, stop at none


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.transport_diff", description=__doc__)
    ap.add_argument("-n", "--examples", type=int, default=300)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--machine", choices=("any",) + MACHINES, default="any")
    ap.add_argument("--net", choices=("any",) + NETS["transport"], default="any")
    ap.add_argument("--against", default="zloopgo", choices=("zloopgo", "asyncio"))
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the workers")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--tally", action="store_true", help="run every program, count differences")
    ap.add_argument("--hunt", action="store_true")
    ap.add_argument("--bugs", default=",".join(sorted(compare.KNOWN)), help="with --hunt: which")
    ap.add_argument("--signature", help="stop at (and shrink) only differences with this signature")
    ap.add_argument("--replay")
    ap.add_argument("--show", action="store_true", help="with --replay: every observation")
    ap.add_argument("--save", default=os.path.join(tempfile.gettempdir(), "transport-diff"))
    args = ap.parse_args(argv)
    with Pair("asyncio", args.against, args.python) as pair:
        if args.replay:
            return replay(pair, args.replay, args.show, lambda diff, _: compare.known_bugs(diff))
        if args.hunt:
            return hunt(args, pair)
        start = time.monotonic()
        accept = _accept_none if args.tally else None
        if args.signature:

            def accept(diff):
                return diff.signature == args.signature

        shrink = not (args.no_shrink or args.tally)
        result = search.search(pair, strategy(args), args.examples, args.seed, accept, shrink)
        took = time.monotonic() - start
        print(
            f"{result.examples} programs in {took:.1f} s (worker time: asyncio "
            f"{result.seconds['ref']:.1f} s, {args.against} {result.seconds['other']:.1f} s), "
            f"worker restarts {[w.restarts for w in pair.workers]}, "
            f"TCP waits given up {result.sync_timeouts}, slowest {result.slowest[0]:.2f} s"
        )
        for key, name in (("ref", "asyncio"), ("other", args.against)):
            print(f"canary on {name}: {canary_rate(result.canary[key])}")
        if args.show:
            print("slowest:", json.dumps(result.slowest[1]))
        for i, (sig, count) in enumerate(sorted(result.signatures.items(), key=lambda kv: -kv[1])):
            program = result.samples[sig][0]
            path = save(args.save, program, f"tally{i}-seed{args.seed}.json")
            diff = result.samples[sig][1]
            bugs = compare.known_bugs(diff) if diff else "-"
            print(f"  {count:5d}  {sig}  (first: {path}, bugs {bugs})")
            if diff is None:
                print(result.samples[sig][2][0]["unconfirmed_diff"])
        if result.flaky:
            print("FLAKY: a failing program passed when run again")
            return 1
        if result.minimal is None:
            print("no difference" if not result.signatures else "")
            return 1 if result.signatures else 0
        print(f"first difference at program {result.found_at}")
        print("known bugs of issue 19 it shows:", compare.known_bugs(result.minimal[1]) or "none")
        report(args, *result.minimal, "minimal")
        return 1


if __name__ == "__main__":
    sys.exit(main())
