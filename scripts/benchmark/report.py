"""The Markdown report of one Python's harness run: per table a headline
(medians, ratios of medians of zloopgo against every other contender,
targets), seed 000's peak-RSS and round-trip diagnostics, then every
cell's statistics, failures, absent peers and provenance."""

import datetime
import signal

from . import tables, workloads
from .harness import FLOOR_LOOP, cell_stats
from .tables import ZL, fmt_ratio

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
    "seed_tasks": (">=", 1.15),
    "sleep0": (">=", 1.05),
    "rss": ("<=", 1.0),
    "stream_rtt": (">=", 1.4),
    "bulk": (">=", 1.2),
    "getaddrinfo_numeric": (">=", 1.2),
    "getaddrinfo_localhost": (">=", 1.5),
    "getaddrinfo_gather": (">=", 1.2),
    "two_writes": ("loss<", 2.0),
}
LOSS_BASE = {"two_writes": "one_write"}

# Seed 000's rows against the best rival: zloopgo first on each, and ahead
# of one named rival by at least a ratio (callbacks: at most 0.85x
# rsloop's time).
SEED_TARGETS = {
    "seed_callbacks": ("rsloop", 1 / 0.85),
    "seed_tasks": ("zuvloop", 1.0),
    "seed_tcp": ("rsloop", 1.0),
}


def ratio(wl, other, zl):
    """The headline ratio of zloopgo against `other` (medians): >1 means
    zloopgo is better, except for rss (growth; <1 means zloopgo smaller)."""
    return tables.versus(zl, other, higher_is_better=wl.metric in ("rss", "mibs"))


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
    if wl.metric == "ms":
        return f"{v:,.1f}"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


UNIT = {
    "ns": "ns per operation (lower is better)",
    "ms": "ms for the whole workload (lower is better)",
    "mibs": "MiB/s (higher is better)",
    "rss": "MiB of peak-RSS growth (lower is better)",
}


def table_cells(table, contenders):
    cells = {}
    for name in table["workloads"]:
        for loop in contenders:
            cells[(name, loop)] = cell_stats(
                [s for s in table["samples"] if s["workload"] == name and s["loop"] == loop]
            )
    return cells


def render(results, provenance, heading="##"):
    cfg = results["config"]
    contenders = results["contenders"]
    peers = tables.peers_of(contenders)
    lines = []
    add = lines.append
    title = cfg.get("title") or f"Python {provenance.get('python', '?').split()[0]}"
    add(f"{heading} {title}: scheduler, network and process workloads")
    add("")
    add(
        "Every sample in a fresh interpreter, proving its work with a counter or checksum "
        "before its time is accepted; contenders' order rotated each round; GC on unless a "
        "table says otherwise. Ratios are ratios of medians from the same run: "
        "**zloopgo vs X > 1 means zloopgo is better** (faster, or more MiB/s), except "
        "for RSS, where < 1 means zloopgo uses less. Contenders: "
        + ", ".join(f"`{c}`" for c in contenders)
        + "."
    )
    if cfg.get("quick") or cfg["scale"] != 1.0:
        add("")
        add(f"**Reduced sizes (scale {cfg['scale']:g}) and rounds: a smoke run, not a result.**")
    if cfg.get("size"):
        add("")
        given = ", ".join(f"{k}={v:,}" for k, v in cfg["size"].items())
        add(f"Sizes set on the command line: {given} (not the defaults).")
    absent = absent_lines(results, provenance)
    if absent:
        add("")
        add("Peers that could not be measured on this Python: " + "; ".join(absent) + ".")
    add("")
    all_cells = {}
    for table in results["tables"]:
        cells = table_cells(table, contenders)
        all_cells[table["id"]] = cells
        add(f"{heading}# {table['title']}")
        add("")
        if table.get("skipped"):
            add(f"Not run: {table['skipped']}.")
            add("")
            continue
        rounds = sorted(set(table["rounds"].values()))
        add(
            f"{table['warmup']} warm-up round(s), then "
            + (f"{rounds[0]}" if len(rounds) == 1 else f"{rounds[0]}–{rounds[-1]}")
            + " measured rounds (fresh process per sample); "
            + ("GC **disabled** in every sample." if table["gc_off"] else "GC on.")
        )
        add("")
        headline(add, table, cells, contenders, peers, cfg)
        if cfg.get("free_threaded"):
            gil_lines(add, table, cells, contenders)
        if table.get("kind") == "seed":
            places(add, table, cells, contenders)
            seed_extras(add, table, cells, contenders, peers)
        else:
            span_extras(add, table, cells, contenders, results)
        busy(add, table, provenance)

    add(f"{heading}# Every cell: median, min, max, coefficient of variation")
    add("")
    every = []
    for table in results["tables"]:
        for name in table["workloads"]:
            for loop in contenders:
                got = [s for s in table["samples"] if s["workload"] == name and s["loop"] == loop]
                accepted = [s["value"] for s in got if s["status"] == "ok"]
                every.append(((table["id"], name, loop), got, accepted))

    def fmt(key, v):
        return fmt_value(workloads.WORKLOADS[key[1]], v)

    lines.extend(tables.every_cell(["table", "workload", "loop"], every, fmt))

    add(f"{heading}# Failures (timeouts, crashes, wrong counters, errors)")
    add("")
    bad = []
    for table in results["tables"]:
        for s in table["warmup_samples"] + table["samples"]:
            if s["status"] == "ok":
                continue
            when = f"warm-up {s['warmup'] + 1}" if "warmup" in s else f"round {s['round'] + 1}"
            rc = s.get("returncode")
            status = s["status"] + (f" ({_exit_text(rc)})" if rc not in (None, 0) else "")
            bad.append(((table["id"], when, s["workload"], s["loop"]), status, s.get("why")))
    none = "None: every warm-up and measured sample finished and proved its work."
    lines.extend(tables.failures(["table", "when", "workload", "loop"], bad, none))

    add(f"{heading}# Provenance")
    add("")
    for k, v in provenance_lines(results, provenance):
        add(f"- {k}: {v}")
    add("")
    return "\n".join(lines)


