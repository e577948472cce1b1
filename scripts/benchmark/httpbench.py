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
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from . import httpapp, tables
from . import samples as runner

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ROOT = os.path.dirname(SCRIPTS)
LOOPS = ("asyncio", "uvloop", "zloopgo", "zloop", "rloop")
PATHS = {"plaintext": "/plaintext", "json": "/json"}
log = runner.log


def uvicorn_loop(name):
    """uvicorn's --loop value: its own names for asyncio and uvloop, else a
    zero-argument factory (uvicorn >= 0.36 takes module:function)."""
    return name if name in ("asyncio", "uvloop") else f"{name}:new_event_loop"


def cpu_ticks(pid):
    """utime + stime of a process, every thread, in seconds (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fetch(port, path, timeout=2.0):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, r.read()


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
    port = runner.free_port()
    res = {"server": server_name, "loop": loop, "kind": kind, "duration": duration}
    cmd, cwd = server_command(server_name, loop, port)
    out_path = os.path.join(tmpdir, f"{server_name}-{loop}-{kind}.out")
    with runner.Server([*opts.pin_server, *cmd], out_path, cwd=cwd or tmpdir) as server:
        if not server.wait_ready(lambda: fetch(port, "/ready", 0.5)[0] == 200, 15):
            res["status"], res["detail"] = server.not_ready("answered")
            return res
        path = PATHS[kind]
        status, body = fetch(port, path)
        want = httpapp.PLAINTEXT if kind == "plaintext" else httpapp.JSON_BODY
        if status != 200 or body != want:
            res["status"] = "mismatch"
            res["detail"] = f"GET {path}: status {status}, {len(body)} B, not the expected body"
            return res
        cpu0 = cpu_ticks(server.proc.pid)
        wcmd = [*opts.pin_client, opts.wrk, "-t1", f"-c{opts.conns}", f"-d{duration}s"]
        wcmd += ["--latency", f"http://127.0.0.1:{port}{path}"]
        wout, rc = runner.run_client(wcmd, duration + 30)
        if wout is None:
            res["status"], res["detail"] = "timeout", "wrk did not finish"
            return res
        cpu1 = cpu_ticks(server.proc.pid)
        got = parse_wrk(wout)
        res.update(got, server_cpu_s=cpu1 - cpu0)
        if rc != 0 or "requests" not in got or "rate" not in got:
            res["status"] = "error"
            res["detail"] = f"wrk rc {rc}: {wout.strip()[-200:]}"
            return res
        if not server.finish(res, 5):
            return res
    counts = server.stats("HTTP-STATS ")
    if counts is None:
        res["status"] = "error"
        res["detail"] = (
            f"no HTTP-STATS line (rc {server.proc.returncode}): {server.text.strip()[-200:]}"
        )
        return res
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


def report(opts, samples, absent, elapsed):
    h = opts.heading
    lines = []
    add = lines.append
    names = opts.contenders
    peers = tables.peers_of(names)
    measured = [s for s in samples if s["round"] != "warm-up"]

    def cell(loop, row):
        return [s for s in measured if s["loop"] == loop and (s["server"], s["kind"]) == row]

    def accepted(loop, row, key):
        return [s[key] for s in cell(loop, row) if s["status"] == "ok"]

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
    for key, title, better, fmt in (
        ("rate", "Requests/s (median)", "more", "{:,.0f}".format),
        ("p99_us", "p99 latency, µs (median of the samples' p99)", "less", "{:,.0f}".format),
        ("server_cpu_us", "Server CPU per request, µs (median)", "less", "{:.1f}".format),
    ):
        add(f"{title}:")
        add("")
        head = ["server", "response", *names] + [f"zloopgo vs {p}" for p in peers]
        rows = []
        for kind in opts.rows:
            med = {}
            row = list(kind)
            for c in names:
                st = tables.summarize(accepted(c, kind, key))
                med[c] = st["median"] if st else None
                figure = "—" if not st else fmt(st["median"])
                row.append(figure + tables.failed_note(cell(c, kind)))
            row += [
                tables.fmt_ratio(tables.versus(med["zloopgo"], med[p], better == "more"))
                for p in peers
            ]
            rows.append(row)
        lines.extend(tables.table(head, rows, labels=2))
    add("Every cell (requests/s): median, min, max, CoV:")
    add("")
    every = [
        ((kind[0], kind[1], c), cell(c, kind), accepted(c, kind, "rate"))
        for kind in opts.rows
        for c in names
    ]
    lines.extend(tables.every_cell(["server", "response", "loop"], every, lambda _, v: f"{v:,.0f}"))
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
    opts.versions = runner.versions(("uvicorn", "httptools", "aiohttp"))
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
    opts.pin_server, opts.pin_client = runner.cpu_pair()
    opts.contenders, absent = runner.available(sys.executable, opts.contenders)
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
            for label, k in runner.rounds(opts.warmup, opts.rounds):
                order = runner.rotate(opts.contenders, k)
                duration = 1 if label == "warm-up" else opts.duration
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
    base = runner.write_report(
        opts.out, "http", opts.tag, text, {"options": vars(opts), "samples": samples}
    )
    log(f"# wrote {base}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
