"""The command line of the hostile programs (run from the repository root):

    python -m tests.hostile --machine handles -n 500 --seed 1   # first difference, shrunk
    python -m tests.hostile --machine files -n 500 --tally      # count each kind of difference
                                                                # (each confirmed in fresh workers)
    python -m tests.hostile --hunt --seed 1 -n 3000             # per bug: programs it took
    python -m tests.hostile --replay prog.json [--show]
    python -m tests.hostile --python other/venv/bin/python ...  # workers on another Python

A difference is printed with the program (JSON) and saved under --save
(default $TMPDIR/hostile/) for --replay.
"""

import argparse
import json
import os
import sys
import tempfile
import time

# import the harness as the tests and the workers do (tests/ on the path)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from transport_diff import compare
from transport_diff.replay import replay, save

from hostile import bugs, machines, search


def confirmed(pair, program, diff):
    """diff's signature when the program, run again in fresh workers,
    differs the same way; else the signature marked unconfirmed."""
    pair.restart()
    ref, other = pair.run(program)
    again = compare.first_difference(ref["obs"], other["obs"], pair.names)
    if again is not None and again.signature == diff.signature:
        return diff.signature
    return f"unconfirmed: {diff.signature}"


def show_found(args, program, diff, notes, title):
    print(f"== {title}")
    print(json.dumps(program))
    print(diff.describe(notes))
    path = save(args.save, program, f"{title.split()[0]}-{program['machine']}-seed{args.seed}.json")
    print(f"saved: {path}; replay: python -m tests.hostile --replay {path}")


def hunt(args, pair):
    """Per bug of bugs.KNOWN: programs of its machine (this seed) until
    the first whose difference is the bug; the minimal program."""
    status = 0
    rows = []
    for bug in args.bugs.split(","):
        machine, accept = bugs.KNOWN[bug]
        start = time.monotonic()
        found = search.search(pair, machine, args.seed, args.examples, accept)
        took = time.monotonic() - start
        if found is None:
            print(f"bug {bug}: not found in {args.examples} {machine} programs (seed {args.seed})")
            rows.append((bug, machine, args.seed, None, None))
            status = 1
            continue
        print(
            f"bug {bug}: {machine} program {found.index + 1} (seed {args.seed}, {took:.0f} s)",
            flush=True,
        )
        if not args.no_shrink:
            search.minimize(pair, found, accept)
            program, diff, notes = found.minimal
        else:
            program, diff, notes = found.program, found.diff, found.notes
        show_found(args, program, diff, notes, f"bug{bug} minimal")
        rows.append((bug, machine, args.seed, found.index + 1, program))
    print("\n| bug | machine | seed | programs to find | minimal program |")
    print("| --- | --- | ---: | ---: | --- |")
    for bug, machine, seed, count, program in rows:
        shown = f"`{json.dumps(program['steps'])}`" if program else "-"
        print(f"| {bug} | {machine} | {seed} | {count or 'not found'} | {shown} |")
    return status


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.hostile", description=__doc__)
    ap.add_argument("-n", "--examples", type=int, default=300)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--machine", choices=sorted(machines.MODULES), default="handles")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the workers")
    ap.add_argument("--no-malloc", action="store_true", help="workers without PYTHONMALLOC=debug")
    ap.add_argument("--against", default="zloopgo", choices=("zloopgo", "asyncio"))
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--tally", action="store_true", help="run every program, count differences")
    ap.add_argument("--hunt", action="store_true")
    ap.add_argument("--bugs", default=",".join(bugs.KNOWN), help="with --hunt: which")
    ap.add_argument("--replay")
    ap.add_argument("--show", action="store_true", help="with --replay: every observation")
    ap.add_argument("--save", default=os.path.join(tempfile.gettempdir(), "hostile"))
    args = ap.parse_args(argv)
    with search.pair(args.python, malloc=not args.no_malloc, against=args.against) as pair:
        if args.replay:
            return replay(pair, args.replay, args.show, bugs.which)
        if args.hunt:
            return hunt(args, pair)
        start = time.monotonic()
        if args.tally:
            tally = {}
            hits = {}

            def accept(diff, program):
                for bug in bugs.which(diff, program):
                    hits.setdefault(bug, []).append(program)
                # confirmed in fresh workers, as the search confirms: a
                # worker that ran earlier programs may differ by what they
                # left (a late executor thread's garbage, say)
                sig = confirmed(pair, program, diff)
                if sig not in tally:
                    path = save(args.save, program, f"tally{len(tally)}-{args.machine}.json")
                    print(f"new: {sig} ({path}; bugs {bugs.which(diff, program)})", flush=True)
                    tally[sig] = 0
                tally[sig] += 1
                return False

            search.search(pair, args.machine, args.seed, args.examples, accept)
            print(f"{args.examples} programs in {time.monotonic() - start:.1f} s")
            for sig, count in sorted(tally.items(), key=lambda kv: -kv[1]):
                print(f"  {count:5d}  {sig}")
            for bug, programs in sorted(hits.items()):
                path = save(args.save, programs[0], f"bug{bug}-{args.machine}.json")
                print(f"  bug {bug}: {len(programs)} programs (first: {path})")
            # an unconfirmed kind alone is not a failure: it is what workers left
            return 1 if any(not sig.startswith("unconfirmed") for sig in tally) else 0
        found = search.search(pair, args.machine, args.seed, args.examples)
        took = time.monotonic() - start
        if found is None:
            print(f"no difference in {args.examples} programs ({took:.1f} s)")
            return 0
        print(f"first difference at program {found.index + 1} ({took:.1f} s)")
        if not args.no_shrink:
            program, diff, notes = search.minimize(pair, found)
        else:
            program, diff, notes = found.program, found.diff, found.notes
        print("bugs of issue 39 it shows:", bugs.which(diff, program) or "none")
        show_found(args, program, diff, notes, "minimal")
        return 1


if __name__ == "__main__":
    sys.exit(main())
