"""Run CPython's own asyncio test modules on zloopgo.

    python tests/conformance/run.py [--json out.json] [--module X ...] [--timeout S]
                                    [--network | --all] [--asyncio]

By default the modules that need no sockets; --network runs the socket,
server and subprocess ones (CPython's mixins bound to zloopgo as network.py
describes, and whole modules with the swap), --all both.

Each module runs in a fresh interpreter (the current one) with a timeout, so
a hang is a result rather than a stall; the child (_child.py) swaps
``asyncio.new_event_loop``, ``asyncio.events.new_event_loop`` and the
default policy's loop factory for ``zloopgo.new_event_loop``, checks that
asyncio.run, asyncio.Runner, the policy and IsolatedAsyncioTestCase all
get a zloopgo Loop, and records for every test whether it ran on zloopgo,
only on a test double (test_utils.TestLoop, a mocked BaseEventLoop) or on
no loop at all.

--asyncio runs the modules on asyncio's own loops instead (the child's
ZLCONF_LOOP=asyncio): the reference for a baseline of what fails on any
loop where the interpreter runs (scripts/windows asyncio-suite, under Wine).

Prints a Markdown table and exits 0; --json writes every test's outcome.
The known failures per Python minor version live in baseline-3.X.json next
to this file; tests/test_conformance.py compares a run with them.
"""

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (module, minimum Python, per-module timeout in seconds)
MODULES = [
    ("test_locks", (3, 10), 120),
    ("test_queues", (3, 10), 120),
    ("test_timeouts", (3, 11), 120),
    ("test_taskgroups", (3, 11), 120),
    ("test_waitfor", (3, 10), 120),
    ("test_threads", (3, 10), 120),
    ("test_futures2", (3, 10), 120),
    ("test_context", (3, 10), 120),
    ("test_pep492", (3, 10), 120),
    ("test_runners", (3, 10), 120),
    ("test_futures", (3, 10), 120),
    ("test_tasks", (3, 10), 180),
    ("test_eager_task_factory", (3, 12), 120),
    ("test_staggered", (3, 12), 120),
    ("test_protocols", (3, 10), 60),
    ("test_transports", (3, 10), 60),
    ("test_graph", (3, 14), 120),
    ("test_free_threading", (3, 14), 120),
    ("test_tools", (3, 14), 60),
]

# Modules that use sockets, pipes and subprocesses (loopback only). Those in
# network.BINDINGS run CPython's mixins bound to zloopgo (not the module's
# own SelectorEventLoop classes); the others run whole with the swap.
NETWORK_MODULES = [
    ("test_sock_lowlevel", (3, 10), 120),
    ("test_server", (3, 10), 120),
    ("test_buffered_proto", (3, 10), 60),
    ("test_sendfile", (3, 10), 120),
    ("test_events", (3, 10), 180),
    ("test_streams", (3, 10), 120),
    ("test_unix_events", (3, 10), 120),
    ("test_subprocess", (3, 10), 180),
    ("test_sslproto", (3, 10), 120),
    ("test_ssl", (3, 11), 180),
    ("test_server_context", (3, 15), 120),
    ("test_windows_events", (3, 10), 120),
    ("test_base_events", (3, 10), 120),
]

# Which platform each platform-bound network module runs on: test_unix_events
# skips itself at import on Windows; test_windows_events is Windows' (its
# loop-generic classes, network.py); test_base_events, mostly test doubles
# of BaseEventLoop, is run where a loop other than the selector loop is the
# reference (Windows' proactor), and only there, so the Linux baselines
# stay as they were.
NETWORK_PLATFORMS = {
    "test_unix_events": lambda: sys.platform != "win32",
    "test_windows_events": lambda: sys.platform == "win32",
    "test_base_events": lambda: sys.platform == "win32",
}


def available_modules(network=False):
    """(module, timeout) pairs this Python has: the socket-free modules, or
    with network=True the socket/server/subprocess ones."""
    import test.test_asyncio as pkg

    pkg_dir = Path(pkg.__file__).parent
    return [
        (name, timeout)
        for name, minver, timeout in (NETWORK_MODULES if network else MODULES)
        if sys.version_info[:2] >= minver
        and (pkg_dir / f"{name}.py").exists()
        and NETWORK_PLATFORMS.get(name, lambda: True)()
    ]


def baseline_path(version=None):
    major, minor = (version or sys.version_info)[:2]
    return HERE / f"baseline-{major}.{minor}.json"