def headline(add, table, cells, contenders, peers, cfg):
    names = table["workloads"]
    metrics = {workloads.WORKLOADS[n].metric for n in names}
    if len(metrics) == 1:
        add(f"Figures: {UNIT[metrics.pop()]}.")
    else:
        add(
            "Figures: ns per operation unless the workload says MiB/s or MiB (lower is "
            "better for time and MiB, higher for MiB/s)."
        )
    add("")
    show_targets = any(n in TARGETS for n in names)
    head = ["workload", "N", *contenders] + [f"zloopgo vs {p}" for p in peers]
    if show_targets:
        head += ["target (vs uvloop)", "met?"]
    rows = []
    for name in names:
        wl = workloads.WORKLOADS[name]
        row = [f"{name}: {wl.title}", f"{cfg['sizes'][name]:,}"]
        for loop in contenders:
            st = cells[(name, loop)]
            v = fmt_value(wl, st.get("median"))
            if st["ok"] < st["n"]:
                v += f" ({st['n'] - st['ok']}/{st['n']} failed)"
            row.append(v)
        zl = cells[(name, ZL)].get("median") if ZL in contenders else None
        for p in peers:
            row.append(fmt_ratio(ratio(wl, cells[(name, p)].get("median"), zl)))
        if show_targets:
            row += target_cells(name, wl, cells, contenders)
        rows.append(row)
    align = "ll" + "r" * (len(contenders) + len(peers)) + ("ll" if show_targets else "")
    for line in tables.table(head, rows, align=align):
        add(line)


def places(add, table, cells, contenders):
    """Each seed row's order by median, zloopgo's place, and zloopgo against
    the best rival and against the row's named rival (SEED_TARGETS)."""
    head = ["workload", "order (median)", "zloopgo's place", "vs best rival", "target", "met?"]
    rows = []
    for name in table["workloads"]:
        wl = workloads.WORKLOADS[name]
        have = [(cells[(name, c)].get("median"), c) for c in contenders if c != FLOOR_LOOP]
        have = sorted((m, c) for m, c in have if m)
        if ZL not in [c for _, c in have]:
            continue
        place = 1 + [c for _, c in have].index(ZL)
        rivals = [(m, c) for m, c in have if c != ZL]
        zl = cells[(name, ZL)]["median"]
        best = fmt_ratio(ratio(wl, rivals[0][0], zl)) + f" ({rivals[0][1]})" if rivals else "—"
        order = ", ".join(f"{c} {fmt_value(wl, m)}" for m, c in have[:4])
        target, met = "first", "yes" if place == 1 else "no"
        if name in SEED_TARGETS:
            rival, want = SEED_TARGETS[name]
            r = ratio(wl, cells[(name, rival)].get("median"), zl) if rival in contenders else None
            target += f", >= {want:.2f}x {rival}"
            met = "n/a" if r is None else ("yes" if place == 1 and r >= want else "no")
            met += "" if r is None else f" ({fmt_ratio(r)})"
        rows.append([name, order, f"{place} of {len(have)}", best, target, met])
    if rows:
        add("Order and zloopgo's place (ratios of medians; > 1 means zloopgo is faster):")
        add("")
        for line in tables.table(head, rows, align="llllll"):
            add(line)
        add("")


