"""What a closed subinterpreter leaves in the process (issue 41): N
interpreters made, given a program, run and closed one after another, after
a warm-up, in a fresh process per variant; it prints, per interpreter, the
resident memory kept (VmRSS, RssAnon), the blocks left allocated
(sys.getallocatedblocks(), which adds up what each deleted interpreter left),
and the process's threads and mappings before and after.

    python -m probes.interpmem [--variants empty,asyncio,run] [-n 40] [--warm-up 10]

The variants split a zloopgo interpreter into its steps (the package's
import, the engine's, a loop made and closed, a loop that runs the
scheduling program of tests/test_interpreters_isolation.py) beside asyncio's
loop running the same program and pure-Python imports of about the same
size, so that memory the allocator keeps can be told from an object that
stays. The figures go into docs/architecture.md ("What a closed interpreter
leaves"). It knows /proc (Linux) and CPython 3.14+'s concurrent.interpreters;
it does not know which allocator pages hold the memory (set MIMALLOC_*
options in the environment to see a free-threaded build's change).
"""

import argparse
import ast
import json
import os
import subprocess
import sys
import sysconfig
import textwrap

# The isolation test's source, where the scheduling program is kept.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOLATION_TEST = os.path.join(CHECKOUT, "tests", "test_interpreters_isolation.py")


def isolation_program(name):
    """A program of tests/test_interpreters_isolation.py (a string
    assigned to `name` at its top level), read from its source: importing
    the test would need pytest and the tests' helpers."""
    with open(ISOLATION_TEST) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        targets = [t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)]
        if isinstance(node, ast.Assign) and targets == [name]:
            return ast.literal_eval(node.value)
    raise LookupError(f"{name} is not assigned in {ISOLATION_TEST}")


# The scheduling program, with `loop` made first and closed last.
SCHEDULING = isolation_program("SCHEDULING") + "loop.close()\n"
ASYNCIO = "import asyncio, zloopgo\nloop = asyncio.SelectorEventLoop()\n" + SCHEDULING
ZLOOPGO = "import asyncio, zloopgo\nloop = zloopgo.new_event_loop()\n" + SCHEDULING

VARIANTS = {
    "empty": "pass",
    "asyncio_alone": "import asyncio\nloop = asyncio.SelectorEventLoop()\n" + SCHEDULING,
    "asyncio": ASYNCIO,
    "asyncio_optparse": "import optparse\n" + ASYNCIO,
    "asyncio_optparse_http": "import optparse, http.client\n" + ASYNCIO,
    "import": "import asyncio, zloopgo",
    "import_engine": "import asyncio, zloopgo, zloopgo._engine",
    "make": "import asyncio, zloopgo\nzloopgo.new_event_loop().close()",
    "run": ZLOOPGO,
}

# Runs in a fresh process: argv is the program, N and the warm-up.
COUNTER = """
import gc, json, os, sys
from concurrent import interpreters
program, n, warm_up = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def counts():
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, value = line.split(":", 1)
            if key in ("VmRSS", "RssAnon", "Threads"):
                found[key] = int(value.split()[0])
    with open("/proc/self/maps") as f:
        found["maps"] = sum(1 for _ in f)
    found["blocks"] = sys.getallocatedblocks()
    found["objects"] = len(gc.get_objects())
    return found
def one():
    interp = interpreters.create()
    try:
        interp.exec(program)
    finally:
        interp.close()
for _ in range(warm_up):
    one()
gc.collect()
before = counts()
for _ in range(n):
    one()
gc.collect()
print(json.dumps({"before": before, "after": counts()}))
"""


def measure(variant, n, warm_up):
    """One fresh process: per-interpreter figures of `variant`."""
    proc = subprocess.run(
        [sys.executable, "-c", COUNTER, VARIANTS[variant], str(n), str(warm_up)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{variant}: exit {proc.returncode}\n{proc.stderr}")
    got = json.loads(proc.stdout.splitlines()[-1])
    before, after = got["before"], got["after"]
    return {
        "rss_kb": (after["VmRSS"] - before["VmRSS"]) / n,
        "anon_kb": (after["RssAnon"] - before["RssAnon"]) / n,
        "blocks": (after["blocks"] - before["blocks"]) / n,
        "objects": after["objects"] - before["objects"],
        "threads": (before["Threads"], after["Threads"]),
        "maps": after["maps"] - before["maps"],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("-n", type=int, default=40, help="interpreters measured")
    parser.add_argument("--warm-up", type=int, default=10)
    args = parser.parse_args(argv)
    build = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    options = " ".join(
        f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("MIMALLOC_")
    )
    print(f"CPython {sys.version.split()[0]}{build} {options}".rstrip())
    print(
        textwrap.dedent(f"""\
        per interpreter, {args.n} after {args.warm_up}:
        {"variant":24} {"RSS kB":>9} {"anon kB":>9} {"blocks":>7} {"objects":>7} threads maps""")
    )
    for variant in args.variants.split(","):
        r = measure(variant, args.n, args.warm_up)
        print(
            f"{variant:24} {r['rss_kb']:9.1f} {r['anon_kb']:9.1f} {r['blocks']:7.1f}"
            f" {r['objects']:+7d} {r['threads'][0]}->{r['threads'][1]} {r['maps']:+d}"
        )


if __name__ == "__main__":
    main()
