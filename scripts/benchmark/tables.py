"""What every report of scripts/bench shares (the harness's tables, the
echo matrices of bench_uvloop/run.py, the HTTP rows): the statistics of a
cell of samples, ratios of zloopgo against a peer, and the Markdown pieces
built from them (a table, the every-cell table, the failures, the
machine's provenance).

It knows the samples' status field ("ok" or the failure) and nothing of
what a workload, a client or a server is: each report says which samples
make a cell and how to print a figure.
"""

import statistics

ZL = "zloopgo"


def summarize(values):
    """n, median, min, max and the coefficient of variation (sample stdev
    / mean) of a cell's values, or None for no values."""
    if not values:
        return None
    mean = statistics.fmean(values)
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "cov": statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0,
    }


def peers_of(contenders):
    """The contenders zloopgo is compared with (none if zloopgo is absent)."""
    return [c for c in contenders if c != ZL] if ZL in contenders else []


def versus(zl, other, higher_is_better):
    """zloopgo against `other` (two medians): > 1 means zloopgo is better."""
    if not zl or not other:
        return None
    return zl / other if higher_is_better else other / zl


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}x"


def failed_note(samples):
    """' (k/n failed)' for a cell with failed samples, else ''."""
    bad = sum(1 for s in samples if s["status"] != "ok")
    return f" ({bad}/{len(samples)} failed)" if bad else ""


def table(head, rows, labels=1, align=None):
    """A Markdown table: its first `labels` columns are left-aligned text,
    the others right-aligned figures, unless align spells each column's
    alignment ("l" or "r")."""
    align = align or "l" * labels + "r" * (len(head) - labels)
    sep = [" --- " if a == "l" else " ---: " for a in align]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(sep) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out + [""]


def every_cell(labels, cells, fmt):
    """The every-cell table: for each (label values, samples, values) one
    row of how many samples were accepted and the median, min, max and CoV
    of their values, each printed as fmt(label values, value)."""
    rows = []
    for key, samples, values in cells:
        st = summarize(values)
        figures = (
            [fmt(key, st[k]) for k in ("median", "min", "max")] + [f"{st['cov'] * 100:.1f}%"]
            if st
            else ["—"] * 4
        )
        rows.append([*key, f"{st['n'] if st else 0}/{len(samples)}", *figures])
    return table([*labels, "ok", "median", "min", "max", "CoV"], rows, labels=len(labels))


def failures(labels, bad, none):
    """The failures table: one row per failed sample, given as (label
    values, status, detail); `none` is the sentence when there is none."""
    if not bad:
        return [none, ""]
    rows = [
        [*key, status, (detail or "").replace("|", "/").replace("\n", " ")[:200]]
        for key, status, detail in bad
    ]
    return table([*labels, "status", "detail"], rows, labels=len(labels) + 2)


def machine(prov):
    """(key, value) provenance lines of the interpreter and the machine,
    from the worker's --provenance (python -m benchmark.worker)."""
    bi = prov.get("zloopgo_build_info", {})
    packages = prov.get("packages", {})
    return [
        ("Python", f"{prov.get('python')} ({prov.get('python_executable')})"),
        ("packages", ", ".join(f"{k} {v or 'not installed'}" for k, v in packages.items())),
        ("OS / kernel", f"{prov.get('platform')} / {prov.get('kernel')}"),
        (
            "CPU",
            f"{bi.get('cpu_brand', '?')} ({bi.get('cpu_vendor', '?')}), "
            f"{bi.get('physical_cores', '?')} physical / {bi.get('logical_cores', '?')} "
            f"logical cores, L1d {bi.get('cache_l1d', '?')} B, L2 {bi.get('cache_l2', '?')} "
            f"B, L3 {bi.get('cache_l3', '?')} B",
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
            f"enabled={prov.get('gc_enabled_default')}, thresholds "
            f"{tuple(prov.get('gc_threshold', ()))}",
        ),
    ]