def gil_lines(add, table, cells, contenders):
    """The free-threaded table's GIL: what each contender's samples ran
    with (recorded at each sample's end), and asyncio's two rows against
    each other, which is what the GIL costs there."""
    seen = {}
    for s in table["samples"]:
        if s.get("gil") is not None:
            seen.setdefault(s["loop"], set()).add("on" if s["gil"] else "off")
    add(
        "The GIL during the measured samples (`sys._is_gil_enabled()` at each sample's end): "
        + ", ".join(f"{c} {'/'.join(sorted(seen[c])) if c in seen else '?'}" for c in contenders)
        + "."
    )
    if "asyncio" in contenders and "asyncio-gil" in contenders:
        parts = []
        for name in table["workloads"]:
            off = cells[(name, "asyncio")].get("median")
            on = cells[(name, "asyncio-gil")].get("median")
            if off and on:
                parts.append(f"{name} {on / off:.2f}x")
        if parts:
            add(
                "What the GIL costs asyncio here (its median time with PYTHON_GIL=1 over its "
                "median with PYTHON_GIL=0; > 1: slower with the GIL): " + ", ".join(parts) + "."
            )
    add("")


def target_cells(name, wl, cells, contenders):
    if name not in TARGETS:
        return ["—", "—"]
    op, target = TARGETS[name]
    if op == "loss<":
        base = LOSS_BASE[name]
        loss = loss_pct(cells, name, ZL) if ZL in contenders else None
        if loss is None:
            return [f"loses < {target:g}% vs {base}", f"n/a (needs {name} and {base})"]
        met = "yes" if loss < target else "no"
        if any(cells[(w, ZL)]["failures"] for w in (name, base)):
            met += " (cells have failures)"
        return [f"loses < {target:g}% vs {base}", f"{met} ({loss:+.1f}%)"]
    if ZL not in contenders or "uvloop" not in contenders:
        return [f"{op} {target:g}x", "n/a"]
    r = ratio(wl, cells[(name, "uvloop")].get("median"), cells[(name, ZL)].get("median"))
    if r is None:
        return [f"{op} {target:g}x", "n/a (no data)"]
    met = "yes" if (r >= target if op == ">=" else r <= target) else "no"
    if cells[(name, ZL)]["failures"] or cells[(name, "uvloop")]["failures"]:
        met += " (cells have failures)"
    return [f"{op} {target:g}x", met]


def _diag(st, key, fmt):
    d = st.get(key)
    return fmt.format(d["median"]) if d else "—"


