"""The whole benchmark for scripts/bench: for every Python section, the
harness (seed 000's table, its GC-off diagnostic, the span), then on the
network section(s) the echo matrices (bench_uvloop/run.py), the HTTP
row and the file rows (benchmark/filebench.py); then one Markdown report
with a section per Python, the JSON of every
part, and a PNG chart per section, all in bench-results/.

    python -m benchmark.suite --section 3.11=.venv-bench-3.11/bin/python \\
        --section 3.13=.venv-bench-3.13/bin/python --net 3.13 [--quick] [-- harness args]
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ROOT = os.path.dirname(SCRIPTS)
T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.0f} s] # {msg}", file=sys.stderr, flush=True)


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
    p.add_argument("--parts", default="harness,echo,http,files", help="of harness,echo,http,files")
    p.add_argument("--installs", default="", help="X.Y=peers.json,... from benchmark.peers")
    p.add_argument("--zloopgo-source", default="the checkout")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    a = p.parse_args(argv)
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
        env = dict(os.environ, ZL_BENCH_TAG=tag, ZL_BENCH_ZLOOPGO_SOURCE=a.zloopgo_source)
        if minor in installs:
            env["ZL_BENCH_INSTALLS"] = os.path.abspath(installs[minor])
        version = subprocess.run(
            [python, "-c", "import sys; print(sys.version.split()[0])"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        report.append(f"## Python {version} (`{python}`)")
        report.append("")
        sec = {"minor": minor, "python": python, "version": version, "files": {}}
        if "harness" in parts:
            cmd = [python, "-m", "benchmark", "--title", f"Python {version}", "--out", run_dir]
            cmd += ["--heading", "###"] + (["--quick"] if a.quick else [])
            explicit = any(x.startswith("--tables") for x in harness_args)
            if minor not in nets and not explicit and not os.environ.get("ZL_BENCH_TABLES"):
                # The two-core table and the GC-off diagnostic run on the
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
        if minor in nets and "echo" in parts:
            cmd = [python, os.path.join(ROOT, "bench_uvloop", "run.py"), "--heading", "###"]
            cmd += ["--tag", tag, "--out", run_dir]
            if a.quick:
                cmd += ["--rounds", "1", "--warmup", "0", "--num", "2000", "--go-num", "2000"]
                cmd += ["--sizes", "1024"]
            text, secs = run_part(
                f"echo on {version}", cmd, env, ROOT, os.path.join(run_dir, f"{tag}-echo.md")
            )
            report += [text, ""]
            timing.append((f"echo, Python {version}", secs))
            sec["files"]["echo"] = latest(os.path.join(run_dir, f"echo-{tag}-*.json"))
        if minor in nets and "http" in parts:
            cmd = [python, "-m", "benchmark.httpbench", "--heading", "###", "--tag", tag]
            cmd += ["--out", run_dir]
            if a.quick:
                cmd += ["--rounds", "1", "--warmup", "0", "--duration", "1"]
            text, secs = run_part(
                f"http on {version}", cmd, env, SCRIPTS, os.path.join(run_dir, f"{tag}-http.md")
            )
            report += [text, ""]
            timing.append((f"HTTP, Python {version}", secs))
            sec["files"]["http"] = latest(os.path.join(run_dir, f"http-{tag}-*.json"))
        if minor in nets and "files" in parts:
            cmd = [python, "-m", "benchmark.filebench", "--heading", "###", "--tag", tag]
            cmd += ["--out", run_dir] + (["--quick"] if a.quick else [])
            text, secs = run_part(
                f"files on {version}",
                cmd,
                env,
                SCRIPTS,
                os.path.join(run_dir, f"{tag}-filerows.md"),
            )
            report += [text, ""]
            timing.append((f"files, Python {version}", secs))
            sec["files"]["filebench"] = latest(os.path.join(run_dir, f"files-{tag}-*.json"))
        sec["chart"] = None
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
        sec_path = os.path.join(run_dir, f"{tag}-files.json")
        with open(sec_path, "w") as f:
            json.dump(sec, f, indent=1)

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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
