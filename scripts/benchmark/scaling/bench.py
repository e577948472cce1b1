"""The scaling part's runner: for each row (echo, HTTP keep-alive), each
arrangement (a loop in interpreters, a loop in processes) and each count
of servers (1, 2), a fresh server program (server.py) on a free port,
driven by a Go load generator; rounds rotate the arrangements.

    python -m benchmark.scaling [--rounds 3] [--duration 1.5] [--contenders ...]

(run from scripts/, as scripts/bench does). Cores: with 1 server it runs
on the second CPU and the generator on the first; with 2 servers neither
is pinned (the 2 servers and the generator share both CPUs). A sample
counts only if the generator checked every answer (loadgen: each echo
equals what was sent; appload: status 200 and the JSON body) and the
servers' own counts agree with it. Figures: requests/s, server CPU time
per request (every server process, every thread, from /proc), the
generator's CPU per request (getrusage of children), peak RSS of the
whole server (VmHWM of every server process, summed). It knows how to
run and check a sample; report.py makes the report.
"""

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from .. import samples as runner
from ..apps.bench import build_appload
from ..httpbench import cpu_ticks
from . import report

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(os.path.dirname(HERE))
ROOT = os.path.dirname(SCRIPTS)
# (arrangement, loop): loops in interpreters, then every loop in processes
INTERP_LOOPS = ("asyncio", "zloopgo")
PROC_LOOPS = ("asyncio", "uvloop", "zloopgo", "zloop", "rloop", "rsloop", "zuvloop")
ROWS = ("echo", "http")
COUNTS = (1, 2)
ECHO_SIZE = 1024
log = runner.log


def arrangement_label(arrangement, loop):
    return f"{loop} in {'interpreters' if arrangement == 'interp' else 'processes'}"


def server_commands(arrangement, loop, app, port, servers):
    """The commands that make the server: one program with `servers`
    interpreters, or `servers` programs of one loop each."""
    base = [sys.executable, "-m", "benchmark.scaling.server", "--loop", loop, "--app", app]
    base += ["--port", str(port)]
    if arrangement == "interp":
        return [[*base, "--arrangement", "interp", "--servers", str(servers)]]
    return [
        [*base, "--arrangement", "thread", "--servers", "1", "--first-index", str(i)]
        for i in range(servers)
    ]


def peak_rss_kib(pid):
    """VmHWM (peak resident set) of a live process, KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def marked(text, marker):
    """The rest of every output line that starts with marker."""
    return [line[len(marker) :] for line in text.splitlines() if line.startswith(marker)]


def failure_of(text):
    """(status, detail) of a server program that printed SCALING-FAILED:
    "refused" when a module would not load in a subinterpreter."""
    found = marked(text, "SCALING-FAILED ")
    if not found:
        return None
    detail = found[0].split(" ", 1)[1] if " " in found[0] else found[0]
    refused = detail.startswith("ImportError") and "subinterpreter" in detail
    return ("refused" if refused else "error"), detail


def client_command(opts, app, port):
    if app == "echo":
        cmd = [opts.loadgen, "-addr", f"127.0.0.1:{port}", "-conns", str(opts.conns)]
        return cmd + ["-msize", str(ECHO_SIZE), "-duration", f"{opts.duration}s"]
    cmd = [opts.appload, "-url", f"http://127.0.0.1:{port}/json", "-check", "json"]
    cmd += ["-conns", str(opts.conns), "-duration", f"{opts.duration}s"]
    return cmd + ["-warmup", f"{opts.warmup}s"]


def parse_client(app, out):
    """The generator's JSON result line, or None."""
    found = marked(out or "", "LOADGEN " if app == "echo" else "APPLOAD ")
    return json.loads(found[-1]) if found else None


def check_counts(app, client, stats, servers):
    """What is wrong with a sample whose generator succeeded: the servers'
    own counts against the generator's (a list of sentences)."""
    problems = []
    if len(stats) != servers:
        return [f"{len(stats)} of {servers} servers printed their counts"]
    if app == "echo":
        want = client["requests"] * ECHO_SIZE
        got_in = sum(s["bytes_in"] for s in stats)
        got_out = sum(s["bytes_out"] for s in stats)
        if got_in != want or got_out != want:
            problems.append(f"servers echoed {got_in}/{got_out} B, the generator {want} B")
    else:
        served = sum(s["requests"] for s in stats)
        # appload's count leaves out its warm-up and the answers in flight
        if served < client["requests"]:
            problems.append(f"servers answered {served}, the generator counted more")
    return problems


def outputs(procs):
    text = ""
    for srv in procs:
        srv.out.flush()
        with open(srv.out_path, errors="replace") as f:
            text += f.read()
    return text


def wait_ready(procs, servers, timeout):
    """None once every server listens, else (status, detail): a server
    program that failed (refused, error) or did not listen in time."""
    deadline = time.monotonic() + timeout
    while True:
        text = outputs(procs)
        if len(marked(text, "SCALING-READY ")) == servers:
            return None
        exited = [srv for srv in procs if srv.proc.poll() is not None]
        if exited or time.monotonic() > deadline:
            time.sleep(0.1)  # the others' failure lines too
            why = failure_of(outputs(procs))
            if why:
                return why
            crashed = [srv.proc.returncode for srv in exited if srv.proc.returncode < 0]
            if crashed:
                tail = runner.last_line(outputs(procs), 200)
                return "crash", f"a server died of signal {-crashed[0]} before listening: {tail}"
            return (exited or procs)[0].not_ready("listened")
        time.sleep(0.02)


