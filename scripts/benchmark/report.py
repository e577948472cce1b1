"""The Markdown report: headline table (medians and ratios of medians,
targets), per-cell statistics, failures and provenance."""

import datetime
import signal

from . import workloads
from .harness import FLOOR_LOOP, cell_stats

# Issue targets, zloopgo against uvloop (ratio of medians).
# For time: uvloop_median / zloopgo_median, >= target. For RSS:
# zloopgo_median / uvloop_median, <= target. For MiB/s:
# zloopgo_median / uvloop_median, >= target. "loss<": zloopgo against
# itself, the workload's median time over its baseline workload's median
# (two_writes over one_write), in percent above 1, below the target.
TARGETS = {
    "call_soon": (">=", 1.5),
    "call_soon_args": (">=", 1.7),
    "call_later_cancel": (">=", 3.5),
    "tasks": (">=", 1.15),
    "sleep0": (">=", 1.05),
    "rss": ("<=", 1.0),
    "stream_rtt": (">=", 1.4),
    "bulk": (">=", 1.2),
    "getaddrinfo_numeric": (">=", 1.2),
    "two_writes": ("loss<", 2.0),
}
LOSS_BASE = {"two_writes": "one_write"}


def ratio(wl, other, zl):
    """The headline ratio of zloopgo against `other` (medians)."""
    if other is None or zl is None:
        return None
    if wl.metric in ("rss", "mibs"):
        return zl / other if other else None
    return other / zl if zl else None


def loss_pct(cells, name, loop):
    """How much slower (%) `name` is than its baseline on one loop (medians)."""
    base = LOSS_BASE.get(name)
    a = cells.get((name, loop), {}).get("median")
    b = cells.get((base, loop), {}).get("median")
    return None if a is None or not b else (a / b - 1) * 100


def fmt_value(wl, v):
    if v is None:
        return "—"
    if wl.metric == "rss":
        return f"{v:,.1f} MiB"
    if wl.metric == "mibs":
        return f"{v:,.0f} MiB/s"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}x"


def _cell(results, wl_name, loop):
    return cell_stats(
        [s for s in results["samples"] if s["workload"] == wl_name and s["loop"] == loop]
    )


