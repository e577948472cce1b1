"""The application rows' report (Markdown) and its two charts (PNG): the
rows' throughput relative to asyncio, and p50/p99/p99.9 latency per loop at
90% of asyncio's maximum. Built from apps/bench.py's samples; it knows
their fields, nothing of how they were taken.
"""

import os
import statistics

from .. import tables
from ..charts import COLORS
from .rows import CONNS, SERVER_ROWS

ZL = tables.ZL


def _ok(found, **match):
    return [
        s for s in found if s["status"] == "ok" and all(s.get(k) == v for k, v in match.items())
    ]


def _median(values):
    return statistics.median(values) if values else None


def row_keys(opts, found):
    """(server, row) in the order the rows were planned."""
    return [(srv, r[0]) for srv in opts.servers for r in SERVER_ROWS[srv]]


def throughput_medians(opts, found, key="rate"):
    """{(server, row): {loop: median of the throughput samples' key}}
    (requests/s, or server_cpu_us)."""
    out = {}
    for srv, row in row_keys(opts, found):
        out[(srv, row)] = {
            loop: _median(
                [
                    s[key]
                    for s in _ok(found, part="throughput", server=srv, row=row, loop=loop)
                    if s.get(key) is not None
                ]
            )
            for loop in opts.contenders
        }
    return out


