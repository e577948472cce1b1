"""Compares a run of CPython's asyncio test modules on zloopgo with a
baseline where no pytest runs them (scripts/windows asyncio-suite: Windows
CPython under Wine). tests/test_conformance.py does the same under pytest
with baseline-3.X.json; this file adds the other half a foreign platform
needs, a baseline of asyncio's own results there.

    compare.py baseline ASYNCIO.json OUT.json
        writes OUT.json: the tests that fail on asyncio's own loops in
        ASYNCIO.json (run.py --asyncio --json), each with its message; an
        OUT.json there already keeps its entries of the modules not run
    compare.py check ZLOOPGO.json BASELINE.json...
        exits 1 when, in ZLOOPGO.json (run.py --json), a module hung, the
        swap did not take, or a test failed that no BASELINE lists (the
        asyncio-run one above, the Linux baseline-3.X.json of investigated
        zloopgo failures); lists the baseline's tests that pass on zloopgo.
        A test of a mixin network.py binds to zloopgo (ZloopgoXxxTests)
        has no id of its own in asyncio's run, which runs the module's
        classes (on Windows SelectEventLoopTests and ProactorEventLoopTests):
        it counts as known when the same method of the same module fails in
        a baseline under any class, and is listed as such

It knows run.py's JSON and the baselines' format; nothing of how they ran.
"""

import json
import sys
from pathlib import Path


def load(path):
    return json.loads(Path(path).read_text())


def make_baseline(asyncio_json, out):
    run = load(asyncio_json)
    assert run.get("loop") == "asyncio", f"{asyncio_json} is not a run on asyncio's own loops"
    ran = {module["module"] for module in run["modules"]}
    # the entries of modules this run did not run stay as they were
    kept = {}
    if Path(out).exists():
        kept = {
            test_id: entry
            for test_id, entry in load(out)["known_failures"].items()
            if test_id.split(".")[2] not in ran
        }
    failures = kept | {
        test_id: {
            "category": "fails-on-asyncio",
            "reason": f"fails on asyncio's own loop on {run['platform']} too "
            f"(CPython {run['python']}): {failure['outcome']}: {failure['message']}",
        }
        for module in run["modules"]
        for test_id, failure in sorted(module["failures"].items())
    }
    Path(out).write_text(
        json.dumps(
            {
                "python": ".".join(run["python"].split(".")[:2]),
                "platform": run["platform"],
                "about": "Tests of CPython's asyncio suite that fail on asyncio's own loops "
                "here (run.py --asyncio), so cannot count against zloopgo: written by "
                "tests/conformance/compare.py baseline.",
                "known_failures": dict(sorted(failures.items())),
            },
            indent=1,
        )
        + "\n"
    )
    print(f"{len(failures) - len(kept)} tests fail on asyncio's own loops: {out}")


def check(zloopgo_json, baselines):
    run = load(zloopgo_json)
    assert run.get("loop") == "zloopgo", f"{zloopgo_json} is not a run on zloopgo"
    known = {}
    for path in baselines:
        known.update(load(path)["known_failures"])
    by_method = {}
    for test_id in known:
        by_method.setdefault(_module_and_method(test_id), []).append(test_id)
    problems, passing_known, matched = [], [], []
    for module in run["modules"]:
        name = module["module"]
        # a test it hung in is among its failures (run.py resumed after it)
        if module["hung"] and not module.get("hung_tests"):
            problems.append(f"{name} hung")
        if module["swap_check"] == "FAIL":
            problems.append(f"{name}: the swap did not give zloopgo loops: {module['swap']}")
        for test_id, failure in module["failures"].items():
            if test_id in known:
                continue
            same = by_method.get(_module_and_method(test_id)) if _bound(test_id) else None
            if same:
                matched.append(f"{test_id}: as {', '.join(sorted(same))}")
            else:
                problems.append(f"{test_id} [{failure['outcome']}]: {failure['message']}")
        outcomes = {t["id"]: t["outcome"] for t in module["tests"]}
        passing_known += [t for t in known if outcomes.get(t) in ("pass", "xfail")]
    ran = sum(m["ran"] for m in run["modules"])
    print(f"{ran} tests in {len(run['modules'])} modules on zloopgo, CPython {run['python']}")
    if matched:
        print("failing, as the same test of asyncio's classes fails:\n  " + "\n  ".join(matched))
    if passing_known:
        print("in a baseline, passing on zloopgo:\n  " + "\n  ".join(sorted(passing_known)))
    if problems:
        print("failing, not in a baseline:\n  " + "\n  ".join(problems))
        return 1
    print("no failure outside the baselines")
    return 0


def _bound(test_id):
    """A test of a class network.py bound to zloopgo (ZloopgoXxxTests): its
    id is not the one asyncio's run has for the same test."""
    return test_id.split(".")[-2].startswith("Zloopgo")


def _module_and_method(test_id):
    """test.test_asyncio.MODULE.CLASS.METHOD -> (MODULE, METHOD): the same
    test whichever loop class the mixin was bound to."""
    parts = test_id.split(".")
    return parts[2] if len(parts) > 4 else None, parts[-1]


if __name__ == "__main__":
    if sys.argv[1:2] == ["baseline"] and len(sys.argv) == 4:
        make_baseline(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["check"] and len(sys.argv) >= 4:
        sys.exit(check(sys.argv[2], sys.argv[3:]))
    else:
        sys.exit(__doc__)