def render(results, provenance):
    cfg = results["config"]
    contenders = results["contenders"]
    lines = []
    add = lines.append
    gc_text = "GC off (explanatory run, not a headline)" if cfg["gc_off"] else "GC on (default)"
    add("# zloopgo benchmark")
    add("")
    add(
        f"{cfg['rounds']} measured rounds after {cfg['warmup']} warm-up round(s); every sample "
        f"in a fresh interpreter; contenders' order rotated each round; {gc_text}. "
        "Time figures are ns per operation (lower is better), bulk is MiB/s (higher is "
        "better); ratios are ratios of medians."
    )
    if cfg.get("quick") or cfg["scale"] != 1.0:
        add("")
        add(f"**Reduced sizes (scale {cfg['scale']:g}): a smoke run, not a result.**")
    if cfg.get("size"):
        add("")
        given = ", ".join(f"{k}={v:,}" for k, v in cfg["size"].items())
        add(f"Sizes set on the command line: {given} (not the defaults).")
    add("")
    head = ["workload", "N"] + contenders + ["zloopgo vs uvloop", "zloopgo vs asyncio"]
    head += ["target", "met?"]
    add("| " + " | ".join(head) + " |")
    add("|" + "|".join([" --- "] * 2 + [" ---: "] * (len(head) - 4) + [" --- "] * 2) + "|")
    cells = {}
    for name in cfg["workloads"]:
        for loop in contenders:
            cells[(name, loop)] = _cell(results, name, loop)
    for name in cfg["workloads"]:
        wl = workloads.WORKLOADS[name]
        row = [f"{name}: {wl.title}", f"{cfg['sizes'][name]:,}"]
        for loop in contenders:
            st = cells[(name, loop)]
            v = fmt_value(wl, st.get("median"))
            if st["ok"] < st["n"]:
                v += f" ({st['n'] - st['ok']}/{st['n']} failed)"
            row.append(v)
        zl = cells[(name, "zloopgo")].get("median") if "zloopgo" in contenders else None
        uv = cells[(name, "uvloop")].get("median") if "uvloop" in contenders else None
        aio = cells[(name, "asyncio")].get("median") if "asyncio" in contenders else None
        r_uv = ratio(wl, uv, zl)
        row += [fmt_ratio(r_uv), fmt_ratio(ratio(wl, aio, zl))]
        if name in TARGETS and TARGETS[name][0] == "loss<":
            base, target = LOSS_BASE[name], TARGETS[name][1]
            row.append(f"loses < {target:g}% vs {base}")
            loss = loss_pct(cells, name, "zloopgo") if "zloopgo" in contenders else None
            if loss is None:
                row.append(f"n/a (needs {name} and {base})")
            else:
                met = "yes" if loss < target else "no"
                if any(cells[(w, "zloopgo")]["failures"] for w in (name, base)):
                    met += " (cells have failures)"
                row.append(f"{met} ({loss:+.1f}%)")
        elif name in TARGETS:
            op, target = TARGETS[name]
            row.append(f"{op} {target:g}x")
            if r_uv is None:
                row.append("n/a (no data)")
            else:
                met = "yes" if (r_uv >= target if op == ">=" else r_uv <= target) else "no"
                if cells[(name, "zloopgo")]["failures"] or cells[(name, "uvloop")]["failures"]:
                    met += " (cells have failures)"
                row.append(met)
        else:
            row += ["—", "—"]
        add("| " + " | ".join(row) + " |")
    add("")
    add(
        "Ratios: for time, other_median / zloopgo_median (>1 means zloopgo is faster); "
        "for rss, zloopgo_median / other_median (<1 means zloopgo uses less). "
        "rss is the growth of peak RSS (ru_maxrss) while N callbacks are queued at once "
        "and run, in MiB (lower is better); for bulk (MiB/s), zloopgo_median / "
        "other_median (>1 means zloopgo moves more)."
    )
    add("")
    for name, base in LOSS_BASE.items():
        if name in cfg["workloads"] and base in cfg["workloads"]:
            parts = []
            for loop in contenders:
                loss = loss_pct(cells, name, loop)
                if loss is None:
                    parts.append(f"{loop} —")
                    continue
                extra_ns = cells[(name, loop)]["median"] - cells[(base, loop)]["median"]
                parts.append(f"{loop} {loss:+.1f}% ({extra_ns:+,.0f} ns)")
            add(
                f"**{name} vs {base}** (median time per exchange, {name} / {base} - 1, and "
                f"the difference; the issue wants zloopgo < {TARGETS[name][1]:g}%): "
                + ", ".join(parts)
                + "."
            )
            add("")

    floor = cell_stats([s for s in results["samples"] if s["loop"] == FLOOR_LOOP])
    if floor.get("median") is not None:
        f = floor["median"]
        add(
            f"**Physical floor**: {f:.1f} ns per call (median; min {floor['min']:.1f}, max "
            f"{floor['max']:.1f}, {floor['ok']}/{floor['n']} ok) for a C loop "
            "(`deque(starmap(f, repeat((), N)), 0)`) calling an empty Python function, "
            "in a fresh interpreter, no event loop."
        )
        parts = []
        for loop in contenders:
            m = cells.get(("call_soon", loop), {}).get("median")
            if m is not None:
                parts.append(f"{loop} {m / f:.1f}x")
        if parts:
            add(f"call_soon (schedule + run) against that floor: {', '.join(parts)}.")
    else:
        add(f"**Physical floor**: no accepted sample ({floor['failures']}).")
    add("")

    loads = [x for x in results.get("round_load1", []) if x is not None]
    cores = provenance.get("cpu_count") or 1
    if loads and max(loads) > 1 + 0.25 * cores:  # this run itself keeps about 1 busy
        add(
            f"**Warning: the machine was busy.** The 1-minute load average, read at each "
            f"round's start, ranged {min(loads):.2f}–{max(loads):.2f} on {cores} cores "
            "(this run adds about 1). Absolute times are inflated "
            "and noisy; read the ratios and the CoV."
        )
        add("")

    add("## Cells")
    add("")
    add("| workload | loop | ok | median | min | max | CoV |")
    add("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in cfg["workloads"]:
        wl = workloads.WORKLOADS[name]
        for loop in contenders:
            st = cells[(name, loop)]
            if st["ok"]:
                vals = [fmt_value(wl, st[k]) for k in ("median", "min", "max")]
                vals.append(f"{st['cov'] * 100:.1f}%")
            else:
                vals = ["—"] * 4
            add(f"| {name} | {loop} | {st['ok']}/{st['n']} | " + " | ".join(vals) + " |")
    add("")

    add("## Failures (timeouts, crashes, wrong counters, errors)")
    add("")
    bad = [s for s in results["warmup"] + results["samples"] if s["status"] != "ok"]
    if not bad:
        add("None: every warm-up and measured sample finished and proved its work.")
    else:
        for s in bad:
            when = f"warm-up {s['warmup']}" if "warmup" in s else f"round {s['round']}"
            why = s.get("why") or s.get("stderr", "").splitlines()[-1:] or [""]
            if isinstance(why, list):
                why = why[0]
            rc = s.get("returncode")
            add(
                f"- {when}: {s['workload']} on {s['loop']}: **{s['status']}**"
                + (f" ({_exit_text(rc)})" if rc not in (None, 0) else "")
                + (f": {why}" if why else "")
            )
    add("")
    absent = []
    for loop, p in results["probes"].items():
        if loop not in contenders:
            last = (p.get("stderr") or "").strip().splitlines()[-1:] or ["no message"]
            absent.append(f"{loop} (probe {p['status']}: {last[0]})")
    if absent:
        add("Contenders not available: " + "; ".join(absent))
        add("")

    add("## Provenance")
    add("")
    for k, v in provenance_lines(results, provenance):
        add(f"- {k}: {v}")
    add("")
    return "\n".join(lines)


def _exit_text(rc):
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def provenance_lines(results, prov):
    cfg = results["config"]
    bi = prov.get("zloopgo_build_info", {})
    out = [
        (
            "date (UTC)",
            datetime.datetime.fromtimestamp(results["started"], datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M:%S"
            ),
        ),
        ("git commit", prov.get("git", "unknown")),
        ("Python", f"{prov.get('python')} ({prov.get('python_executable')})"),
        (
            "packages",
            ", ".join(f"{k} {v or 'not installed'}" for k, v in prov["packages"].items())
            + f"; rsloop install: {prov.get('rsloop_install', '?')}",
        ),
        (
            "loop classes",
            ", ".join(
                f"{k}={p['payload']['class']}"
                for k, p in results["probes"].items()
                if p.get("payload")
            ),
        ),
        ("OS / kernel", f"{prov.get('platform')} / {prov.get('kernel')}"),
        (
            "CPU",
            (
                f"{bi.get('cpu_brand', '?')} ({bi.get('cpu_vendor', '?')}), "
                f"{bi.get('physical_cores', '?')} physical / {bi.get('logical_cores', '?')} "
                f"logical cores, L1d {bi.get('cache_l1d', '?')} B, L2 {bi.get('cache_l2', '?')} "
                f"B, L3 {bi.get('cache_l3', '?')} B"
            ),
        ),
        ("CPU features", " ".join(bi.get("cpu_features", [])) or "?"),
        (
            "zloopgo build",
            f"{bi.get('zloopgo_version', '?')}, Go {bi.get('go_version', '?')} "
            f"{bi.get('goos', '?')}/{bi.get('goarch', '?')}, reactor {bi.get('reactor', '?')}"
            + (f", error {bi['error']}" if "error" in bi else ""),
        ),
        (
            "GC",
            ("off (gc.disable() in each sample)" if cfg["gc_off"] else "on (default)")
            + f", thresholds {tuple(prov.get('gc_threshold', ()))}",
        ),
        ("sizes", ", ".join(f"{k}={v:,}" for k, v in cfg["sizes"].items())),
        (
            "rounds / warm-up / timeout",
            f"{cfg['rounds']} / {cfg['warmup']} / {cfg['timeout']:g} s per sample",
        ),
        ("load average at start / end", f"{prov.get('loadavg_start')} / {prov.get('loadavg_end')}"),
        (
            "1-min load at each round's start",
            " ".join(f"{x:.2f}" for x in results.get("round_load1", []) if x is not None),
        ),
        ("harness wall time", f"{results['elapsed']:.0f} s"),
    ]
    return out
