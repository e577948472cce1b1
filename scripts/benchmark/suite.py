"""The whole benchmark for scripts/bench: for every Python section, the
harness (seed 000's tables, GC off and on, the span), then on the
network section(s) the echo matrices (bench_uvloop/run.py), the HTTP
row, the application rows (benchmark/apps/), the file rows
(benchmark/filebench.py) and the scaling rows (benchmark/scaling/: 1 and
2 servers in interpreters and in processes); with the part ft, seed 000's
free-threaded table on the free-threaded section; then one Markdown report
with a section per Python, the JSON of every part, and a PNG chart per
section, all in bench-results/. A full run (every part, no --quick, no
harness arguments) also rewrites the tables of docs/benchmarks.md and its
charts (docs/bench/); --docs-from RUN_DIR
does that again from a run kept in bench-results/.

    python -m benchmark.suite --section 3.11=.venv-bench-3.11/bin/python \\
        --section 3.13=.venv-bench-3.13/bin/python --net 3.13 [--quick] [-- harness args]
    python -m benchmark.suite --parts ft --ft-section 3.14t=.venv-bench-3.14t/bin/python
    python -m benchmark.suite --docs-from ../bench-results/run-YYYYMMDD-HHMMSS
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

from . import samples

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ROOT = os.path.dirname(SCRIPTS)
T0 = samples.T0

# The parts after the harness, on the network section(s) only, in this
# order: the command after the interpreter, what --quick adds, where it
# runs, the label of its time. Each writes TAG-PART.md (its report here)
# and PART-TAG-*.json (its samples, the section's files[PART]).
NET_PARTS = {
    "echo": (
        [os.path.join(ROOT, "bench_uvloop", "run.py")],
        ["--rounds", "1", "--warmup", "0", "--num", "2000", "--go-num", "2000", "--sizes", "1024"],
        ROOT,
        "echo",
    ),
    "http": (
        ["-m", "benchmark.httpbench"],
        ["--rounds", "1", "--warmup", "0", "--duration", "1"],
        SCRIPTS,
        "HTTP",
    ),
    "apps": (
        ["-m", "benchmark.apps"],
        ["--rounds", "1", "--duration", "0.3", "--latency-duration", "0.3"],
        SCRIPTS,
        "apps",
    ),
    "files": (["-m", "benchmark.filebench"], ["--quick"], SCRIPTS, "files"),
    "scaling": (
        ["-m", "benchmark.scaling"],
        ["--rounds", "1", "--duration", "0.5"],
        SCRIPTS,
        "scaling",
    ),
}


def log(msg):
    samples.log(f"# {msg}")


def run_part(name, cmd, env, cwd, out_md):
    """Runs one part (its progress on stderr); returns its Markdown, or a
    note that it failed (a failure is a result, the run goes on)."""
    log(f"{name}: {' '.join(cmd)}")
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, text=True, check=False)
    log(f"{name}: done in {time.monotonic() - t0:.0f} s (exit {proc.returncode})")
    text = proc.stdout.strip()
    if proc.returncode != 0:
        text += f"\n\n**{name} exited with status {proc.returncode}** (its log is above on stderr)."
    with open(out_md, "w") as f:
        f.write(text + "\n")
    return text, time.monotonic() - t0


DOCS = os.path.join(ROOT, "docs", "benchmarks.md")
# docs/benchmarks.md keeps what is above this line and gets the report below it.
MARKER = "<!-- Below: written by scripts/bench (benchmark/suite.py) from its last full run. -->"


# What makes a run partial (scripts/bench's environment), so not for the docs.
NARROWING = ("ZL_BENCH_TABLES", "ZL_BENCH_CONTENDERS", "ZL_BENCH_ROUNDS", "ZL_BENCH_SCALE")


def public(text):
    """The report as the repository shows it: the checkout it ran in and
    its temporary folders are not named (paths relative to the checkout),
    and the commit is left to the run's JSON in bench-results/."""
    roots = set(re.findall(r"(/[^\s`'\"()]+?)/\.venv-bench-\d", text))
    for root in sorted(roots, key=len, reverse=True):
        text = re.sub(re.escape(root) + r" at [0-9a-f]{7,40}", "the checkout", text)
        text = text.replace(root + "/", "")
    text = re.sub(r"git commit: [0-9a-f]{40}", "git commit: in the run's JSON", text)
    text = re.sub(r"/tmp/[^\s/]+/snapshot/", "a snapshot's ", text)
    # one level down: the report's title becomes a section of the page
    return re.sub(r"^(#+) ", r"#\1 ", text, flags=re.MULTILINE)


