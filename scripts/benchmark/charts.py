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
