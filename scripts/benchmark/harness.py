"""Runs the samples: tables of workloads (seed 000's table pinned to one
core and to two, GC off as the seed runs it, then with the GC on, the span), each as warm-up rounds
then measured rounds in which every workload runs once on every contender,
each sample in a fresh interpreter, the contenders' order rotated from
round to round. Failures of every kind are kept as results. On a
free-threaded build (--free-threaded) the seed tables run as seed 000's
free-threaded table, each contender with its PYTHON_GIL (FT_GIL)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from . import workloads
from .samples import loadavg, rotate
from .tables import ZL, summarize
from .worker import FACTORIES, MARK

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)

REQUIRED = ["asyncio", "uvloop", "zloopgo"]
OPTIONAL = [n for n in FACTORIES if n not in REQUIRED]  # zloop, rloop, rsloop, zuvloop, blazio
FLOOR_LOOP = "python"
STRACE_SIZE = 2_000  # at most, round trips in the strace'd sample (minus one of 0)

# The free-threaded table (a Py_GIL_DISABLED build, --free-threaded): the
# PYTHON_GIL each contender's samples run with. Seed 000 runs every loop
# with PYTHON_GIL=0, and so do the rivals here ("0", the default), but
# zloopgo refuses PYTHON_GIL=0 at import (its adapter needs the GIL): it
# runs as a user gets it, the variable unset (None), and its engine turns
# the GIL on when the first loop loads it. asyncio-gil is asyncio again with
# PYTHON_GIL=1, so that zloopgo's ratio can also be read against asyncio
# with the GIL on, and asyncio's two rows show what the GIL costs. Each
# sample records whether the GIL was on at its end; one that ran otherwise
# than its row says is an error.
FT_GIL = {"asyncio-gil": "1", ZL: None}
FT_ONLY = ["asyncio-gil"]  # contenders of the free-threaded table alone


def gil_env(loop, free_threaded):
    """The environment a contender's worker gets on the free-threaded table
    (None: the variable removed), else nothing."""
    return {"PYTHON_GIL": FT_GIL.get(loop, "0")} if free_threaded else {}


def gil_expected(loop):
    """Whether the GIL is on in the free-threaded table's samples of loop."""
    return FT_GIL.get(loop, "0") != "0"


def run_worker(args, timeout, env_extra=None, prefix=()):
    """Runs the worker in a fresh interpreter. Returns (payload or None,
    status, detail): status is ok, timeout, crash or error."""
    env = dict(os.environ)
    env.update(env_extra or {})
    env = {k: v for k, v in env.items() if v is not None}  # None: removed
    cmd = [*prefix, sys.executable, "-m", "benchmark.worker", *args]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=SCRIPTS, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        return None, "timeout", {"wall": time.perf_counter() - t0, "stderr": _tail(err)}
    wall = time.perf_counter() - t0
    payload = None
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            payload = json.loads(line[len(MARK) :])
    detail = {"wall": wall, "returncode": proc.returncode, "stderr": _tail(proc.stderr)}
    if proc.returncode < 0:
        return payload, "crash", detail
    if proc.returncode != 0 or payload is None:
        return payload, "error", detail
    return payload, "ok", detail


def _tail(text, n=600):
    text = (text or "").strip()
    return text[-n:]


def pin_prefix(cpus):
    return ["taskset", "-c", cpus] if cpus else []


def sample(loop, wl, size, timeout, gc_off, pin=None, free_threaded=False):
    """One measured (or warm-up) sample: a dict that says what happened."""
    env = {"ZL_BENCH_GC": "off" if gc_off else "on", **gil_env(loop, free_threaded)}
    payload, status, detail = run_worker(
        [loop, wl.name, str(size)], timeout, env, prefix=pin_prefix(pin)
    )
    rec = {"loop": loop, "workload": wl.name, "size": size, "status": status, **detail}
    if payload is not None:
        rec.update(
            seconds=payload["seconds"],
            counter=payload["counter"],
            checks=payload["checks"],
            extra=payload["extra"],
            gc=payload["gc"],
            peak_rss_mib=payload.get("peak_rss_mib"),
            meter=payload.get("meter") or {},
            gil=payload.get("gil"),
        )
    if status == "ok":
        expected = wl.expected(size)
        rec["expected"] = expected
        failed = [k for k, v in payload["checks"].items() if not v]
        if payload["counter"] != expected:
            rec["status"] = "mismatch"
            rec["why"] = f"counter {payload['counter']} != expected {expected}"
        elif failed:
            rec["status"] = "mismatch"
            rec["why"] = "failed checks: " + ", ".join(failed)
        elif payload["gc"] == gc_off:
            rec["status"] = "error"
            rec["why"] = "GC setting not as requested"
        elif free_threaded and payload.get("gil") != gil_expected(loop):
            rec["status"] = "error"
            rec["why"] = f"the GIL was {'on' if payload.get('gil') else 'off'}, not as its row says"
    if rec["status"] == "ok":
        secs = payload["seconds"]
        if wl.metric == "rss":
            rec["value"] = payload["extra"]["rss_delta_mib"]
        elif wl.metric == "mibs":
            rec["value"] = size / secs if secs > 0 else float("inf")
        elif wl.metric == "ms":
            rec["value"] = secs * 1e3
        else:  # ns per operation; a run of none has no such figure
            rec["value"] = secs / size * 1e9 if size else None
        m = rec["meter"]
        if m and size:
            rec["csw_per_op"] = (m["nvcsw"] + m["nivcsw"]) / size
            rec["cpu_us_per_op"] = m["cpu_seconds"] / size * 1e6
    elif rec.get("stderr") and not rec.get("why"):
        rec["why"] = last_error(rec["stderr"])
    return rec


