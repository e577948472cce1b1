"""Entry point: python -m benchmark [options] (run from scripts/, as
scripts/bench does). Prints the Markdown report on stdout and writes it,
with the raw samples as JSON, to bench-results/."""

import argparse
import json
import os
import subprocess
import sys
import time

from . import harness, report, workloads

ROOT = os.path.dirname(harness.SCRIPTS)


def git_commit():
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def loadavg():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def parse(argv):
    env = os.environ
    p = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    p.add_argument(
        "--quick",
        action="store_true",
        default=env.get("ZL_BENCH_QUICK") == "1",
        help="sizes / 10 and 3 rounds: a smoke run, not a result",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=int(env.get("ZL_BENCH_ROUNDS", 0)) or None,
        help="measured rounds (default 11, --quick 3)",
    )
    p.add_argument("--warmup", type=int, default=1, help="warm-up rounds (default 1)")
    p.add_argument(
        "--scale",
        type=float,
        default=float(env.get("ZL_BENCH_SCALE", 0)) or None,
        help="multiply every workload size (default 1, --quick 0.1)",
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per sample (default 30)")
    p.add_argument(
        "--gc-off",
        action="store_true",
        help="disable the cyclic GC in samples (explains; never the headline)",
    )
    p.add_argument(
        "--workloads",
        default=",".join(workloads.WORKLOADS),
        help="comma-separated subset of: " + ", ".join(workloads.WORKLOADS),
    )
    p.add_argument(
        "--contenders",
        default="",
        help="comma-separated subset of the contenders (default: all available)",
    )
    p.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="WORKLOAD=N",
        help="size of one workload, not scaled (repeatable), e.g. --size stream_rtt=5000",
    )
    p.add_argument("--no-optional", action="store_true", help="leave rsloop out")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    a = p.parse_args(argv)
    rounds = a.rounds or (3 if a.quick else 11)
    scale = a.scale or (0.1 if a.quick else 1.0)
    names = [w for w in a.workloads.split(",") if w]
    for w in names:
        if w not in workloads.WORKLOADS:
            p.error(f"unknown workload {w!r}")
    size = {}
    for item in a.size:
        w, _, n = item.partition("=")
        if w not in workloads.WORKLOADS or not n.isdigit() or int(n) < 1:
            p.error(f"bad --size {item!r}: want WORKLOAD=N with N >= 1")
        size[w] = int(n)
    return {
        "size": size,
        "rounds": rounds,
        "warmup": a.warmup,
        "scale": scale,
        "timeout": a.timeout,
        "gc_off": a.gc_off,
        "workloads": names,
        "contenders": [c for c in a.contenders.split(",") if c],
        "optional": not a.no_optional,
        "quick": a.quick,
    }, a.out


def main(argv):
    config, out = parse(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    load_start = loadavg()
    payload, status, detail = harness.run_worker(["--provenance"], 120)
    prov = payload or {"packages": {}, "error": f"provenance worker {status}: {detail}"}
    prov["git"] = git_commit()
    prov["rsloop_install"] = os.environ.get("ZL_BENCH_RSLOOP_INSTALL", "not attempted")
    prov["loadavg_start"] = load_start
    results = harness.run(config, log=log)
    prov["loadavg_end"] = loadavg()
    md = report.render(results, prov)
    print(md)
    os.makedirs(out, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(results["started"]))
    with open(os.path.join(out, f"bench-{stamp}.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(out, f"bench-{stamp}.json"), "w") as f:
        json.dump({"provenance": prov, **results}, f, indent=1)
    with open(os.path.join(out, "latest.md"), "w") as f:
        f.write(md + "\n")
    log(f"# wrote {out}/bench-{stamp}.md and .json ({results['elapsed']:.0f} s)")
    # A benchmark is not a test: missed targets do not fail the command.
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
