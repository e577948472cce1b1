"""Soak figures: resident memory and open descriptors under sustained load,
for stock asyncio, uvloop (when installed) and zloopgo.

    python scripts/reliability/soak.py                # full size, Markdown table
    python scripts/reliability/soak.py --scale 0.1    # a tenth of each workload
    python scripts/reliability/soak.py --loops zloopgo --workloads timers

Workloads (full size):

- call_soon: 1,000,000 call_soon, in batches of 10,000 per loop iteration;
- timers: 100,000 call_later timers created and cancelled (batches of
  10,000: created, one iteration so they reach the scheduler, cancelled,
  one iteration), plus 10,000 created and cancelled within one iteration;
- connections: 10,000 TCP connections to a server on 127.0.0.1 opened,
  echoed and closed, 50 at a time;
- loop_cycles: 500 loops created, run with a server and 5 clients, closed;
- busy_loop_cycles: 10,000 loops created, run and closed, each with a
  server, 20 clients, 2,000 timers created and cancelled and 5,000
  call_soon callbacks (issue 39's soak: its target is RSS flat within
  1 MiB after the warm-up and no descriptor gained); its warm-up is at
  least 400 loops.

Each (loop, workload) runs in a fresh interpreter. The first tenth of the
work is the warm-up; RSS is read after a full collection after the warm-up
and at the end ("growth" is the difference), peak RSS is VmHWM, and
descriptors are counted before the loop is created, after the warm-up and
after it is closed (all after a first loop was created and closed, so that
what a library opens once per process is in every reading); a descriptor
gained is named (its /proc/self/fd link) in the JSON figures.
"""

import argparse
import asyncio
import contextlib
import gc
import json
import os
import subprocess
import sys
import time

from loops import factory