def seed_extras(add, table, cells, contenders, peers):
    names = table["workloads"]
    add("Peak RSS of each sample's process (ru_maxrss, interpreter and libraries included), MiB,")
    add("median; zloopgo vs X is zloopgo / X (< 1: zloopgo uses less):")
    add("")
    head = ["workload", *contenders] + [f"zloopgo vs {p}" for p in peers]
    rows = []
    for name in names:
        row = [workloads.WORKLOADS[name].title]
        med = {}
        for loop in contenders:
            d = cells[(name, loop)].get("peak_rss_mib")
            med[loop] = d["median"] if d else None
            row.append(f"{med[loop]:,.1f}" if d else "—")
        for p in peers:
            z, o = med.get(ZL), med.get(p)
            row.append(fmt_ratio(z / o if z and o else None))
        rows.append(row)
    for line in tables.table(head, rows):
        add(line)
    if "seed_callbacks" in names and ZL in contenders and "uvloop" in contenders:
        z = cells[("seed_callbacks", ZL)].get("peak_rss_mib")
        u = cells[("seed_callbacks", "uvloop")].get("peak_rss_mib")
        if z and u:
            r = z["median"] / u["median"]
            add(
                f"RSS target (zloopgo's peak RSS with the callbacks queued <= uvloop's): "
                f"{r:.2f}x, {'met' if r <= 1.0 else 'not met'}."
            )
            add("")
    if "seed_tcp" in names:
        st_info = table.get("strace") or {}
        add(
            "Diagnostics per TCP round trip (client and server together, one process; not "
            "timed figures): context switches = voluntary + involuntary (getrusage "
            "ru_nvcsw + ru_nivcsw of the whole process over the measured part, median of the "
            "measured samples); CPU = user + system time over the measured part; system calls"
            + (
                f" from `{st_info['how']}`: one extra untimed sample of "
                f"{st_info.get('size', 0):,} round trips minus one of 0, divided by "
                f"{st_info.get('size', 0):,}"
                if st_info.get("how", "").startswith("strace")
                else (f": {st_info['how']}" if st_info.get("how") else ": not measured here")
            )
            + "."
        )
        add("")
        rows = []
        for loop in contenders:
            st = cells[("seed_tcp", loop)]
            sc = st_info.get(f"seed_tcp/{loop}") or {}
            calls = f"{sc['per_op']:.1f}" if "per_op" in sc else ("—" if not sc else "failed")
            csw = _diag(st, "csw_per_op", "{:.2f}")
            rows.append([loop, csw, _diag(st, "cpu_us_per_op", "{:.1f}"), calls])
        head = ["contender", "context switches / RTT", "CPU µs / RTT", "system calls / RTT"]
        for line in tables.table(head, rows):
            add(line)


def span_extras(add, table, cells, contenders, results):
    names = table["workloads"]
    for name, base in LOSS_BASE.items():
        if name in names and base in names:
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
    floor = cell_stats([s for s in table["samples"] if s["loop"] == FLOOR_LOOP])
    if not table.get("floor"):
        return
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


def busy(add, table, provenance):
    loads = [x for x in table.get("round_load1", []) if x is not None]
    cores = provenance.get("cpu_count") or 1
    if loads and max(loads) > 1 + 0.25 * cores:  # this run itself keeps about 1 busy
        add(
            f"**Warning: the machine was busy.** The 1-minute load average, read at each "
            f"round's start, ranged {min(loads):.2f}–{max(loads):.2f} on {cores} cores "
            "(this run adds about 1). Absolute times are inflated "
            "and noisy; read the ratios and the CoV."
        )
        add("")


def absent_lines(results, provenance):
    """Peers that are not contenders, with the reason: the install's (pip's
    message, shortened) when it failed, else the probe's."""
    installs = provenance.get("installs") or {}
    out = []
    for loop, p in results["probes"].items():
        if loop in results["contenders"]:
            continue
        why = installs.get(loop)
        if why and why != "ok":
            out.append(f"**{loop}**: not installed ({why})")
            continue
        last = (p.get("stderr") or "").strip().splitlines()[-1:] or ["no message"]
        out.append(f"**{loop}**: probe {p['status']} ({last[0][:200]})")
    return out


def _exit_text(rc):
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def provenance_lines(results, prov):
    cfg = results["config"]
    table_lines = "; ".join(
        f"{t['id']}: pin {t.get('pin') or 'none'}, warm-up {t['warmup']}, rounds "
        + ", ".join(f"{k} {v}" for k, v in t["rounds"].items())
        for t in results["tables"]
    )
    out = [
        (
            "date (UTC)",
            datetime.datetime.fromtimestamp(results["started"], datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M:%S"
            ),
        ),
        ("git commit", prov.get("git", "unknown")),
        ("zloopgo measured", prov.get("zloopgo_source", "the checkout")),
        *tables.machine(prov),
        (
            "loop classes",
            ", ".join(
                f"{k}={p['payload']['class']}"
                for k, p in results["probes"].items()
                if p.get("payload")
            ),
        ),
        ("sizes", ", ".join(f"{k}={v:,}" for k, v in cfg["sizes"].items())),
        ("tables", table_lines),
        ("timeout", f"{cfg['timeout']:g} s per sample"),
        ("load average at start / end", f"{prov.get('loadavg_start')} / {prov.get('loadavg_end')}"),
        (
            "1-min load at each round's start",
            "; ".join(
                f"{t['id']}: " + " ".join(f"{x:.2f}" for x in t["round_load1"] if x is not None)
                for t in results["tables"]
            ),
        ),
        ("harness wall time", f"{results['elapsed']:.0f} s"),
    ]
    return out