# How many times a module that hung or crashed in a test is run again
# without the tests that have an outcome (that one counted as an error).
RESUMES = 6


def run_module(name, timeout, on_asyncio=False):
    """Run one module in a child; return its summary dict. A child that
    hangs (killed after `timeout`) or dies inside a test leaves the rest of
    the module unrun: the module is run again without the tests that have
    an outcome, the one it was in counted as an error, up to RESUMES
    times, so one hanging test costs its timeout, not the module."""
    events, outputs, seconds, hung_tests = [], [], 0.0, []
    hung = False
    for _attempt in range(RESUMES + 1):
        done_ids = {e["id"] for e in events if e["event"] == "test"}
        new, rc, hung_now, took, output = _run_child(name, timeout, on_asyncio, done_ids)
        seconds += took
        outputs.append(output)
        hung = hung or hung_now
        finished = {e["id"] for e in new if e["event"] == "test"}
        stuck = [e["id"] for e in new if e["event"] == "start" and e["id"] not in finished]
        if any(e["event"] == "done" for e in new) or not stuck:
            events += new
            break
        # the test the child was in gets its outcome now; the others run again
        new += [
            {"event": "test", **_stuck_outcome(test_id, hung_now, rc, output)} for test_id in stuck
        ]
        hung_tests += stuck if hung_now else []
        # the swap and adaptation events of a resumed child repeat the first's
        events += [e for e in new if not (events and e["event"] in ("swap", "adapted"))]
    summary = summarize(name, events, rc, hung, round(seconds, 2), "".join(outputs))
    summary["hung_tests"] = hung_tests
    return summary