MiB = 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
LOOPS = ["asyncio", "uvloop", "zloopgo"]
WORKLOADS = ["call_soon", "timers", "connections", "loop_cycles", "busy_loop_cycles"]


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def fd_links():
    """{descriptor: what it is}, for naming a descriptor that was gained."""
    links = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            links[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return links


def threads():
    return len(os.listdir("/proc/self/task"))


def settled_rss():
    for _ in range(3):
        gc.collect()
    return rss()


def noop(*args):
    pass


def one_iteration(loop):
    loop.call_soon(loop.stop)
    loop.run_forever()


# ---- workloads: each calls mark() once, after its warm-up --------------


def w_call_soon(loop, scale, mark):
    batch, rounds = 10_000, max(10, int(100 * scale))
    for r in range(rounds):
        if r == rounds // 10:
            mark()
        for i in range(batch):
            loop.call_soon(noop, i)
        one_iteration(loop)
    return batch * rounds


def w_timers(loop, scale, mark):
    batch, rounds = 10_000, max(10, int(10 * scale))
    for r in range(rounds):
        if r == rounds // 10:
            mark()
        handles = [loop.call_later(3600 + i * 1e-3, noop, i) for i in range(batch)]
        one_iteration(loop)
        for h in handles:
            h.cancel()
        del handles
        for i in range(batch // 10):
            loop.call_later(7200, noop, i).cancel()
        one_iteration(loop)
    return rounds * (batch + batch // 10)


async def echo_once(reader, writer):
    data = await reader.read(100)
    writer.write(data)
    await writer.drain()
    writer.close()  # the server closes first: no client port stays in TIME_WAIT
    await writer.wait_closed()


async def connect_many(port, n, concurrency, mark=None):
    async def client(i):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping %d" % i)
        got = await reader.read()
        writer.close()
        await writer.wait_closed()
        if got != b"ping %d" % i:
            raise AssertionError(f"echo {got!r}")

    for first in range(0, n, concurrency):
        if mark is not None and first == (n // 10) // concurrency * concurrency:
            mark()
        await asyncio.gather(*(client(i) for i in range(first, min(n, first + concurrency))))


def w_connections(loop, scale, mark):
    n = max(500, int(10_000 * scale))

    async def main():
        server = await asyncio.start_server(echo_once, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        await connect_many(port, n, 50, mark)
        server.close()
        await server.wait_closed()

    loop.run_until_complete(main())
    return n


def w_loop_cycles(make, scale, mark):
    n = max(20, int(500 * scale))
    for i in range(n):
        if i == n // 10:
            mark()
        lp = make()
        try:

            async def main(lp=lp):
                server = await asyncio.start_server(echo_once, "127.0.0.1", 0)
                port = server.sockets[0].getsockname()[1]
                await connect_many(port, 5, 5)
                lp.call_later(3600, noop)  # pending at close
                server.close()
                await server.wait_closed()

            lp.run_until_complete(main())
            lp.run_until_complete(lp.shutdown_asyncgens())
        finally:
            lp.close()
    return n


def w_busy_loop_cycles(make, scale, mark):
    n = max(20, int(10_000 * scale))
    # The first tenth, and at least the first 400 loops (or half of a
    # shorter run): zloopgo's Go heap grows to its collector's 4 MB goal over
    # the first few hundred (RSS 31.7 MiB after 100, 32.5 after 400, then
    # flat to 10,000).
    warm = max(n // 10, min(400, n // 2))
    for i in range(n):
        if i == warm:
            mark()
        lp = make()
        try:

            async def main(lp=lp):
                server = await asyncio.start_server(echo_once, "127.0.0.1", 0)
                port = server.sockets[0].getsockname()[1]
                timers = [lp.call_later(3600 + j * 1e-3, noop, j) for j in range(2_000)]
                for j in range(5_000):
                    lp.call_soon(noop, j)
                await connect_many(port, 20, 20)  # the timers reach the engine meanwhile
                for timer in timers:
                    timer.cancel()
                server.close()
                await server.wait_closed()

            lp.run_until_complete(main())
            lp.run_until_complete(lp.shutdown_asyncgens())
        finally:
            lp.close()
    return n


def worker(loop_name, workload, scale):
    make = factory(loop_name)
    # One loop first: what a library opens once per process (zloopgo: the
    # Go runtime and its poller; uvloop: libuv's global state) is counted
    # in the "before" readings.
    make().close()
    links0 = fd_links()
    fds0, rss0 = open_fds(), settled_rss()
    marks = {}

    def mark():
        marks["warm"] = settled_rss()
        marks["fds_warm"] = open_fds()

    t0 = time.perf_counter()
    if workload in ("loop_cycles", "busy_loop_cycles"):
        ops = globals()["w_" + workload](make, scale, mark)
    else:
        loop = make()
        try:
            ops = globals()["w_" + workload](loop, scale, mark)
        finally:
            loop.close()
    seconds = time.perf_counter() - t0
    del loop_name
    rss_end = settled_rss()
    return {
        "ops": ops,
        "seconds": seconds,
        "rss_start": rss0,
        "rss_warm": marks["warm"],
        "rss_end": rss_end,
        "peak": peak_rss(),
        "fds_before": fds0,
        "fds_warm": marks["fds_warm"],
        "fds_after": open_fds(),
        "fds_gained": sorted(link for fd, link in fd_links().items() if links0.get(fd) != link),
        "threads": threads(),
    }


def run_one(loop_name, workload, scale, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", loop_name, workload, str(scale)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return {"error": f"exit {proc.returncode}: {tail[0]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt_mib(b):
    return f"{b / MiB:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", default=",".join(LOOPS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the full size")
    ap.add_argument("--timeout", type=float, default=900, help="per run, seconds")
    ap.add_argument("--json", help="also write the raw figures here")
    ap.add_argument(
        "--worker", nargs=3, metavar=("LOOP", "WORKLOAD", "SCALE"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.worker:
        loop_name, workload, scale = args.worker
        print(json.dumps(worker(loop_name, workload, float(scale))))
        return 0

    loops = [name for name in args.loops.split(",") if name]
    results = []
    print(
        f"Soak figures, scale {args.scale:g}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs; RSS in MiB, after a full gc.collect().\n"
    )
    print(
        "| workload | loop | ops | time s | RSS start | RSS after warm-up | RSS end "
        "| growth after warm-up | peak RSS | fds before → after warm-up → end | threads |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    status = 0
    for workload in args.workloads.split(","):
        for loop_name in loops:
            r = run_one(loop_name, workload, args.scale, args.timeout)
            results.append({"loop": loop_name, "workload": workload, **r})
            if "error" in r:
                print(f"| {workload} | {loop_name} | {r['error']} |||||||||")
                if loop_name != "uvloop" or "uvloop" not in r["error"]:
                    status = 1
                continue
            growth = r["rss_end"] - r["rss_warm"]
            fds = f"{r['fds_before']} → {r['fds_warm']} → {r['fds_after']}"
            if r["fds_after"] != r["fds_before"]:
                fds += f" (**gained**: {', '.join(r['fds_gained'])})"
                status = 1
            print(
                f"| {workload} | {loop_name} | {r['ops']:,} | {r['seconds']:.2f} "
                f"| {fmt_mib(r['rss_start'])} | {fmt_mib(r['rss_warm'])} | {fmt_mib(r['rss_end'])} "
                f"| {growth / MiB:+.1f} | {fmt_mib(r['peak'])} | {fds} | {r['threads']} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
