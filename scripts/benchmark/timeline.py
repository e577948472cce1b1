"""A per-iteration timeline of one HTTP run on zloopgo, drawn as a PNG: uvicorn
(httptools) serving benchmark.httpapp's /plaintext on a zloopgo loop in this
process, wrk driving it from outside, and the engine's trace of each
iteration (when its wait began and ended, when its batch of callbacks
ended, what it handed over, how many callbacks had run) read back at the
end. Three panels: the share of each 10 ms spent running callbacks, in
waits that found work, and idle (waits that could block); callbacks per
iteration; and a 2 ms close-up of the iterations themselves.

    python -m benchmark.timeline --out timeline.png [--duration 2] [--connections 16]

Needs uvicorn, httptools, matplotlib and wrk on PATH. It knows the trace's
tuple (capi/stats.c, trace_take) and stats()'s keys; nothing of how they are
counted. Wall times here come from one run on whatever else the machine is
doing: the picture shows shape (batching, idle gaps), not speed.
"""

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys

import zloopgo
from zloopgo import _engine

from .httpapp import app

BIN_NS = 10_000_000  # the first panel's bins
ZOOM_NS = 2_000_000  # the close-up's width
MAX_ITERATIONS = 1 << 20  # what one trace holds (capi/stats.c)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def traced_run(duration, connections):
    """Serve a wrk run of `duration` seconds; returns (trace, stats, wrk's output)."""
    import uvicorn

    loop = asyncio.get_running_loop()
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        loop="none",
        http="httptools",
        lifespan="off",
        log_level="warning",
        access_log=False,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{duration:g}s",
        f"http://127.0.0.1:{port}/plaintext",
    ]
    zloopgo.reset_stats(loop)
    _engine.trace_start(loop, MAX_ITERATIONS)
    # wrk runs from a thread of the executor: one completion for the loop
    done = await loop.run_in_executor(
        None, lambda: subprocess.run(command, capture_output=True, text=True, check=True)
    )
    trace = _engine.trace_take(loop)
    stats = zloopgo.stats(loop)
    server.should_exit = True
    await serving
    return trace, stats, done.stdout


def segments(trace):
    """Per iteration: (wait start, wait end, batch end, blocking, callbacks
    it ran), in ns from the first iteration."""
    t0 = trace[0][0]
    out = []
    previous = None
    for wait_start, wait_end, end, _events, _timers, _done, blocking, callbacks in trace:
        ran = callbacks - previous if previous is not None else 0
        previous = callbacks
        out.append((wait_start - t0, wait_end - t0, end - t0, blocking, ran))
    return out[1:]  # the first has no count before it


def binned(segs):
    """Per BIN_NS bin, the ns spent [running callbacks, in waits with work, idle]."""
    nbins = segs[-1][2] // BIN_NS + 1
    bins = [[0, 0, 0] for _ in range(nbins)]

    def add(start, end, which):
        while start < end:
            b = start // BIN_NS
            upto = min(end, (b + 1) * BIN_NS)
            bins[b][which] += upto - start
            start = upto

    for wait_start, wait_end, end, blocking, _ran in segs:
        add(wait_start, wait_end, 2 if blocking else 1)
        add(wait_end, end, 0)
    return bins


def draw(segs, stats, wrk_out, out_path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (share, per_it, zoom) = plt.subplots(3, 1, figsize=(11, 9), constrained_layout=True)
    bins = binned(segs)
    xs = [i * BIN_NS / 1e6 for i in range(len(bins))]
    parts = list(zip(*[(b[0] / BIN_NS, b[1] / BIN_NS, b[2] / BIN_NS) for b in bins], strict=True))
    parts.append(tuple(1 - a - b - c for a, b, c in zip(*parts, strict=True)))
    share.stackplot(
        xs,
        *parts,
        labels=[
            "callbacks",
            "waits that found work",
            "idle (waits that could block)",
            "between iterations (engine steps, Go scheduler)",
        ],
        colors=["#d62728", "#1f77b4", "#c7c7c7", "#ffffff"],
        step="post",
    )
    share.set_ylim(0, 1)
    share.set_xlim(0, xs[-1])
    share.set_ylabel(f"share of each {BIN_NS // 1_000_000} ms")
    share.legend(loc="lower right", fontsize=8)
    share.set_title(title, fontsize=10)

    times = [s[1] / 1e6 for s in segs]
    per_it.plot(times, [s[4] for s in segs], ",", color="#d62728")
    per_it.set_xlim(0, xs[-1])
    per_it.set_ylabel("callbacks per iteration")
    per_it.set_xlabel("ms since the trace began")

    middle = segs[len(segs) // 2][0]
    window = [s for s in segs if middle <= s[0] < middle + ZOOM_NS]
    for wait_start, wait_end, end, blocking, _ran in window:
        zoom.broken_barh(
            [((wait_start - middle) / 1e3, (wait_end - wait_start) / 1e3)],
            (0, 1),
            color="#c7c7c7" if blocking else "#1f77b4",
        )
        zoom.broken_barh(
            [((wait_end - middle) / 1e3, (end - wait_end) / 1e3)], (0, 1), color="#d62728"
        )
    zoom.set_xlim(0, ZOOM_NS / 1e3)
    zoom.set_yticks([])
    zoom.set_xlabel(f"µs: {len(window)} iterations from the middle of the run")

    rps = next(
        (line.split()[1] for line in wrk_out.splitlines() if line.startswith("Requests/sec")), "?"
    )
    fig.suptitle(
        f"{len(segs)} iterations, {stats['callbacks']:,} callbacks, wrk {rps} req/s; "
        f"busy {stats['busy_ns'] / 1e9:.2f} s, idle {stats['idle_ns'] / 1e9:.2f} s "
        f"of waits {stats['poll_ns'] / 1e9:.2f} s",
        fontsize=9,
    )
    fig.savefig(out_path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--duration", type=int, default=2, help="wrk's run, whole seconds")
    p.add_argument("--connections", type=int, default=16)
    args = p.parse_args(argv)
    trace, stats, wrk_out = zloopgo.run(traced_run(args.duration, args.connections))
    if len(trace) < 3:
        sys.exit(f"timeline: only {len(trace)} iterations traced")
    segs = segments(trace)
    ran = [s[4] for s in segs]
    title = (
        f"zloopgo, uvicorn + httptools /plaintext, wrk -c{args.connections} "
        f"{args.duration:g} s, Python {sys.version.split()[0]}"
    )
    draw(segs, stats, wrk_out, args.out, title)
    full = " (the trace filled up)" if len(trace) == MAX_ITERATIONS else ""
    print(
        f"timeline: {len(segs)} iterations{full}, callbacks per iteration median "
        f"{statistics.median(ran):g} max {max(ran)}, wrote {args.out}"
    )


if __name__ == "__main__":
    main()