def latency_figures(found, share):
    """{(server, row, loop): the latency sample at load `share` whose p99 is
    the median of that cell's samples (the lower middle one of an even
    count): one burst of noise moves a sample, not the figure."""
    cells = {}
    for s in _ok(found, part="latency", load=share):
        cells.setdefault((s["server"], s["row"], s["loop"]), []).append(s)
    return {k: sorted(v, key=lambda s: s["p99_us"])[(len(v) - 1) // 2] for k, v in cells.items()}


def place(medians, loop=ZL):
    """zloopgo's place among the loops with a figure ("1st of 8"), or "—"."""
    have = sorted((v for v in medians.values() if v), reverse=True)
    if medians.get(loop) is None:
        return "—"
    k = have.index(medians[loop]) + 1
    return f"{k}{'st' if k == 1 else 'nd' if k == 2 else 'rd' if k == 3 else 'th'} of {len(have)}"


def markdown(opts, found, absent, elapsed, pngs=()):
    h = opts.heading
    lines = []
    add = lines.append
    add(f"{h} Applications: TechEmpower-style rows on PostgreSQL and Redis")
    add("")
    if opts.skipped:
        add(f"**Not run: {opts.skipped}.**")
        add("")
        return "\n".join(lines)
    names = opts.contenders
    peers = tables.peers_of(names)
    add(
        "uvicorn + Starlette (httptools) and aiohttp.web serve TechEmpower's test types "
        "(`benchmark/apps/handlers.py`: asyncpg pool of 16, redis-py asyncio, Jinja2) in front "
        "of PostgreSQL (`World` 10,000 rows, `Fortune`) and Redis started on loopback; uvicorn "
        "+ websockets echoes 1 KiB WebSocket messages on 100 connections. The Go load "
        f"generator (`benchmark/apps/load/`) checks every answer (status and body) before its "
        f"time counts; HTTP rows on {CONNS['uvicorn']} keep-alive connections. "
        + (
            f"Server pinned to CPU {opts.pin_server[-1]}; load generator, PostgreSQL and Redis "
            f"to CPU {opts.pin_client[-1]}. "
            if opts.pin_server
            else "Not pinned. "
        )
        + f"Throughput: closed loop, {opts.rounds} rounds, a fresh server per (server, loop) "
        "and round, every loop's started before any is measured; each row taken on every "
        "loop in turn (loops rotated from row to row, rows from round to round), so that a "
        "slow spell of the machine falls on all loops of a row alike; "
        f"{opts.duration:g} s per sample after {opts.warmup:g} s of warm-up. "
        "Latency: the same interleaving, open loop at "
        + " and ".join(f"{x:.0%}" for x in opts.loads)
        + f" of asyncio's median maximum on each row, {opts.latency_samples} samples of "
        f"{opts.latency_duration:g} s each (the rows rotated between them; the figure is the "
        "sample with the median p99), latency counted from when each request was due; a rate "
        "above a loop's own maximum on that row is not run. Server CPU per request: the "
        "server's CPU time (every thread, user and system) over the answers while a "
        "throughput sample ran, which time taken by other processes does not inflate. "
        "**zloopgo vs X > 1: zloopgo better.**"
    )
    if absent:
        add("")
        add("Not measured: " + "; ".join(f"**{k}**: {v}" for k, v in absent.items()) + ".")
    add("")
    for png, what in zip(pngs, CHART_CAPTIONS, strict=False):
        add(f"Chart: `{os.path.basename(png)}` (in bench-results/): {what}")
        add("")
    medians = throughput_medians(opts, found)
    add("Requests/s (median):")
    add("")
    head = ["server", "row", *names] + [f"zloopgo vs {p}" for p in peers] + ["zloopgo's place"]
    rows = []
    for (srv, row), med in medians.items():
        figures = []
        for c in names:
            cell = [
                s
                for s in found
                if (s.get("part"), s["server"], s["row"], s["loop"]) == ("throughput", srv, row, c)
            ]
            figures.append(("—" if med[c] is None else f"{med[c]:,.0f}") + tables.failed_note(cell))
        ratios = [tables.fmt_ratio(tables.versus(med.get(ZL), med[p], True)) for p in peers]
        rows.append([srv, row, *figures, *ratios, place(med)])
    lines.extend(tables.table(head, rows, labels=2))
    cpu = throughput_medians(opts, found, "server_cpu_us")
    add("Server CPU time per request, µs (median; lower is better):")
    add("")
    head = ["server", "row", *names] + [f"zloopgo vs {p}" for p in peers] + ["zloopgo's place"]
    rows = []
    for (srv, row), med in cpu.items():
        rows.append(
            [srv, row]
            + ["—" if med[c] is None else f"{med[c]:,.1f}" for c in names]
            + [tables.fmt_ratio(tables.versus(med.get(ZL), med[p], False)) for p in peers]
            + [place({c: (-v if v else None) for c, v in med.items()})]
        )
    lines.extend(tables.table(head, rows, labels=2))
    busy = throughput_medians(opts, found, "server_busy")
    add(
        "Server busy: the share of its CPU the server used while a throughput sample ran "
        "(median). Well under 100%, the server waited for PostgreSQL, Redis or the load "
        "generator, which share the other CPU: that row's requests/s measure them more than "
        "the loop."
    )
    add("")
    rows = [
        [srv, row] + ["—" if med[c] is None else f"{med[c]:.0%}" for c in names]
        for (srv, row), med in busy.items()
    ]
    lines.extend(tables.table(["server", "row", *names], rows, labels=2))
    for share in opts.loads:
        add(f"p99 latency at {share:.0%} of asyncio's maximum, µs (p50 / p99 / p99.9 below):")
        add("")
        head = ["server", "row", "rate", *names] + [f"zloopgo vs {p}" for p in peers]
        rows = []
        figure = latency_figures(found, share)
        for srv, row in row_keys(opts, found):
            got = {c: figure.get((srv, row, c)) for c in names}
            target = next((s["target"] for s in got.values() if s), None)
            if target is None:
                continue
            p99 = {c: (s["p99_us"] if s else None) for c, s in got.items()}
            rows.append(
                [srv, row, f"{target:,.0f}/s"]
                + ["—" if p99[c] is None else f"{p99[c]:,.0f}" for c in names]
                + [tables.fmt_ratio(tables.versus(p99.get(ZL), p99[p], False)) for p in peers]
            )
        lines.extend(tables.table(head, rows, labels=2))
    add("Every throughput cell (requests/s): median, min, max, CoV:")
    add("")
    every = []
    for srv, row in row_keys(opts, found):
        for c in names:
            cell = [
                s
                for s in found
                if (s.get("part"), s["server"], s["row"], s["loop"]) == ("throughput", srv, row, c)
            ]
            every.append(((srv, row, c), cell, [s["rate"] for s in cell if s["status"] == "ok"]))
    lines.extend(tables.every_cell(["server", "row", "loop"], every, lambda _, v: f"{v:,.0f}"))
    add(
        "Every latency sample: achieved rate, p50 / p99 / p99.9 / max in µs, requests sent over "
        "1 ms after they were due (their connection still waited for an earlier answer):"
    )
    add("")
    rows = []
    for s in found:
        if s.get("part") != "latency" or s["status"] != "ok":
            continue
        rows.append(
            [s["server"], s["row"], f"{s['load']:.0%}", s["loop"], str(s.get("sample", 1))]
            + [f"{s['rate']:,.0f}"]
            + [f"{s[k]:,.0f}" for k in ("p50_us", "p99_us", "p999_us", "max_us")]
            + [f"{s['late']:,}"]
        )
    lines.extend(
        tables.table(
            ["server", "row", "load", "loop", "sample", "req/s", "p50", "p99", "p99.9", "max"]
            + ["late"],
            rows,
            labels=5,
        )
    )
    bad = [
        ((s["server"], s["row"], s["loop"], s.get("part", "")), s["status"], s.get("detail", ""))
        for s in found
        if s["status"] != "ok"
    ]
    lines.extend(tables.failures(["server", "row", "loop", "pass"], bad, "Failures: none."))
    vers = opts.versions
    add(
        "Provenance: "
        + ", ".join(f"{k} {v}" for k, v in vers.items())
        + f", {opts.services}; load average at the end "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
        + f"; {elapsed:.0f} s."
    )
    add("")
    return "\n".join(lines)


def options_doc(opts):
    keep = ("rounds", "duration", "latency_duration", "latency_samples", "warmup", "loads")
    keep += ("contenders", "servers")
    doc = {k: getattr(opts, k) for k in keep}
    doc.update(versions=opts.versions, skipped=opts.skipped, pin_server=opts.pin_server)
    doc["services"] = getattr(opts, "services", None)
    return doc


CHART_CAPTIONS = (
    "each row's median requests/s relative to asyncio's, every loop.",
    "p50, p99 and p99.9 at the highest constant rate, each loop's relative to asyncio's "
    "on the same row, the median over the rows.",
)


def charts(opts, found, path_of):
    """Draws the throughput and the latency chart to path_of("throughput")
    and path_of("latency"); the paths drawn, in that order ([] without
    matplotlib or results)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    if opts.skipped or not found:
        return []
    out = []
    medians = throughput_medians(opts, found)
    keys = [k for k, v in medians.items() if v.get("asyncio")]
    if keys:
        # one line per row, one marker per loop: eight loops' bars side by
        # side on thirteen rows could not be read at a README's width
        loops = [c for c in opts.contenders if any(medians[k].get(c) for k in keys)]
        fig, ax = plt.subplots(figsize=(9, 0.34 * len(keys) + 1.9))
        for i in range(len(keys)):
            ax.axhline(i, color="#eeeeee", linewidth=0.8, zorder=0)
        floor = 0.2  # below it a loop is drawn at the edge, pointing left
        for loop in loops:
            ys = [i for i, k in enumerate(keys) if medians[k].get(loop)]
            xs = [medians[keys[i]][loop] / medians[keys[i]]["asyncio"] for i in ys]
            ours = loop == ZL
            low = [x < floor for x in xs]
            if any(low):
                ax.scatter(
                    [floor] * sum(low),
                    [y for y, b in zip(ys, low, strict=True) if b],
                    s=30,
                    marker="<",
                    color=COLORS.get(loop, "#333333"),
                    zorder=2,
                )
            ys = [y for y, b in zip(ys, low, strict=True) if not b]
            xs = [x for x, b in zip(xs, low, strict=True) if not b]
            ax.scatter(
                xs,
                ys,
                s=70 if ours else 30,
                marker="D" if ours else "o",
                color=COLORS.get(loop, "#333333"),
                edgecolors="black" if ours else "none",
                linewidths=0.6,
                zorder=3 if ours else 2,
                label=loop,
            )
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")  # a loop many times slower must not flatten the others
        ticks = [0.25, 0.5, 0.75, 1, 1.5, 2, 3]
        ax.set_xlim(floor * 0.95, 3.2)
        ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_yticks(range(len(keys)))
        ax.set_yticklabels([f"{srv}: {row}" for srv, row in keys], fontsize=8)
        ax.set_ylim(len(keys) - 0.5, -0.5)
        ax.set_xlabel(
            "requests/s relative to asyncio (median; > 1 is faster, log scale; "
            f"< at the edge: below {floor:g}x)",
            fontsize=9,
        )
        ax.set_title("Application rows: throughput relative to asyncio", fontsize=10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(loops))
        fig.tight_layout()
        path = path_of("throughput")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        out.append(path)
    share = max(opts.loads) if opts.loads else None
    lat = {}
    for (_, _, loop), s in latency_figures(found, share).items():
        lat.setdefault(loop, []).append(s)
    if lat:
        loops = [c for c in opts.contenders if c in lat]
        fig, ax = plt.subplots(figsize=(9, 4.2))
        # each loop's percentiles as the median over the rows of its figure
        # divided by asyncio's on that row: rows of different sizes weigh alike
        base_of = {(s["server"], s["row"]): s for s in lat.get("asyncio", [])}
        drawn = []
        for j, (key, label) in enumerate(
            (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9"))
        ):
            xs = []
            for loop in loops:
                ratios = [
                    s[key] / base_of[(s["server"], s["row"])][key]
                    for s in lat[loop]
                    if (s["server"], s["row"]) in base_of
                ]
                xs.append(statistics.median(ratios) if ratios else 0)
            drawn += [x for x in xs if x > 0]
            ax.bar(
                [i + (j - 1) * 0.27 for i in range(len(loops))],
                xs,
                width=0.27,
                label=label,
                color=("#9ecae1", "#3182bd", "#08519c")[j],
            )
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")  # a loop many times slower must not flatten the others
        ticks = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20)
        ticks = [t for t in ticks if min(drawn, default=1) / 2 <= t <= max(drawn, default=1) * 2]
        ax.set_yticks(ticks, [f"{t:g}x" for t in ticks])
        ax.yaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_xticks(range(len(loops)))
        ax.set_xticklabels(loops, fontsize=9)
        ax.set_ylabel(
            "latency relative to asyncio's, log scale\n(median over the rows; < 1 is lower)",
            fontsize=8,
        )
        ax.set_title(
            f"Latency at {share:.0%} of asyncio's maximum rate, open loop (p50, p99, p99.9)",
            fontsize=10,
        )
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = path_of("latency")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        out.append(path)
    return out