def write_docs(run_dir, docs=DOCS):
    """Puts run_dir's report below MARKER in docs (the part above it is
    kept) and its charts into docs/bench/, linked where the report names
    them."""
    with open(os.path.join(run_dir, "report.md")) as f:
        text = f.read()
    charts_dir = os.path.join(os.path.dirname(docs), "bench")
    os.makedirs(charts_dir, exist_ok=True)
    for png in sorted(glob.glob(os.path.join(run_dir, "chart-*.png"))):
        shutil.copy(png, os.path.join(charts_dir, os.path.basename(png)))

    def image(m):
        name = os.path.basename(m.group(1))
        alt = name[: -len(".png")]
        if alt.startswith("chart-py"):
            alt = "Python " + alt[len("chart-py") :]
        return f"![{alt}](bench/{name})\n\nThe chart above: {m.group(2)}"

    text = re.sub(r"^Chart: `([^`]+)` \(in bench-results/\): (.*)$", image, text, flags=re.M)
    text = re.sub(r"\A# zloopgo benchmark\n", "# The last full run\n", text)
    head = ""
    if os.path.exists(docs):
        with open(docs) as f:
            head = f.read()
    head = head.split(MARKER)[0].rstrip("\n") + "\n\n" if MARKER in head else head
    with open(docs, "w") as f:
        f.write(head + MARKER + "\n\n" + public(text).strip() + "\n")
    return docs


def section_env(minor, a, installs):
    """The environment a Python section's harness runs in: its tag, the
    zloopgo source, and where its peers were installed."""
    env = dict(os.environ, ZL_BENCH_TAG=f"py{minor}", ZL_BENCH_ZLOOPGO_SOURCE=a.zloopgo_source)
    if minor in installs:
        env["ZL_BENCH_INSTALLS"] = os.path.abspath(installs[minor])
    return env


def version_of(python):
    """python's version, as sys.version's first word ('' if it would not say)."""
    return subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def free_threaded(minor, python, a, installs, run_dir, harness_args):
    """The part ft: seed 000's free-threaded table (the harness with
    --free-threaded) on the free-threaded Python: its report's lines and
    its wall time. No chart: the seed tables' figures are in the report."""
    tag = f"py{minor}"
    env = section_env(minor, a, installs)
    version = version_of(python)
    title = f"Free-threaded Python {version}"
    cmd = [python, "-m", "benchmark", "--free-threaded", "--title", title, "--out", run_dir]
    cmd += ["--heading", "###"] + (["--quick"] if a.quick else []) + harness_args
    text, secs = run_part(
        f"free-threaded harness on {version}",
        cmd,
        env,
        SCRIPTS,
        os.path.join(run_dir, f"{tag}-harness.md"),
    )
    sec = {"minor": minor, "python": python, "version": version, "chart": None}
    sec["files"] = {"harness": latest(os.path.join(run_dir, f"bench-{tag}-*.json"))}
    with open(os.path.join(run_dir, f"{tag}-section.json"), "w") as f:
        json.dump(sec, f, indent=1)
    return [f"## {title} (`{python}`)", "", text, ""], secs


def latest(pattern):
    found = sorted(glob.glob(pattern), key=os.path.getmtime)
    return found[-1] if found else None


