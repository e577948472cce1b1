"""The file rows (issue 25): asynchronous file I/O libraries on their loops,
each sample in a fresh interpreter, contenders rotated from round to round.

    python -m benchmark.filebench [--rounds 5] [--quick] [--contenders ...]

(run from scripts/, as scripts/bench does). Contenders: zloopgo.open() on a
zloopgo loop; aiofiles.open() on asyncio's loop and on uvloop; blazio.open()
on blazio's loop (where blazio installs); zloopgo.open() on asyncio's loop
(its executor path), for reference. Workloads:

- seq: a 1 GiB file read in 64 KiB chunks (MiB/s); every chunk's first 8
  bytes must be its index;
- many: 10,000 files of 4 KiB, each opened, read whole and closed, all at
  once under asyncio.gather (files/s); every file's first 8 bytes must be
  its index and its length 4 KiB;
- append: 1,000 appends of 100 B, each followed by flush() (ops/s); the
  file must then hold exactly what was written (mode "ab"; blazio, which
  has no append mode, writes a new file with "wb");

While each runs, a task sleeps 1 ms in a loop and records how late each
wake-up was: its p99 is reported per cell (the loop's responsiveness). The
files live in a temporary directory (ZL_BENCH_FILES_DIR chooses its parent)
and are read once before the samples, so every contender reads them from
the page cache: the rows measure the software path, not the disk. Prints
Markdown and writes it with the raw samples (JSON) to bench-results/.
"""

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ROOT = os.path.dirname(SCRIPTS)
MARK = "FILEBENCH-RESULT "
CONTENDERS = ("zloopgo", "aiofiles-asyncio", "aiofiles-uvloop", "blazio", "zloopgo-asyncio")
WORKLOADS = ("seq", "many", "append")
CHUNK = 64 * 1024
SMALL = 4096
TARGETS = {"aiofiles-asyncio": 2.0, "aiofiles-uvloop": 2.0, "blazio": 1.0}
TIMER_TARGET_MS = 2.0
T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.0f} s] {msg}", file=sys.stderr, flush=True)


# ---- in the worker process ----


def _loop_and_open(name):
    import asyncio

    if name == "zloopgo":
        import zloopgo

        return zloopgo.new_event_loop(), zloopgo.open
    if name == "zloopgo-asyncio":
        import zloopgo

        return asyncio.SelectorEventLoop(), zloopgo.open
    if name == "blazio":
        import blazio

        return blazio.new_event_loop(), blazio.open
    import aiofiles

    if name == "aiofiles-uvloop":
        import uvloop

        return uvloop.new_event_loop(), aiofiles.open
    return asyncio.SelectorEventLoop(), aiofiles.open


async def _timer(stop, delays):
    import asyncio

    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(0.001)
        delays.append(max(0.0, loop.time() - t - 0.001))


async def _seq(open_, data, size):
    done = 0
    good = 0
    async with open_(os.path.join(data, "big"), "rb") as f:
        while True:
            chunk = await f.read(CHUNK)
            if not chunk:
                break
            if chunk[:8] == struct.pack("<Q", done // CHUNK):
                good += 1
            done += len(chunk)
    return done, {"chunks_in_order": good == size // CHUNK}


async def _many(open_, data, n):
    import asyncio

    async def one(i):
        async with open_(os.path.join(data, "small", str(i)), "rb") as f:
            b = await f.read()
        return len(b) == SMALL and b[:8] == struct.pack("<Q", i)

    got = await asyncio.gather(*[one(i) for i in range(n)])
    return sum(got), {}


async def _append(open_, data, n):
    path = os.path.join(data, f"append-{os.getpid()}")
    if os.path.exists(path):
        os.unlink(path)
    record = b"0123456789" * 10
    # blazio 0.1.0 has no append mode: it writes from the start of a new
    # file, which puts every write at the file's end all the same
    mode = "wb" if open_.__module__.startswith("blazio") else "ab"
    async with open_(path, mode) as f:
        for _ in range(n):
            await f.write(record)
            await f.flush()
    with open(path, "rb") as f:  # untimed, after the workload
        ok = f.read() == record * n
    os.unlink(path)
    return n, {"contents": ok}


def worker(contender, workload, data, size):
    import asyncio

    loop, open_ = _loop_and_open(contender)
    asyncio.set_event_loop(loop)
    func = {"seq": _seq, "many": _many, "append": _append}[workload]

    async def main():
        stop = asyncio.Event()
        delays = []
        timer = asyncio.ensure_future(_timer(stop, delays))
        await asyncio.sleep(0.01)  # the timer is running
        delays.clear()
        t0 = time.perf_counter()
        counter, checks = await func(open_, data, size)
        dt = time.perf_counter() - t0
        stop.set()
        await timer
        return dt, counter, checks, delays

    dt, counter, checks, delays = loop.run_until_complete(main())
    loop.close()
    delays.sort()
    p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))] * 1e3 if delays else None
    print(
        MARK
        + json.dumps(
            {
                "seconds": dt,
                "counter": counter,
                "checks": checks,
                "timer_p99_ms": p99,
                "timer_wakeups": len(delays),
            }
        ),
        flush=True,
    )


