"""Entry point: python -m benchmark [options] (run from scripts/, as
scripts/bench does). Prints the Markdown report on stdout and writes it,
with the raw samples as JSON, to bench-results/."""

import argparse
import os
import sys
import sysconfig
import time

from . import harness, report, samples, workloads

ROOT = os.path.dirname(harness.SCRIPTS)


def git_commit():
    head = samples.git(ROOT, "rev-parse", "HEAD")
    dirty = head != "unknown" and samples.git(ROOT, "status", "--porcelain", "--untracked-files=no")
    return head + (" (with uncommitted changes)" if dirty else "")


def loadavg():
    load = samples.loadavg()
    return " ".join(f"{x:.2f}" for x in load) if load else "?"


TABLES = ("seed1", "seed2", "gcon1", "gcon2", "span")


def parse(argv):
    env = os.environ
    p = argparse.ArgumentParser(prog="python -m benchmark", description=__doc__)
    p.add_argument(
        "--quick",
        action="store_true",
        default=env.get("ZL_BENCH_QUICK") == "1",
        help="sizes / 10, no warm-up, 1 round, no GC-on seed tables: a smoke run, not a result",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=int(env.get("ZL_BENCH_ROUNDS", 0)) or None,
        help="measured rounds of every workload (default: the seed's 7 for its table, "
        "each span workload's own, chosen from its CoV; --quick 1)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="warm-up rounds (default: seed 2, span 1 at a tenth of the sizes, the GC-on "
        "seed tables 0; --quick 0)",
    )
    p.add_argument(
        "--scale",
        type=float,
        default=float(env.get("ZL_BENCH_SCALE", 0)) or None,
        help="multiply every workload size (default 1, --quick 0.1)",
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per sample (default 30)")
    p.add_argument(
        "--tables",
        default=env.get("ZL_BENCH_TABLES", ""),
        help="comma-separated subset of " + ", ".join(TABLES) + " (default: all; --quick "
        "leaves out gcon1 and gcon2)",
    )
    p.add_argument(
        "--gc-off",
        action="store_true",
        help="disable the cyclic GC in the span's samples too (explains; never the headline)",
    )
    p.add_argument(
        "--workloads",
        default="",
        help="comma-separated subset (every table keeps those it has) of: "
        + ", ".join(workloads.WORKLOADS),
    )
    p.add_argument(
        "--contenders",
        default=env.get("ZL_BENCH_CONTENDERS", ""),
        help="comma-separated subset of the contenders (default: all available)",
    )
    p.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="WORKLOAD=N",
        help="size of one workload, not scaled (repeatable), e.g. --size stream_rtt=5000",
    )
    p.add_argument(
        "--free-threaded",
        action="store_true",
        help="seed 000's free-threaded table, on a free-threaded build: every loop with "
        "PYTHON_GIL=0 but zloopgo (the GIL on, as its engine turns it on) and asyncio-gil "
        "(asyncio with PYTHON_GIL=1); tables seed1 and seed2 unless --tables says",
    )
    p.add_argument("--title", default="", help="heading of the report (e.g. the Python)")
    p.add_argument("--heading", default="##", help="Markdown heading level of the report")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    a = p.parse_args(argv)
    if a.free_threaded and not sysconfig.get_config_var("Py_GIL_DISABLED"):
        p.error(f"--free-threaded: {sys.executable} is not a free-threaded build")
    scale = a.scale or (0.1 if a.quick else 1.0)
    only = [w for w in a.workloads.split(",") if w]
    for w in only:
        if w not in workloads.WORKLOADS:
            p.error(f"unknown workload {w!r}")
    size = {}
    for item in a.size:
        w, _, n = item.partition("=")
        if w not in workloads.WORKLOADS or not n.isdigit():
            p.error(f"bad --size {item!r}: want WORKLOAD=N")
        size[w] = int(n)
    chosen = [t for t in a.tables.split(",") if t] or [
        t
        for t in TABLES
        if not (a.quick and t.startswith("gcon"))
        and not (a.free_threaded and t not in ("seed1", "seed2"))
    ]
    for t in chosen:
        if t not in TABLES:
            p.error(f"unknown table {t!r}")
    one, two = harness.cpu_sets()
    rounds = a.rounds or (1 if a.quick else None)

    def pick(names):
        return [n for n in names if not only or n in only]

    def warm(default):
        return a.warmup if a.warmup is not None else (0 if a.quick else default)

    seed_rounds = rounds or 7
    # Seed 000's own setting is the headline: its harness disables the GC.
    # The same rows with the GC on follow, fewer rounds, after the code is warm.
    seed = {"workloads": pick(workloads.SEED), "kind": "seed"}
    specs = {
        "seed1": {
            **seed,
            "title": f"Seed 000's table, one core (taskset -c {one}), GC off as the seed runs it",
            "pin": one,
            "warmup": warm(2),
            "rounds": seed_rounds,
            "gc_off": True,
            "strace": ["seed_tcp"] if "seed_tcp" in pick(workloads.SEED) else [],
        },
        "seed2": {
            **seed,
            "title": f"Seed 000's table, two cores (taskset -c {two}), GC off as the seed runs it",
            "workloads": pick(workloads.SEED) if two else [],
            "pin": two,
            "warmup": warm(2),
            "rounds": seed_rounds,
            "gc_off": True,
        },
        "gcon1": {
            **seed,
            "title": f"Seed 000's table with the cyclic GC on, one core (taskset -c {one})",
            "pin": one,
            "warmup": warm(0),  # after the other seed tables: code already warm
            "rounds": rounds or 3,
            "gc_off": False,
        },
        "gcon2": {
            **seed,
            "title": f"Seed 000's table with the cyclic GC on, two cores (taskset -c {two})",
            "workloads": pick(workloads.SEED) if two else [],
            "pin": two,
            "warmup": warm(0),
            "rounds": rounds or 3,
            "gc_off": False,
        },
        "span": {
            "title": "The span: scheduler, network, names, processes (not pinned)",
            "workloads": pick(workloads.SPAN),
            "pin": None,
            "warmup": warm(1),
            "rounds": rounds,
            "gc_off": a.gc_off,
            "floor": True,
            "warmup_scale": 0.1,  # the span's warm-up runs a tenth of each size
            "kind": "span",
        },
    }
    if a.free_threaded:
        for t in ("seed1", "seed2", "gcon1", "gcon2"):
            specs[t]["title"] = specs[t]["title"].replace(
                "Seed 000's table", "Seed 000's free-threaded table"
            ) + (
                f"; {sys.version.split()[0]} free-threaded, PYTHON_GIL=0 for every loop but "
                "zloopgo, which runs with **the GIL on** (its engine turns it on when it loads; "
                "it refuses PYTHON_GIL=0), and asyncio-gil, asyncio with PYTHON_GIL=1"
            )
    tables = []
    for t in chosen:
        spec = dict(specs[t], id=t)
        if t in ("seed1", "gcon1") and one is None:
            spec["skipped"] = "taskset is not available"
            spec["workloads"] = []
        if t in ("seed2", "gcon2") and two is None:
            spec["skipped"] = "fewer than two CPUs (or no taskset)"
        tables.append(spec)
    return {
        "size": size,
        "scale": scale,
        "timeout": a.timeout,
        "tables": tables,
        "contenders": [c for c in a.contenders.split(",") if c],
        "quick": a.quick,
        "title": a.title,
        "heading": a.heading,
        "rounds": a.rounds,
        "free_threaded": a.free_threaded,
    }, a.out


def main(argv):
    config, out = parse(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    load_start = loadavg()
    # zloopgo's build_info loads its engine: never with PYTHON_GIL=0
    env = harness.gil_env(harness.ZL, config["free_threaded"])
    payload, status, detail = harness.run_worker(["--provenance"], 120, env)
    prov = payload or {"packages": {}, "error": f"provenance worker {status}: {detail}"}
    prov["git"] = git_commit()
    prov["installs"] = samples.installs()
    prov["loadavg_start"] = load_start
    results = harness.run(config, log=log)
    prov["loadavg_end"] = loadavg()
    prov["zloopgo_source"] = os.environ.get("ZL_BENCH_ZLOOPGO_SOURCE", "the checkout")
    md = report.render(results, prov, config.get("heading", "##"))
    print(md)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(results["started"]))
    tag = os.environ.get("ZL_BENCH_TAG") or "py{}.{}".format(*sys.version_info[:2])
    base = samples.write_report(out, "bench", tag, md, {"provenance": prov, **results}, stamp)
    log(f"# wrote {base}.md and .json ({results['elapsed']:.0f} s)")
    # A benchmark is not a test: missed targets do not fail the command.
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