def main(argv):
    if "--" in argv:
        i = argv.index("--")
        argv, harness_args = argv[:i], argv[i + 1 :]
    else:
        harness_args = []
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--section", action="append", default=[], metavar="X.Y=PYTHON")
    p.add_argument(
        "--net",
        default="",
        help="comma-separated X.Y of the sections that also run echo and HTTP",
    )
    p.add_argument("--quick", action="store_true")
    p.add_argument(
        "--parts",
        default="harness,echo,http,apps,files,scaling",
        help="of harness,echo,http,apps,files,scaling,ft",
    )
    p.add_argument(
        "--ft-section",
        default="",
        metavar="X.Yt=PYTHON",
        help="the free-threaded Python of the part ft (python -m benchmark --free-threaded)",
    )
    p.add_argument("--installs", default="", help="X.Y=peers.json,... from benchmark.peers")
    p.add_argument("--zloopgo-source", default="the checkout")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    p.add_argument(
        "--docs",
        choices=("auto", "yes", "no"),
        default="auto",
        help="rewrite docs/benchmarks.md: auto = after a full run only",
    )
    p.add_argument("--docs-from", metavar="RUN_DIR", help="only rewrite the docs from that run")
    a = p.parse_args(argv)
    if a.docs_from:
        log(f"wrote {write_docs(a.docs_from)} from {a.docs_from}")
        return 0
    parts = a.parts.split(",")
    nets = [x for x in a.net.split(",") if x]
    installs = dict(x.split("=", 1) for x in a.installs.split(",") if "=" in x)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_dir = os.path.join(a.out, f"run-{stamp}")
    os.makedirs(run_dir, exist_ok=True)
    sections = []
    for item in a.section:
        minor, python = item.split("=", 1)
        sections.append((minor, os.path.abspath(python)))

    report = []
    timing = []
    for minor, python in sections:
        tag = f"py{minor}"
        env = section_env(minor, a, installs)
        version = version_of(python)
        report.append(f"## Python {version} (`{python}`)")
        report.append("")
        sec = {"minor": minor, "python": python, "version": version, "files": {}}
        if "harness" in parts:
            cmd = [python, "-m", "benchmark", "--title", f"Python {version}", "--out", run_dir]
            cmd += ["--heading", "###"] + (["--quick"] if a.quick else [])
            explicit = any(x.startswith("--tables") for x in harness_args)
            if minor not in nets and not explicit and not os.environ.get("ZL_BENCH_TABLES"):
                # The two-core table and the GC-on seed tables run on the
                # network section only, to keep the default run's time.
                cmd += ["--tables", "seed1,span"]
            cmd += harness_args
            text, secs = run_part(
                f"harness on {version}",
                cmd,
                env,
                SCRIPTS,
                os.path.join(run_dir, f"{tag}-harness.md"),
            )
            report += [text, ""]
            timing.append((f"harness, Python {version}", secs))
            sec["files"]["harness"] = latest(os.path.join(run_dir, f"bench-{tag}-*.json"))
        for part, (args, quick, cwd, label) in NET_PARTS.items():
            if minor not in nets or part not in parts:
                continue
            cmd = [python, *args, "--heading", "###", "--tag", tag, "--out", run_dir]
            cmd += quick if a.quick else []
            text, secs = run_part(
                f"{part} on {version}", cmd, env, cwd, os.path.join(run_dir, f"{tag}-{part}.md")
            )
            report += [text, ""]
            timing.append((f"{label}, Python {version}", secs))
            sec["files"][part] = latest(os.path.join(run_dir, f"{part}-{tag}-*.json"))
        sec["chart"] = None
        if minor in nets and sec["files"].get("harness"):
            try:
                from . import charts

                png = os.path.join(run_dir, "chart-headline.png")
                what = f"seed 000's table on CPython {version} at default settings (GC on)"
                if charts.headline(sec["files"]["harness"], png, what[0].upper() + what[1:]):
                    report.append(
                        f"Chart: `{os.path.relpath(png, a.out)}` (in bench-results/): {what}, "
                        "one core and two: each loop's median time relative to asyncio's."
                    )
                    report.append("")
            except ImportError as exc:
                log(f"no headline chart: {exc}")
        try:
            from . import charts

            png = os.path.join(run_dir, f"chart-{tag}.png")
            if charts.draw(sec, png, quick=a.quick):
                sec["chart"] = png
        except ImportError as exc:
            log(f"no chart for {version}: {exc}")
        if sec["chart"]:
            report.append(
                f"Chart: `{os.path.relpath(sec['chart'], a.out)}` (in bench-results/): median "
                "bars with min–max whiskers, every contender relative to zloopgo's median."
            )
            report.append("")
        sec_path = os.path.join(run_dir, f"{tag}-section.json")  # the parts' JSON files
        with open(sec_path, "w") as f:
            json.dump(sec, f, indent=1)
    if "ft" in parts and a.ft_section:
        minor, python = a.ft_section.split("=", 1)
        python = os.path.abspath(python)
        sections.append((minor, python))
        lines, secs = free_threaded(minor, python, a, installs, run_dir, harness_args)
        report += lines
        timing.append((f"free-threaded harness, Python {minor}", secs))

    head = [
        "# zloopgo benchmark",
        "",
        "Made by `scripts/bench`"
        + (" --quick (a smoke run: reduced sizes and rounds, not a result)" if a.quick else "")
        + f"; zloopgo measured: {a.zloopgo_source}. Sections: "
        + ", ".join(f"Python {m}" for m, _ in sections)
        + (f"; echo and HTTP on Python {', '.join(nets)}" if nets else "")
        + ". Wall time per part: "
        + ", ".join(f"{name} {secs:.0f} s" for name, secs in timing)
        + f"; total {time.monotonic() - T0:.0f} s.",
        "",
    ]
    text = "\n".join(head + report)
    path = os.path.join(run_dir, "report.md")
    with open(path, "w") as f:
        f.write(text + "\n")
    shutil.copy(path, os.path.join(a.out, "latest.md"))
    for png in glob.glob(os.path.join(run_dir, "chart-*.png")):
        shutil.copy(png, os.path.join(a.out, "latest-" + os.path.basename(png)))
    print(text)
    log(f"report: {path} (copied to {a.out}/latest.md); total {time.monotonic() - T0:.0f} s")
    narrowed = [k for k in NARROWING if os.environ.get(k)]
    full = not (a.quick or harness_args or narrowed) and set(parts) >= {"harness", "echo", "http"}
    if a.docs == "yes" or (a.docs == "auto" and full):
        log(f"wrote {write_docs(run_dir)} and its charts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