def _run_child(name, timeout, on_asyncio, skip_ids):
    """One child on module `name` without the tests in skip_ids: (its
    events, exit status, whether it hung, seconds, its output)."""
    # ignore_cleanup_errors: on Windows a crashed child's debugger can
    # still hold its log open, which would end the whole run here
    with tempfile.TemporaryDirectory(prefix="zlconf-", ignore_cleanup_errors=True) as tmp:
        events_file = Path(tmp) / "events.jsonl"
        log_file = Path(tmp) / "output.log"
        cmd = [
            sys.executable,
            "-X",
            "faulthandler",
            str(HERE / "_child.py"),
            name,
            str(events_file),
            str(max(timeout - 5, 1)),
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("PYTHONASYNCIODEBUG", None)
        env.pop("ZLCONF_LOOP", None)
        env.pop("ZLCONF_SKIP_IDS", None)
        if on_asyncio:
            env["ZLCONF_LOOP"] = "asyncio"
        if skip_ids:
            env["ZLCONF_SKIP_IDS"] = ",".join(sorted(skip_ids))
        t0 = time.monotonic()
        with open(log_file, "wb") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            try:
                rc = proc.wait(timeout=timeout)
                hung = False
            except subprocess.TimeoutExpired:
                if sys.platform == "win32":  # no process groups: the child alone
                    proc.kill()
                else:
                    os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
                hung = True
        seconds = time.monotonic() - t0
        events = []
        if events_file.exists():
            for line in events_file.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    events.append(json.loads(line))
        output = log_file.read_text(errors="replace")
    return events, rc, hung, seconds, output


def _stuck_outcome(test_id, hung, rc, output, kind="unknown"):
    """The outcome of a test (or module, kind "fixture") that a child left
    unfinished: it hung and was killed, or the child died in it."""
    return {
        "id": test_id,
        "outcome": "error",
        "message": "hung: killed after timeout" if hung else f"child died (exit {rc})",
        "kind": kind,
        "seconds": None,
        "traceback": output[-6000:],
    }


def summarize(name, events, rc, hung, seconds, output):
    swap = next((e for e in events if e["event"] == "swap"), None)
    adapted = next((e["how"] for e in events if e["event"] == "adapted"), None)
    done = any(e["event"] == "done" for e in events)
    tests = [e for e in events if e["event"] == "test"]
    finished = {t["id"] for t in tests}
    running = [e["id"] for e in events if e["event"] == "start" and e["id"] not in finished]
    for test_id in running:
        tests.append(_stuck_outcome(test_id, hung, rc, output))
    if not done and not running:
        tests.append(_stuck_outcome(f"test.test_asyncio.{name}", hung, rc, output, "fixture"))
    counted = [t for t in tests if t["kind"] != "fixture" or t["outcome"] in ("fail", "error")]
    by = {
        k: sum(t["outcome"] == k for t in counted)
        for k in ("pass", "xfail", "fail", "error", "skip")
    }
    ran = [t for t in tests if t["kind"] != "fixture" and t["outcome"] != "skip"]
    kinds = {k: sum(t["kind"] == k for t in ran) for k in ("zloopgo", "double", "none")}
    if swap is not None and swap.get("stock"):
        check = "asyncio"  # --asyncio: no swap to check
    elif swap is None or not swap["ok"]:
        check = "FAIL"
    elif kinds["zloopgo"]:
        check = "ok"
    else:
        check = "n/a"
    return {
        "module": name,
        "ran": by["pass"] + by["xfail"] + by["fail"] + by["error"],
        "passed": by["pass"] + by["xfail"],
        "failed": by["fail"],
        "errors": by["error"],
        "skipped": by["skip"],
        "on_zloopgo": kinds["zloopgo"],
        "on_double": kinds["double"],
        "no_loop": kinds["none"],
        "swap_check": check,
        "swap": swap,
        "adapted": adapted,
        "hung": hung,
        "exit_code": rc,
        "seconds": seconds,
        "failures": {
            t["id"]: {"outcome": t["outcome"], "message": t["message"], "kind": t["kind"]}
            for t in tests
            if t["outcome"] in ("fail", "error")
        },
        "tests": tests,
        "output_tail": output[-4000:] if (hung or not done) else "",
    }


def table(results):
    head = (
        "| module | ran | passed | failed | errors | skipped | on zloopgo | test double "
        "| no loop | swap check | seconds |"
    )
    lines = [head, "|" + "---|" * 11]
    total = dict.fromkeys(
        ("ran", "passed", "failed", "errors", "skipped", "on_zloopgo", "on_double", "no_loop"), 0
    )
    for r in results:
        for k in total:
            total[k] += r[k]
        marks = (" *" if r["adapted"] else "") + (" (HUNG)" if r["hung"] else "")
        lines.append(
            f"| {r['module']}{marks} | {r['ran']} | {r['passed']} "
            f"| {r['failed']} | {r['errors']} | {r['skipped']} | {r['on_zloopgo']} "
            f"| {r['on_double']} | {r['no_loop']} | {r['swap_check']} | {r['seconds']} |"
        )
    lines.append(
        f"| **total** | {total['ran']} | {total['passed']} | {total['failed']} "
        f"| {total['errors']} | {total['skipped']} | {total['on_zloopgo']} "
        f"| {total['on_double']} | {total['no_loop']} | | "
        f"{round(sum(r['seconds'] for r in results), 1)} |"
    )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the full results here")
    ap.add_argument("--module", nargs="+", action="extend", help="only these modules")
    ap.add_argument("--timeout", type=float, help="per-module timeout (seconds)")
    which = ap.add_mutually_exclusive_group()
    which.add_argument(
        "--network", action="store_true", help="the socket/server/subprocess modules instead"
    )
    which.add_argument("--all", action="store_true", help="both sets of modules")
    ap.add_argument(
        "--asyncio", action="store_true", help="on asyncio's own loops (a reference run)"
    )
    args = ap.parse_args(argv)

    sockless, network = available_modules(), available_modules(network=True)
    mods = network if args.network else sockless + network if args.all else sockless
    if args.module:
        known = dict(sockless + network)
        unknown = [m for m in args.module if m not in known]
        if unknown:
            ap.error(f"not available on this Python: {', '.join(unknown)}")
        mods = [(m, known[m]) for m in args.module]

    results = []
    for name, timeout in mods:
        results.append(run_module(name, args.timeout or timeout, args.asyncio))

    on = "asyncio's own loops" if args.asyncio else "zloopgo"
    print(f"CPython {sys.version.split()[0]} asyncio tests on {on}\n")
    print(table(results))
    if args.asyncio:
        print("\n(test double: a loop not zloopgo's, here mostly asyncio's own.)")
    for r in results:
        if r["adapted"]:
            print(f"\n\\* {r['module']}: {r['adapted']}.")
    failing = [(r["module"], tid, f) for r in results for tid, f in r["failures"].items()]
    if failing:
        print("\nFailing tests:")
        for _mod, tid, f in failing:
            print(f"- {tid} [{f['outcome']}, {f['kind']}]: {f['message']}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "python": sys.version.split()[0],
                    "platform": sys.platform,
                    "loop": "asyncio" if args.asyncio else "zloopgo",
                    "modules": results,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
