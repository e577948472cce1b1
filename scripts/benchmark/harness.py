"""Runs the samples: a warm-up pass, then rounds in which every workload
runs once on every contender, each sample in a fresh interpreter, the
contenders' order rotated from round to round. Failures of every kind are
kept as results."""

import json
import os
import statistics
import subprocess
import sys
import time

from . import workloads
from .worker import MARK

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)

REQUIRED = ["asyncio", "uvloop", "zloopgo"]
OPTIONAL = ["rsloop"]
FLOOR_LOOP = "python"


def run_worker(args, timeout, env_extra=None):
    """Runs the worker in a fresh interpreter. Returns (payload or None,
    status, detail): status is ok, timeout, crash or error."""
    env = dict(os.environ)
    env.update(env_extra or {})
    cmd = [sys.executable, "-m", "benchmark.worker", *args]
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


def sample(loop, wl, size, timeout, gc_off):
    """One measured (or warm-up) sample: a dict that says what happened."""
    env = {"ZL_BENCH_GC": "off" if gc_off else "on"}
    payload, status, detail = run_worker([loop, wl.name, str(size)], timeout, env)
    rec = {"loop": loop, "workload": wl.name, "size": size, "status": status, **detail}
    if payload is not None:
        rec.update(
            seconds=payload["seconds"],
            counter=payload["counter"],
            checks=payload["checks"],
            extra=payload["extra"],
            gc=payload["gc"],
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
    if rec["status"] == "ok":
        if wl.metric == "rss":
            rec["value"] = payload["extra"]["rss_delta_mib"]
        elif wl.metric == "mibs":
            rec["value"] = size / payload["seconds"] if payload["seconds"] > 0 else float("inf")
        else:
            rec["value"] = payload["seconds"] / size * 1e9
    return rec


def probe(loop, timeout=60):
    payload, status, detail = run_worker(["--probe", loop], timeout)
    return payload, status, detail


def _load1():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def rotate(seq, k):
    k %= len(seq)
    return seq[k:] + seq[:k]


def run(config, log=print):
    """Runs the whole benchmark; returns the results document."""
    contenders = list(REQUIRED)
    probes = {}
    for loop in REQUIRED + OPTIONAL:
        payload, status, detail = probe(loop)
        probes[loop] = {"status": status, "payload": payload, **detail}
        if loop in OPTIONAL:
            if status == "ok" and config.get("optional", True):
                contenders.append(loop)
            log(f"# optional contender {loop}: {'included' if loop in contenders else 'absent'}")
        elif status != "ok":
            log(f"# contender {loop} failed its probe ({status}); its samples will fail too")
    if config.get("contenders"):
        contenders = [c for c in contenders if c in config["contenders"]]

    wls = [workloads.WORKLOADS[n] for n in config["workloads"]]
    sizes = {wl.name: max(1, int(wl.size * config["scale"])) for wl in wls}
    sizes.update((k, v) for k, v in config.get("size", {}).items() if k in sizes)  # as given
    sizes[workloads.FLOOR.name] = max(1, int(workloads.FLOOR.size * config["scale"]))
    timeout = config["timeout"]
    gc_off = config["gc_off"]

    t_start = time.time()
    warmup = []
    for w in range(config["warmup"]):
        for wl in wls:
            for loop in contenders:
                rec = sample(loop, wl, sizes[wl.name], timeout, gc_off)
                rec["warmup"] = w
                warmup.append(rec)
                log(f"warm-up {w}: {wl.name:18s} {loop:8s} {rec['status']}")
    samples = []
    loads = []
    for r in range(config["rounds"]):
        loads.append(_load1())
        order = rotate(contenders, r)
        for wl in wls:
            for loop in order:
                rec = sample(loop, wl, sizes[wl.name], timeout, gc_off)
                rec["round"] = r
                samples.append(rec)
                shown = f"{rec['value']:.1f}" if rec["status"] == "ok" else rec.get("why", "")
                log(f"round {r}: {wl.name:18s} {loop:8s} {rec['status']:8s} {shown}")
        rec = sample(FLOOR_LOOP, workloads.FLOOR, sizes["floor"], timeout, gc_off)
        rec["round"] = r
        samples.append(rec)
        log(f"round {r}: floor              {rec['status']:8s} {rec.get('value', 0):.1f}")
    return {
        "config": dict(config, sizes=sizes),
        "contenders": contenders,
        "probes": probes,
        "warmup": warmup,
        "samples": samples,
        "round_load1": loads + [_load1()],
        "started": t_start,
        "elapsed": time.time() - t_start,
    }


def cell_stats(samples):
    """Statistics of the accepted values of one (workload, loop) cell."""
    values = [s["value"] for s in samples if s["status"] == "ok"]
    st = {"n": len(samples), "ok": len(values)}
    failures = {}
    for s in samples:
        if s["status"] != "ok":
            failures[s["status"]] = failures.get(s["status"], 0) + 1
    st["failures"] = failures
    if values:
        mean = statistics.fmean(values)
        st.update(
            median=statistics.median(values),
            min=min(values),
            max=max(values),
            cov=(statistics.stdev(values) / mean) if len(values) > 1 and mean else 0.0,
        )
    return st