def run_sample(opts, row, arrangement, loop, servers, tmpdir):
    res = {"row": row, "arrangement": arrangement, "loop": loop, "servers": servers}
    port = runner.free_port()
    pin_server, pin_client = (opts.pin_server, opts.pin_client) if servers == 1 else ([], [])
    cmds = server_commands(arrangement, loop, row, port, servers)
    with contextlib.ExitStack() as stack:
        procs = [
            stack.enter_context(
                runner.Server(
                    [*pin_server, *cmd], os.path.join(tmpdir, f"server-{i}.out"), cwd=SCRIPTS
                )
            )
            for i, cmd in enumerate(cmds)
        ]

        why = wait_ready(procs, servers, 20)
        if why:
            res["status"], res["detail"] = why
            return res
        pids = [srv.proc.pid for srv in procs]
        cpu0, kids0 = sum(map(cpu_ticks, pids)), children_cpu()
        out, rc = runner.run_client([*pin_client, *client_command(opts, row, port)], 60)
        cpu1, kids1 = sum(map(cpu_ticks, pids)), children_cpu()
        res["peak_rss_mib"] = sum(map(peak_rss_kib, pids)) / 1024
        if out is None:
            res["status"], res["detail"] = "timeout", "the load generator did not finish"
            return res
        client = parse_client(row, out)
        if rc != 0 or client is None:
            res["status"] = "mismatch" if "ERROR" in out or "differs" in out else "error"
            res["detail"] = f"generator rc {rc}: {runner.last_line(out)}"
            return res
        res["client"] = client
        for srv in procs:
            if not srv.finish(res, 10):
                return res
    stats = [json.loads(x) for srv in procs for x in marked(srv.text, "SCALING-STATS ")]
    res["per_server"] = [s.get("requests") or s["bytes_in"] // ECHO_SIZE for s in stats]
    res["connections"] = [s["connections"] for s in stats]
    problems = check_counts(row, client, stats, servers)
    if problems:
        res["status"], res["detail"] = "mismatch", "; ".join(problems)
        return res
    served = sum(res["per_server"])
    res["rate"] = client["rate"]
    res["server_cpu_us"] = (cpu1 - cpu0) / max(served, 1) * 1e6
    res["client_cpu_us"] = (kids1 - kids0) / max(served, 1) * 1e6
    res["status"] = "ok"
    return res


def build(tmpdir):
    """The two Go generators, built into tmpdir: (loadgen, appload)."""
    loadgen = os.path.join(tmpdir, "loadgen")
    subprocess.run(["go", "build", "-o", loadgen, "./bench_uvloop/loadgen"], cwd=ROOT, check=True)
    return loadgen, build_appload(tmpdir)


def interpreters_available():
    try:
        from concurrent import interpreters  # noqa: F401
    except ImportError as exc:
        return f"no concurrent.interpreters on Python {sys.version.split()[0]} ({exc})"
    return None


def plan(opts):
    """The cells' (arrangement, loop) in base order, and {label: why} of
    those not measured."""
    cells, absent = [], {}
    no_interp = interpreters_available()
    for loop in opts.interp_loops:
        if no_interp:
            absent[arrangement_label("interp", loop)] = no_interp
        else:
            cells.append(("interp", loop))  # a refusal is measured: it is the result
    ok, why = runner.available(sys.executable, list(opts.proc_loops))
    cells += [("proc", loop) for loop in ok]
    absent.update({arrangement_label("proc", k): v for k, v in why.items()})
    return cells, absent


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=2.0, help="seconds per sample (2)")
    p.add_argument("--warmup", type=float, default=0.2, help="appload's unmeasured start (0.2)")
    p.add_argument("--conns", type=int, default=32, help="connections per sample (32)")
    p.add_argument("--rows", default=",".join(ROWS))
    p.add_argument("--interp-loops", default=",".join(INTERP_LOOPS))
    p.add_argument("--proc-loops", default=",".join(PROC_LOOPS))
    p.add_argument("--heading", default="##")
    p.add_argument("--tag", default="")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    opts = p.parse_args(argv)
    opts.rows = [r for r in opts.rows.split(",") if r in ROWS]
    opts.interp_loops = [x for x in opts.interp_loops.split(",") if x]
    opts.proc_loops = [x for x in opts.proc_loops.split(",") if x]
    opts.pin_server, opts.pin_client = runner.cpu_pair()
    opts.pin_server, opts.pin_client = opts.pin_client, opts.pin_server  # server on CPU 1
    cells, absent = plan(opts)
    opts.versions = runner.versions(("h11", *(x for x in PROC_LOOPS if x != "asyncio")))
    samples = []
    opts.load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zl-scaling-") as tmpdir:
        opts.loadgen, opts.appload = build(tmpdir)
        for label, k in runner.rounds(0, opts.rounds):
            for row in opts.rows:
                for servers in COUNTS:
                    for arrangement, loop in runner.rotate(cells, k):
                        res = run_sample(opts, row, arrangement, loop, servers, tmpdir)
                        res["round"] = label
                        samples.append(res)
                        shown = f"{res['rate']:,.0f} req/s" if res["status"] == "ok" else ""
                        log(
                            f"scaling round {label}: {row} x{servers} "
                            f"{arrangement_label(arrangement, loop)} {res['status']} {shown}"
                        )
                        if res["status"] != "ok":
                            log(f"  {res.get('detail', '')}")
    opts.elapsed = time.monotonic() - t0
    text = report.render(opts, cells, samples, absent)
    print(text)
    doc = {"options": vars(opts), "samples": samples}
    base = runner.write_report(opts.out, "scaling", opts.tag, text, doc)
    log(f"# wrote {base}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
