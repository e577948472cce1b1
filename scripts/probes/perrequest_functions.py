"""Which functions make probes/perrequest.py's instruction counts move from
run to run: from the callgrind files that `perrequest --measure
instructions --repeat R --keep DIR` kept, each function's own instructions
per request (the run of 2N requests less the run of N, divided by N) in
every repetition, and the functions whose figure moved most between
repetitions (max - min), each with the part of instructions.PARTS it
counts in.

    python -m probes.perrequest_functions DIR [--top 30] [--cell aiohttp-queries-zloopgo]

A function that moves is where to look for the cause of a spread: the
interpreter's garbage collector, the Go runtime's clock-driven work
(sysmon, the scavenger, timers), a loop iteration's fixed cost spread
over more or fewer requests. It reads only the files' names (as
perrequest.out_name writes them) and their contents; nothing of the
servers or of how the runs went.
"""

import argparse
import os
import re
import statistics
import sys

from .callgrind_costs import own_costs
from .instructions import PARTS, part_of
from .perrequest import OTHER_THREADS

NAME = re.compile(
    r"^instructions-(?P<cell>.+)-(?P<requests>\d+)-run(?P<run>\d+)\.out(?:-(?P<thread>\d+))?$"
)


def part(where):
    """The part of instructions.PARTS a function of own_costs counts in, or
    OTHER_THREADS for one that ran outside the loop's thread (--threads)."""
    ob, fl, fn = where[:3]
    if where[3:] == (OTHER_THREADS,):
        return OTHER_THREADS
    return part_of(f"{fl}:{fn} [{ob}]")


def cells(directory):
    """{cell: {run: {requests: {thread: path}}}} of the kept files in
    directory; thread is 0 for a run counted without --threads."""
    found = {}
    for entry in sorted(os.listdir(directory)):
        m = NAME.match(entry)
        if m:
            run = found.setdefault(m.group("cell"), {}).setdefault(int(m.group("run")), {})
            files = run.setdefault(int(m.group("requests")), {})
            files[int(m.group("thread") or 0)] = os.path.join(directory, entry)
    return found


def run_costs(files):
    """{(object, file, function, thread): own instructions} of one run's
    files {thread: path}: thread "" on the loop's thread (or all threads,
    counted together), OTHER_THREADS on the others."""
    costs = {}
    for thread, path in files.items():
        with open(path) as f:
            for where, cost in own_costs(f.read()).items():
                key = (*where, OTHER_THREADS if thread > 1 else "")
                costs[key] = costs.get(key, 0) + cost
    return costs


def per_request(runs):
    """{function: own instructions per request} of one repetition, from
    its two runs {requests: {thread: path}} (N and 2N), or None if one is
    missing."""
    if len(runs) != 2:
        return None
    n, twice_n = sorted(runs)
    once, twice = run_costs(runs[n]), run_costs(runs[twice_n])
    step = twice_n - n
    return {k: (twice.get(k, 0) - once.get(k, 0)) / step for k in set(once) | set(twice)}


def movers(runs, top):
    """The `top` functions whose figure moved most over the runs (a list
    of per-request dicts), as (max - min, min, median, max, where), and
    each part's (min, median, max)."""
    keys = set().union(*runs)
    rows = []
    for k in keys:
        values = [r.get(k, 0) for r in runs]
        lo, hi = min(values), max(values)
        rows.append((hi - lo, lo, statistics.median(values), hi, k))
    rows.sort(key=lambda r: (-r[0], r[4]))
    parts = {}
    for p in (*PARTS, OTHER_THREADS):
        sums = [sum(v for k, v in r.items() if part(k) == p) for r in runs]
        parts[p] = (min(sums), statistics.median(sums), max(sums))
    return rows[:top], parts


def report(directory, top, only=None):
    out = []
    for cell, reps in sorted(cells(directory).items()):
        if only and cell != only:
            continue
        runs = [r for r in (per_request(reps[k]) for k in sorted(reps)) if r is not None]
        if len(runs) < 2:
            out.append(f"{cell}: {len(runs)} complete run(s), nothing to compare")
            continue
        rows, parts = movers(runs, top)
        out.append(f"{cell}: {len(runs)} runs, own instructions per request")
        out.append(f"  {'part':16}{'min':>12}{'median':>12}{'max':>12}{'max - min':>12}")
        for p, (lo, mid, hi) in parts.items():
            if hi or lo:
                out.append(f"  {p:16}{lo:12,.0f}{mid:12,.0f}{hi:12,.0f}{hi - lo:12,.0f}")
        out.append(f"  {'max - min':>10}{'min':>11}{'median':>11}{'max':>11}  part: function")
        for moved, lo, mid, hi, where in rows:
            name = f"{part(where)}: {where[2]}"
            out.append(f"  {moved:10,.0f}{lo:11,.0f}{mid:11,.0f}{hi:11,.0f}  {name[:90]}")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", help="perrequest's --keep folder")
    p.add_argument("--top", type=int, default=30, help="functions listed per cell")
    p.add_argument("--cell", help="only this SERVER-ROW-LOOP")
    a = p.parse_args(argv)
    print(report(a.dir, a.top, a.cell))
    return 0


if __name__ == "__main__":
    sys.exit(main())
