"""PNG charts of one Python section of a scripts/bench run: a panel per
table (seed 000 one core and two, the span, the echo matrices, HTTP), one
group of bars per workload, one bar per contender: its median divided by
zloopgo's median, with whiskers from its min to its max (same division),
on a log scale. Needs matplotlib (scripts/bench installs it)."""

import json
import statistics

from . import workloads

COLORS = {
    "asyncio": "#9e9e9e",
    "uvloop": "#1f77b4",
    "zloopgo": "#d62728",
    "zloop": "#ff7f0e",
    "rloop": "#2ca02c",
    "rsloop": "#8c564b",
    "zuvloop": "#9467bd",
    "blazio": "#e377c2",
}


def _cells(samples, key_row, key_loop, value):
    """{row: {loop: [values]}} of the accepted measured samples."""
    out = {}
    for s in samples:
        if s.get("status") != "ok" or s.get("round") == "warm-up" or "warmup" in s:
            continue
        v = value(s)
        if v is None:
            continue
        out.setdefault(key_row(s), {}).setdefault(key_loop(s), []).append(v)
    return out


def panels_of(sec):
    """[(title, [(row label, higher_is_better, {loop: [values]})], loops)]."""
    panels = []
    files = sec.get("files", {})
    if files.get("harness"):
        with open(files["harness"]) as f:
            doc = json.load(f)
        loops = doc["contenders"]
        for table in doc["tables"]:
            if not table["samples"]:
                continue
            cells = _cells(
                table["samples"],
                lambda s: s["workload"],
                lambda s: s["loop"],
                lambda s: s.get("value"),
            )
            rows = []
            for name in table["workloads"]:
                wl = workloads.WORKLOADS.get(name)
                if wl is None or name not in cells:
                    continue
                unit = {"ms": "ms", "ns": "ns/op", "mibs": "MiB/s", "rss": "MiB"}[wl.metric]
                rows.append((f"{name} ({unit})", wl.metric == "mibs", cells[name]))
            panels.append((table["title"], rows, loops))
    if files.get("echo"):
        with open(files["echo"]) as f:
            doc = json.load(f)
        loops = doc["options"]["contenders"]
        for client, title in (
            ("go", "Echo, Go load generator"),
            ("uvloop", "Echo, uvloop's client"),
        ):
            mine = [s for s in doc["samples"] if s.get("client") == client]
            if not mine:
                continue
            cells = _cells(
                mine,
                lambda s: f"{s['mode']} {s['msize'] // 1024} KiB",
                lambda s: s["contender"],
                lambda s: s.get("rate"),
            )
            rows = [(f"{k} (req/s)", True, v) for k, v in cells.items()]
            panels.append((title + " (requests/s)", rows, loops))
    if files.get("http"):
        with open(files["http"]) as f:
            doc = json.load(f)
        loops = doc["options"]["contenders"]
        cells = _cells(
            doc["samples"], lambda s: s["kind"], lambda s: s["loop"], lambda s: s.get("rate")
        )
        rows = [(f"{k} (req/s)", True, v) for k, v in cells.items()]
        if rows:
            panels.append(("HTTP: uvicorn + httptools, wrk (requests/s)", rows, loops))
    return panels


def draw(sec, path, quick=False):
    """Draws the section's chart to `path`; False if there is nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in panels_of(sec) if p[1]]
    if not panels:
        return False
    heights = [max(1.5, 0.16 * len(rows) * (len(loops) + 1) + 0.9) for _, rows, loops in panels]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(10, sum(heights)), gridspec_kw={"height_ratios": heights}
    )
    if len(panels) == 1:
        axes = [axes]
    head = f"zloopgo benchmark, Python {sec.get('version', sec.get('minor'))}: "
    for k, (ax, (title, rows, loops)) in enumerate(zip(axes, panels, strict=True)):
        n = len(loops)
        ticks, labels = [], []
        for i, (label, higher, cells) in enumerate(rows):
            zl = cells.get("zloopgo")
            base = statistics.median(zl) if zl else None
            y0 = i * (n + 1)
            ticks.append(y0 + (n - 1) / 2)
            labels.append(label + ("  ↑ better" if higher else "  ↓ better"))
            if not base:
                continue
            for j, loop in enumerate(loops):
                vals = cells.get(loop)
                if not vals:
                    continue
                med = statistics.median(vals) / base
                lo, hi = min(vals) / base, max(vals) / base
                ax.barh(
                    y0 + j,
                    med,
                    height=0.85,
                    color=COLORS.get(loop, "#333333"),
                    xerr=[[med - lo], [hi - med]],
                    error_kw={"elinewidth": 0.8, "capsize": 2},
                    label=loop if i == 0 else None,
                )
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yticks(ticks)
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(
            (head if k == 0 else "") + title + (" — smoke run" if quick else ""), fontsize=9
        )
        ax.set_xlabel("median / zloopgo's median (whiskers: min and max)", fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        handles = [
            matplotlib.patches.Patch(color=COLORS.get(loop, "#333333"), label=loop)
            for loop in loops
        ]
        ax.legend(handles=handles, fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# The headline: seed 000's three rows at default settings (the GC on), one
# core and two, every loop's time relative to asyncio's.
HEADLINE_TABLES = (("gcon1", "one core"), ("gcon2", "two cores"))
HEADLINE_ROWS = {
    "seed_callbacks": "1M callbacks",
    "seed_tasks": "200k tasks",
    "seed_tcp": "20k TCP round trips",
}


def headline(harness_json, path, title):
    """Draws the README's chart to `path` (1200 x 700 pixels): two panels
    (the GC-on seed tables, one core and two), a group of bars per row, a
    bar per loop: its median time divided by asyncio's (shorter is
    faster), the figure printed at the bar's end. False if the run has no
    such table or no asyncio figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(harness_json) as f:
        doc = json.load(f)
    by_id = {t.get("id"): t for t in doc["tables"]}
    panels = [(by_id[t], label) for t, label in HEADLINE_TABLES if by_id.get(t, {}).get("samples")]
    if not panels:
        return False
    loops = [c for c in doc["contenders"] if c != "asyncio"]
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 7), sharex=True)
    axes = [axes] if len(panels) == 1 else list(axes)
    drawn = False
    for ax, (table, label) in zip(axes, panels, strict=True):
        cells = _cells(
            table["samples"], lambda s: s["workload"], lambda s: s["loop"], lambda s: s.get("value")
        )
        rows = [w for w in HEADLINE_ROWS if cells.get(w, {}).get("asyncio")]
        height = 0.8 / max(1, len(loops))
        for i, workload in enumerate(rows):
            base = statistics.median(cells[workload]["asyncio"])
            for j, loop in enumerate(loops):
                vals = cells[workload].get(loop)
                if not vals:
                    continue
                ratio = statistics.median(vals) / base
                y = i + (j - (len(loops) - 1) / 2) * height
                ax.barh(y, ratio, height=height * 0.92, color=COLORS.get(loop, "#333333"))
                weight = "bold" if loop == "zloopgo" else "normal"
                ax.text(ratio + 0.01, y, f"{ratio:.2f}", va="center", fontsize=7, weight=weight)
                drawn = True
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([HEADLINE_ROWS[w] for w in rows], fontsize=10)
        ax.invert_yaxis()
        ax.set_title(label, fontsize=11)
        ax.set_xlabel("time relative to asyncio (median; shorter is faster)", fontsize=9)
    handles = [
        matplotlib.patches.Patch(color=COLORS.get(loop, "#333333"), label=loop) for loop in loops
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(loops), fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    if drawn:
        fig.savefig(path, dpi=100)
    plt.close(fig)
    return drawn
