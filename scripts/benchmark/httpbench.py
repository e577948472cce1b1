"""The HTTP rows: uvicorn (httptools, one worker) serving benchmark.httpapp,
and aiohttp's web server with the same responses (benchmark.aiohttpapp), on
each loop, driven by wrk from a separate process pinned to another CPU.

    python -m benchmark.httpbench [--rounds 3] [--duration 2] [--contenders ...]

(run from scripts/, as scripts/bench does). Every sample is a fresh server;
contenders rotate from round to round; a sample counts only if wrk saw no
socket error and no non-2xx answer, the app answered between wrk's count and
wrk's count + connections requests on that path (wrk stops with requests in
flight), and the body checked once before wrk is the expected one. Reports
requests/s, p99 latency and server CPU per request (utime + stime of the
server process, every thread, from /proc over wrk's run). Prints Markdown
and writes it with the raw samples to bench-results/.
"""

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from . import httpapp

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ROOT = os.path.dirname(SCRIPTS)
LOOPS = ("asyncio", "uvloop", "zloopgo", "zloop", "rloop")
PATHS = {"plaintext": "/plaintext", "json": "/json"}
TARGET = 1.15  # not an issue target for HTTP; the echo target, shown for reference
T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.0f} s] {msg}", file=sys.stderr, flush=True)