# ---- the orchestrator ----


def make_data(parent, seq_bytes, many):
    d = tempfile.mkdtemp(prefix="zl-filebench-", dir=parent)
    block = bytearray(os.urandom(CHUNK))
    with open(os.path.join(d, "big"), "wb") as f:
        for i in range(seq_bytes // CHUNK):
            block[:8] = struct.pack("<Q", i)
            f.write(block)
    os.mkdir(os.path.join(d, "small"))
    small = bytearray(os.urandom(SMALL))
    for i in range(many):
        small[:8] = struct.pack("<Q", i)
        with open(os.path.join(d, "small", str(i)), "wb") as f:
            f.write(small)
    # into the page cache, for every contender alike
    with open(os.path.join(d, "big"), "rb") as f:
        while f.read(1 << 20):
            pass
    return d


def probe(contender):
    code = f"import benchmark.filebench as b; b._loop_and_open({contender!r})[0].close()"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=SCRIPTS, capture_output=True, text=True, check=False
    )
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]


def sample(contender, workload, data, size, timeout):
    cmd = [sys.executable, "-m", "benchmark.filebench", "--worker", contender, workload, data]
    cmd.append(str(size))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=SCRIPTS, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "wall": time.perf_counter() - t0}
    rec = {"status": "ok", "wall": time.perf_counter() - t0, "returncode": proc.returncode}
    payload = None
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            payload = json.loads(line[len(MARK) :])
    if proc.returncode < 0:
        rec["status"] = "crash"
    elif proc.returncode != 0 or payload is None:
        rec["status"] = "error"
        rec["why"] = (proc.stderr.strip().splitlines() or [""])[-1][:300]
    if payload is None:
        return rec
    rec.update(payload)
    expected = size  # bytes read, files read whole, appends made
    if rec["status"] == "ok":
        if payload["counter"] != expected:
            rec["status"] = "mismatch"
            rec["why"] = f"counter {payload['counter']} != {expected}"
        elif not all(payload["checks"].values()):
            rec["status"] = "mismatch"
            rec["why"] = "failed checks: " + ", ".join(
                k for k, v in payload["checks"].items() if not v
            )
    if rec["status"] == "ok":
        secs = payload["seconds"]
        rec["value"] = (size / (1 << 20) if workload == "seq" else size) / secs
    return rec


def summary(values):
    mean = statistics.fmean(values)
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "cov": statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0,
        "n": len(values),
    }


UNITS = {"seq": "MiB/s", "many": "files/s", "append": "ops/s"}
TITLES = {
    "seq": "1 GiB read in 64 KiB chunks",
    "many": "10,000 files of 4 KiB read at once",
    "append": "1,000 appends of 100 B, each flushed",
}


def report(doc, heading):
    out = [f"{heading} File I/O (issue 25)", ""]
    out.append(
        f"Python {doc['python']}; rounds: {doc['rounds']} measured after {doc['warmup']} "
        f"warm-up; sizes: seq {doc['sizes']['seq'] >> 20} MiB, many {doc['sizes']['many']} files, "
        f"append {doc['sizes']['append']}; files in {doc['fs']} (page cache warm); load average "
        f"{doc['load_start']} at the start, {doc['load_end']} at the end. Medians [min-max], CoV."
    )
    out.append("")
    cont = doc["contenders"]
    out.append(
        "| row | "
        + " | ".join(cont)
        + " | zloopgo vs "
        + " | zloopgo vs ".join(c for c in TARGETS if c in cont)
        + " |"
    )
    out.append("| --- |" + " ---: |" * (len(cont) + len([c for c in TARGETS if c in cont])))
    for wl in doc["workloads"]:
        for metric in ("value", "timer_p99_ms"):
            label = (
                f"{TITLES[wl]} ({UNITS[wl]})"
                if metric == "value"
                else f"  timer p99 during {wl} (ms)"
            )
            cells = []
            meds = {}
            for c in cont:
                st = doc["stats"].get(f"{wl}/{c}/{metric}")
                fails = doc["failures"].get(f"{wl}/{c}", {})
                if st is None:
                    cells.append("—" + (f" ({fails})" if fails else ""))
                    continue
                meds[c] = st["median"]
                fmt = "{:,.0f}" if metric == "value" else "{:.2f}"
                spread = f"[{fmt.format(st['min'])}–{fmt.format(st['max'])}]"
                cell = f"{fmt.format(st['median'])} {spread} {st['cov'] * 100:.0f}%"
                if fails:
                    cell += f" ({fails})"
                cells.append(cell)
            ratios = []
            for c, target in TARGETS.items():
                if c not in cont:
                    continue
                if "zloopgo" in meds and c in meds and meds[c] > 0 and meds["zloopgo"] > 0:
                    if metric == "value":
                        r = meds["zloopgo"] / meds[c]
                        ratios.append(f"{r:.2f}x {'✓' if r >= target else '✗'}")
                    else:
                        ratios.append(
                            "✓ < 2 ms" if meds["zloopgo"] < TIMER_TARGET_MS else "✗ ≥ 2 ms"
                        )
                else:
                    ratios.append("—")
            out.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    out.append("")
    out.append(
        "Targets (issue 25): zloopgo >= 2x aiofiles (asyncio and uvloop) and >= blazio on every "
        "row, the timer's p99 under 2 ms. Not installed or failed: "
        + (", ".join(f"{k}: {v}" for k, v in doc["unavailable"].items()) or "none")
        + "."
    )
    return "\n".join(out)