_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)')


def last_error(stderr):
    """The last line of a traceback, with the function that raised it."""
    lines = stderr.strip().splitlines()
    if not lines:
        return ""
    where = ""
    for line in reversed(lines):
        m = _FRAME.match(line)
        if m:
            where = f" (in {os.path.basename(m.group(1))}: {m.group(2)})"
            break
    return (lines[-1] + where)[:300]


_STRACE_TOTAL = re.compile(r"^\s*100\.00\s+\S+\s+\S+\s+(\d+)\s+(?:\d+\s+)?total\s*$", re.MULTILINE)


def strace_available():
    """(True, how) if `strace -c -f` works here, else (False, why)."""
    if shutil.which("strace") is None:
        return False, "strace is not installed"
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        try:
            proc = subprocess.run(
                ["strace", "-f", "-c", "-o", out.name, "true"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"strace failed: {exc}"
        if proc.returncode != 0 or not _STRACE_TOTAL.search(out.read()):
            return False, "strace does not work here: " + _tail(proc.stderr, 200)
    return True, "strace -c -f"


def strace_calls(loop, wl, size, timeout, pin, free_threaded=False):
    """System calls (every thread) of one untimed sample, or None and why."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        prefix = [*pin_prefix(pin), "strace", "-f", "-c", "-o", out.name]
        payload, status, detail = run_worker(
            [loop, wl.name, str(size)], timeout, gil_env(loop, free_threaded), prefix=prefix
        )
        if status != "ok" or payload is None or payload["counter"] != wl.expected(size):
            return None, f"{status}: {_tail(detail.get('stderr'), 200)}"
        m = _STRACE_TOTAL.search(out.read())
        return (int(m.group(1)), "") if m else (None, "no total line in strace's summary")


def probe(loop, timeout=60, free_threaded=False):
    """Whether the loop can be made here: run_worker's (payload, status, detail)."""
    return run_worker(["--probe", loop], timeout, gil_env(loop, free_threaded))


def _load1():
    load = loadavg()
    return load[0] if load else None


def cpu_sets():
    """(one core, two cores) as taskset lists, from the CPUs this process
    may use: the second CPU alone (the seed pins to CPU 1 when it can), the
    first two together. None where the machine has too few."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cpus = list(range(os.cpu_count() or 1))
    if shutil.which("taskset") is None:
        return None, None
    one = str(cpus[1] if len(cpus) > 1 else cpus[0])
    two = f"{cpus[0]},{cpus[1]}" if len(cpus) > 1 else None
    return one, two


def run(config, log=print):
    """Runs every table of the benchmark; returns the results document."""
    t_start = time.time()

    def say(msg):
        log(f"[{time.time() - t_start:6.0f} s] {msg}")

    ft = bool(config.get("free_threaded"))
    required = REQUIRED + (FT_ONLY if ft else [])
    names = REQUIRED[:1] + (FT_ONLY if ft else []) + REQUIRED[1:] + OPTIONAL
    contenders = []
    probes = {}
    for loop in names:
        payload, status, detail = probe(loop, free_threaded=ft)
        probes[loop] = {"status": status, "payload": payload, **detail}
        if status == "ok" or loop in required:
            contenders.append(loop)
        if status != "ok":
            why = (detail.get("stderr") or "").strip().splitlines()[-1:] or [status]
            say(f"contender {loop}: not available ({why[0][:120]})")
    if config.get("contenders"):
        contenders = [c for c in contenders if c in config["contenders"]]
    say("contenders: " + ", ".join(contenders))

    scale = config["scale"]
    sizes = {}
    for name, wl in workloads.WORKLOADS.items():
        sizes[name] = max(1, int(wl.size * scale))
    sizes.update(config.get("size", {}))  # as given on the command line
    sizes[workloads.FLOOR.name] = max(1, int(workloads.FLOOR.size * scale))
    timeout = config["timeout"]

    tables = []
    for spec in config["tables"]:
        wls = [workloads.WORKLOADS[n] for n in spec["workloads"]]
        if not wls:
            continue
        rounds = {wl.name: spec["rounds"] or config.get("rounds") or wl.rounds for wl in wls}
        table = dict(spec, rounds=rounds, samples=[], warmup_samples=[], round_load1=[])
        tables.append(table)
        n_rounds = max(rounds.values())
        for w in range(spec["warmup"]):
            order = rotate(contenders, w)
            for wl in wls:
                size = max(1, int(sizes[wl.name] * spec.get("warmup_scale", 1)))
                for loop in order:
                    rec = sample(loop, wl, size, timeout, spec["gc_off"], spec["pin"], ft)
                    rec["warmup"] = w
                    table["warmup_samples"].append(rec)
                    say(f"{spec['id']} warm-up {w + 1}: {wl.name} {loop} {rec['status']}")
        for r in range(n_rounds):
            table["round_load1"].append(_load1())
            order = rotate(contenders, r + spec["warmup"])
            for wl in wls:
                if r >= rounds[wl.name]:
                    continue
                for loop in order:
                    rec = sample(loop, wl, sizes[wl.name], timeout, spec["gc_off"], spec["pin"], ft)
                    rec["round"] = r
                    table["samples"].append(rec)
                    shown = _shown(wl, rec)
                    say(
                        f"{spec['id']} round {r + 1}/{rounds[wl.name]}: {wl.name} {loop} "
                        f"{rec['status']} {shown}"
                    )
            if spec.get("floor"):
                rec = sample(FLOOR_LOOP, workloads.FLOOR, sizes["floor"], timeout, spec["gc_off"])
                rec["round"] = r
                table["samples"].append(rec)
                say(f"{spec['id']} round {r + 1}: floor {rec['status']} {_shown(None, rec)}")
        table["round_load1"].append(_load1())
        if spec.get("strace"):
            ok, how = strace_available()
            size = max(1, min(STRACE_SIZE, sizes[spec["strace"][0]] // 10))
            table["strace"] = {"how": how, "size": size}
            for name in spec["strace"] if ok else []:
                wl = workloads.WORKLOADS[name]
                n = table["strace"]["size"]
                for loop in contenders:
                    wait = max(timeout, 120)
                    full, why_full = strace_calls(loop, wl, n, wait, spec["pin"], ft)
                    empty, why_empty = strace_calls(loop, wl, 0, wait, spec["pin"], ft)
                    got = {"calls": full, "calls_0": empty}
                    if full is not None and empty is not None:
                        got["per_op"] = (full - empty) / n
                    else:
                        got["why"] = why_full or why_empty
                    table["strace"][f"{name}/{loop}"] = got
                    say(f"{spec['id']} strace: {name} {loop} {got.get('per_op', got.get('why'))}")
    return {
        "config": dict(config, sizes=sizes),
        "contenders": contenders,
        "probes": probes,
        "tables": tables,
        "started": t_start,
        "elapsed": time.time() - t_start,
    }


def _shown(wl, rec):
    if rec["status"] != "ok":
        return rec.get("why", "")[:120]
    v = rec["value"]
    unit = {"ms": " ms", "mibs": " MiB/s", "rss": " MiB"}.get(wl.metric if wl else "", " ns")
    return f"{v:,.1f}{unit}"


def _summary(values):
    """summarize without its count (a cell counts its samples)."""
    return {k: v for k, v in summarize(values).items() if k != "n"}


def cell_stats(samples):
    """Statistics of the accepted values of one (workload, loop) cell, and
    medians of its diagnostics (peak RSS, context switches and CPU per op)."""
    ok = [s for s in samples if s["status"] == "ok"]
    st = {"n": len(samples), "ok": len(ok)}
    failures = {}
    for s in samples:
        if s["status"] != "ok":
            failures[s["status"]] = failures.get(s["status"], 0) + 1
    st["failures"] = failures
    if ok:
        st.update(_summary([s["value"] for s in ok]))
        for key in ("peak_rss_mib", "csw_per_op", "cpu_us_per_op"):
            vals = [s[key] for s in ok if s.get(key) is not None]
            if vals:
                st[key] = _summary(vals)
    return st