def uvicorn_loop(name):
    """uvicorn's --loop value: its own names for asyncio and uvloop, else a
    zero-argument factory (uvicorn >= 0.36 takes module:function)."""
    return name if name in ("asyncio", "uvloop") else f"{name}:new_event_loop"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pid):
    """utime + stime of a process, every thread, in seconds (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fetch(port, path, timeout=2.0):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, r.read()


def wait_ready(port, proc, deadline):
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if fetch(port, "/ready", 0.5)[0] == 200:
                return True
        except OSError:
            time.sleep(0.05)
    return False


_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}


def _us(text):
    m = re.match(r"([0-9.]+)(us|ms|s)$", text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else None


def parse_wrk(out):
    got = {}
    m = re.search(r"^\s*(\d+) requests in ([0-9.]+)(m?s)", out, re.MULTILINE)
    if m:
        got["requests"] = int(m.group(1))
        got["seconds"] = float(m.group(2)) / (1000 if m.group(3) == "ms" else 1)
    m = re.search(r"^Requests/sec:\s+([0-9.]+)", out, re.MULTILINE)
    if m:
        got["rate"] = float(m.group(1))
    m = re.search(r"^\s*99%\s+(\S+)", out, re.MULTILINE)
    if m:
        got["p99_us"] = _us(m.group(1))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    got["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    got["socket_errors"] = sum(map(int, m.groups())) if m else 0
    return got


def server_command(server, loop, port):
    if server == "aiohttp":
        cmd = [sys.executable, "-m", "benchmark.aiohttpapp", "--port", str(port), "--loop", loop]
        return cmd, SCRIPTS
    cmd = [sys.executable, "-m", "uvicorn", "benchmark.httpapp:app"]
    cmd += ["--app-dir", SCRIPTS, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--http", "httptools", "--loop", uvicorn_loop(loop), "--no-access-log"]
    cmd += ["--log-level", "warning", "--lifespan", "on"]
    return cmd, None


def run_sample(opts, server_name, loop, kind, duration, tmpdir):
    port = free_port()
    res = {"server": server_name, "loop": loop, "kind": kind, "duration": duration}
    cmd, cwd = server_command(server_name, loop, port)
    out_path = os.path.join(tmpdir, f"{server_name}-{loop}-{kind}.out")
    with open(out_path, "w+") as out:
        server = subprocess.Popen(
            [*opts.pin_server, *cmd],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd or tmpdir,
            start_new_session=True,
        )
        try:
            if not wait_ready(port, server, time.monotonic() + 15):
                out.seek(0)
                tail = out.read().strip().splitlines()[-1:] or [""]
                res["status"] = "error" if server.poll() is not None else "timeout"
                res["detail"] = f"server did not answer (rc {server.poll()}): {tail[0][:200]}"
                return res
            path = PATHS[kind]
            status, body = fetch(port, path)
            want = httpapp.PLAINTEXT if kind == "plaintext" else httpapp.JSON_BODY
            if status != 200 or body != want:
                res["status"] = "mismatch"
                res["detail"] = f"GET {path}: status {status}, {len(body)} B, not the expected body"
                return res
            cpu0 = cpu_ticks(server.pid)
            wcmd = [*opts.pin_client, opts.wrk, "-t1", f"-c{opts.conns}", f"-d{duration}s"]
            wcmd += ["--latency", f"http://127.0.0.1:{port}{path}"]
            try:
                w = subprocess.run(
                    wcmd, capture_output=True, text=True, timeout=duration + 30, check=False
                )
            except subprocess.TimeoutExpired:
                res["status"] = "timeout"
                res["detail"] = "wrk did not finish"
                return res
            cpu1 = cpu_ticks(server.pid)
            got = parse_wrk(w.stdout)
            res.update(got, server_cpu_s=cpu1 - cpu0)
            if w.returncode != 0 or "requests" not in got or "rate" not in got:
                res["status"] = "error"
                res["detail"] = f"wrk rc {w.returncode}: {(w.stdout + w.stderr).strip()[-200:]}"
                return res
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                res["status"] = "timeout"
                res["detail"] = f"{server_name} did not stop within 5 s of SIGTERM"
                return res
        finally:
            if server.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        out.seek(0)
        text = out.read()
    stats = [line for line in text.splitlines() if line.startswith("HTTP-STATS ")]
    if not stats:
        res["status"] = "error"
        res["detail"] = f"no HTTP-STATS line (rc {server.returncode}): {text.strip()[-200:]}"
        return res
    counts = json.loads(stats[-1][len("HTTP-STATS ") :])
    served = counts[PATHS[kind]] - 1  # minus the body check
    res["served"] = served
    problems = []
    if got["non2xx"]:
        problems.append(f"{got['non2xx']} non-2xx answers")
    if got["socket_errors"]:
        problems.append(f"{got['socket_errors']} socket errors")
    if not got["requests"] <= served <= got["requests"] + opts.conns:
        problems.append(f"app answered {served}, wrk counted {got['requests']}")
    if problems:
        res["status"] = "mismatch"
        res["detail"] = "; ".join(problems)
        return res
    res["server_cpu_us"] = res["server_cpu_s"] / got["requests"] * 1e6
    res["status"] = "ok"
    return res


def summarize(values):
    if not values:
        return None
    mean = statistics.fmean(values)
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "cov": statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0,
    }


def report(opts, samples, absent, elapsed):
    h = opts.heading
    lines = []
    add = lines.append
    names = opts.contenders
    peers = [c for c in names if c != "zloopgo"] if "zloopgo" in names else []
    measured = [s for s in samples if s["round"] != "warm-up"]

    def st(loop, row, key):
        vals = [
            s[key]
            for s in measured
            if s["loop"] == loop and (s["server"], s["kind"]) == row and s["status"] == "ok"
        ]
        return summarize(vals)

    def fails(loop, row):
        got = [s for s in measured if s["loop"] == loop and (s["server"], s["kind"]) == row]
        bad = sum(1 for s in got if s["status"] != "ok")
        return f" ({bad}/{len(got)} failed)" if bad else ""

    add(f"{h} HTTP: uvicorn + httptools (one worker) and aiohttp, driven by wrk")
    add("")
    if opts.skipped:
        add(f"**Not run: {opts.skipped}.**")
        add("")
        return "\n".join(lines)
    add(
        f"`uvicorn benchmark.httpapp:app --http httptools --loop L` (zloopgo: "
        f"`--loop zloopgo:new_event_loop`), a raw ASGI app answering `GET /plaintext` "
        f"(13 B) and `GET /json` (10,240 B); the same responses from an aiohttp `web` "
        f"server (`benchmark/aiohttpapp.py`, `web.run_app(loop=...)`) when aiohttp is "
        f"installed; `wrk -t1 -c{opts.conns} -d{opts.duration}s "
        f"--latency`; "
        + (
            f"server pinned to CPU {opts.pin_server[-1]}, wrk to CPU {opts.pin_client[-1]}"
            if opts.pin_server
            else "not pinned"
        )
        + f". A fresh server per sample; {opts.rounds} rounds after {opts.warmup} warm-up "
        "round(s) of 1 s on each server's first row; contenders rotate. **zloopgo vs X > 1: "
        "zloopgo better.**"
    )
    if absent:
        add("")
        add("Not measured: " + "; ".join(f"**{k}**: {v}" for k, v in absent.items()) + ".")
    add("")
    for key, title, better in (
        ("rate", "Requests/s (median)", "more"),
        ("p99_us", "p99 latency, µs (median of the samples' p99)", "less"),
        ("server_cpu_us", "Server CPU per request, µs (median)", "less"),
    ):
        add(f"{title}:")
        add("")
        head = ["server", "response", *names] + [f"zloopgo vs {p}" for p in peers]
        add("| " + " | ".join(head) + " |")
        add("|" + "|".join([" --- "] * 2 + [" ---: "] * (len(head) - 2)) + "|")
        for kind in opts.rows:
            row = list(kind)
            med = {}
            for c in names:
                s = st(c, kind, key)
                med[c] = s["median"] if s else None
                cell = (
                    "—"
                    if not s
                    else (f"{s['median']:,.0f}" if key != "server_cpu_us" else f"{s['median']:.1f}")
                )
                row.append(cell + fails(c, kind))
            for p in peers:
                z, o = med.get("zloopgo"), med.get(p)
                r = None if not (z and o) else (z / o if better == "more" else o / z)
                row.append("—" if r is None else f"{r:.2f}x")
            add("| " + " | ".join(row) + " |")
        add("")
    add("Every cell (requests/s): median, min, max, CoV:")
    add("")
    add("| server | response | loop | ok | median | min | max | CoV |")
    add("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for kind in opts.rows:
        for c in names:
            s = st(c, kind, "rate")
            n = sum(1 for x in measured if x["loop"] == c and (x["server"], x["kind"]) == kind)
            if s:
                add(
                    f"| {kind[0]} | {kind[1]} | {c} | {s['n']}/{n} | {s['median']:,.0f} | "
                    f"{s['min']:,.0f} | {s['max']:,.0f} | {s['cov'] * 100:.1f}% |"
                )
            else:
                add(f"| {kind[0]} | {kind[1]} | {c} | 0/{n} | — | — | — | — |")
    add("")
    bad = [s for s in samples if s["status"] != "ok"]
    add("Failures: " + ("none." if not bad else ""))
    for s in bad:
        add(
            f"- {s['round']}: {s['server']} {s['kind']} on {s['loop']}: **{s['status']}**: "
            f"{s.get('detail', '')}"
        )
    add("")
    vers = opts.versions
    add(
        f"Provenance: uvicorn {vers.get('uvicorn')}, httptools {vers.get('httptools')}, "
        f"aiohttp {vers.get('aiohttp') or 'not installed'}, "
        f"{opts.wrk_version}; load average at the end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {elapsed:.0f} s."
    )
    add("")
    return "\n".join(lines)


def versions():
    from importlib import metadata

    out = {}
    for d in ("uvicorn", "httptools", "aiohttp"):
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = None
    return out


def probe(name):
    code = (
        "import asyncio\nasyncio.new_event_loop().close()"
        if name == "asyncio"
        else f"import {name}\n{name}.new_event_loop().close()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--duration", type=int, default=2, help="seconds of wrk per sample (2)")
    p.add_argument("--conns", type=int, default=32, help="wrk connections (32)")
    p.add_argument("--contenders", default="asyncio,uvloop,zloopgo,zloop")
    p.add_argument("--servers", default="uvicorn,aiohttp", help="of uvicorn,aiohttp")
    p.add_argument("--heading", default="##")
    p.add_argument("--tag", default="")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    opts = p.parse_args(argv)
    opts.contenders = [c for c in opts.contenders.split(",") if c in LOOPS]
    opts.versions = versions()
    opts.wrk = shutil.which("wrk")
    opts.skipped = ""
    if opts.wrk is None:
        opts.skipped = "wrk is not installed (Debian package `wrk`)"
    elif not (opts.versions["uvicorn"] and opts.versions["httptools"]):
        opts.skipped = "uvicorn or httptools is not installed in this venv"
    servers = [x for x in opts.servers.split(",") if x]
    if "aiohttp" in servers and not opts.versions["aiohttp"]:
        servers.remove("aiohttp")
    # aiohttp: the plaintext row only (the JSON body tells nothing more about
    # the loop than uvicorn's does), to keep the default run's time.
    opts.rows = [
        (srv, kind) for srv in servers for kind in PATHS if srv == "uvicorn" or kind == "plaintext"
    ]
    cpus = sorted(os.sched_getaffinity(0))
    pin = len(cpus) > 1 and shutil.which("taskset")
    opts.pin_server = ["taskset", "-c", str(cpus[0])] if pin else []
    opts.pin_client = ["taskset", "-c", str(cpus[1])] if pin else []
    absent = {}
    installs = {}
    if os.path.exists(os.environ.get("ZL_BENCH_INSTALLS", "")):
        with open(os.environ["ZL_BENCH_INSTALLS"]) as f:
            installs = json.load(f)  # scripts/bench's wheel-only installs
    for c in list(opts.contenders):
        why = probe(c)
        if why and installs.get(c, "ok") != "ok":
            why = f"not installed ({installs[c]})"
        if why:
            absent[c] = why
            opts.contenders.remove(c)
    samples = []
    t0 = time.monotonic()
    if not opts.skipped:
        opts.wrk_version = (
            subprocess.run([opts.wrk, "-v"], capture_output=True, text=True, check=False)
            .stdout.strip()
            .splitlines()
            or ["wrk"]
        )[0]
        with tempfile.TemporaryDirectory(prefix="zl-http-") as tmpdir:
            plan = [("warm-up", w, 1) for w in range(opts.warmup)]
            plan += [(str(r + 1), r + opts.warmup, opts.duration) for r in range(opts.rounds)]
            for label, k, duration in plan:
                order = opts.contenders[k % len(opts.contenders) :]
                order += opts.contenders[: k % len(opts.contenders)]
                for srv, kind in opts.rows:
                    if label == "warm-up" and (srv, kind) != next(
                        r for r in opts.rows if r[0] == srv
                    ):
                        continue  # one warm-up row per server: it loads the code and caches
                    for loop in order:
                        res = run_sample(opts, srv, loop, kind, duration, tmpdir)
                        res["round"] = label
                        samples.append(res)
                        shown = f"{res['rate']:,.0f} req/s" if res["status"] == "ok" else ""
                        log(f"http round {label}: {srv} {kind} {loop} {res['status']} {shown}")
                        if res["status"] != "ok":
                            log(f"  {res.get('detail', '')}")
    else:
        log(f"http: skipped: {opts.skipped}")
    text = report(opts, samples, absent, time.monotonic() - t0)
    print(text)
    os.makedirs(opts.out, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = os.path.join(opts.out, f"http-{opts.tag + '-' if opts.tag else ''}{stamp}")
    with open(base + ".md", "w") as f:
        f.write(text + "\n")
    with open(base + ".json", "w") as f:
        json.dump({"options": dict(vars(opts)), "samples": samples}, f)
    log(f"# wrote {base}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