def main(argv):
    if argv[:1] == ["--worker"]:
        worker(argv[1], argv[2], argv[3], int(argv[4]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="smaller files, 1 round, no warm-up")
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--heading", default="##")
    p.add_argument("--tag", default="")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    a = p.parse_args(argv)
    if a.quick:
        a.rounds, a.warmup = 1, 0
    sizes = {
        "seq": (128 << 20) if a.quick else (1 << 30),
        "many": 1000 if a.quick else 10_000,
        "append": 1000,
    }
    contenders = [c for c in a.contenders.split(",") if c]
    unavailable = {}
    for c in list(contenders):
        why = probe(c)
        if why:
            unavailable[c] = why
            contenders.remove(c)
            log(f"{c}: not available ({why})")
    workloads = [w for w in a.workloads.split(",") if w]
    parent = os.environ.get("ZL_BENCH_FILES_DIR") or None
    log("making the files")
    data = make_data(parent, sizes["seq"], sizes["many"])
    fs = subprocess.run(
        ["stat", "-f", "-c", "%T", data], capture_output=True, text=True, check=False
    ).stdout.strip()
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    samples = []
    try:
        for r in range(a.warmup + a.rounds):
            order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
            for wl in workloads:
                for c in order:
                    rec = sample(c, wl, data, sizes[wl], a.timeout)
                    rec.update(contender=c, workload=wl, round=r, warmup=r < a.warmup)
                    samples.append(rec)
                    shown = (
                        f"{rec['value']:,.0f} {UNITS[wl]}, timer p99 {rec['timer_p99_ms']:.2f} ms"
                        if rec["status"] == "ok"
                        else rec.get("why", "")
                    )
                    log(f"round {r + 1}/{a.warmup + a.rounds}: {wl} {c} {rec['status']} {shown}")
    finally:
        shutil.rmtree(data, ignore_errors=True)
    stats, failures = {}, {}
    for wl in workloads:
        for c in contenders:
            cell = [
                s
                for s in samples
                if s["workload"] == wl and s["contender"] == c and not s["warmup"]
            ]
            ok = [s for s in cell if s["status"] == "ok"]
            bad = {}
            for s in cell:
                if s["status"] != "ok":
                    bad[s["status"]] = bad.get(s["status"], 0) + 1
            if bad:
                failures[f"{wl}/{c}"] = bad
            if ok:
                stats[f"{wl}/{c}/value"] = summary([s["value"] for s in ok])
                p99s = [s["timer_p99_ms"] for s in ok if s.get("timer_p99_ms") is not None]
                if p99s:
                    stats[f"{wl}/{c}/timer_p99_ms"] = summary(p99s)
    import platform

    versions = {}
    for dist in ("zloopgo", "aiofiles", "uvloop", "blazio"):
        try:
            from importlib import metadata

            versions[dist] = metadata.version(dist)
        except Exception:  # noqa: BLE001 - recorded as missing
            versions[dist] = None
    doc = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "versions": versions,
        "contenders": contenders,
        "unavailable": unavailable,
        "workloads": workloads,
        "sizes": sizes,
        "rounds": a.rounds,
        "warmup": a.warmup,
        "fs": fs,
        "load_start": load_start,
        "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "stats": stats,
        "failures": failures,
        "samples": samples,
    }
    text = report(doc, a.heading)
    text += "\n\nVersions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".\n"
    os.makedirs(a.out, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = os.path.join(a.out, f"files-{a.tag or 'py'}-{stamp}")
    with open(base + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
