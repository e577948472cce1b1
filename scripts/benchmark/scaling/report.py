"""The scaling part's report: per row (echo, HTTP) a table of every
arrangement with requests/s for 1 and 2 servers, their ratio and the
bound that the shared cores put on it, server CPU per request, the
generator's CPU per request and the whole server's peak RSS; where
zloopgo in interpreters stands; every cell's median, min, max and CoV;
the failures (a refusal to load is one), grouped. It knows the samples'
fields (bench.py's run_sample), not how they were made.
"""

import collections
import os

from .. import tables

ROW_TITLES = {
    "echo": "Echo (asyncio.Protocol, 1 KiB, bench_uvloop/loadgen)",
    "http": "HTTP/1.1 keep-alive (asyncio.Protocol + h11, `GET /json`, apps/load)",
}
FIGURES = (
    ("rate", "req/s", "{:,.0f}"),
    ("server_cpu_us", "server CPU µs/req", "{:.1f}"),
    ("client_cpu_us", "generator CPU µs/req", "{:.1f}"),
    ("peak_rss_mib", "peak RSS MiB", "{:.1f}"),
)


def label(arrangement, loop):
    return f"{loop} in {'interpreters' if arrangement == 'interp' else 'processes'}"


def measured(samples, row, arrangement, loop, servers):
    key = (row, arrangement, loop, servers)
    return [
        s
        for s in samples
        if s["round"] != "warm-up" and (s["row"], s["arrangement"], s["loop"], s["servers"]) == key
    ]


def median(cell, key):
    st = tables.summarize([s[key] for s in cell if s["status"] == "ok" and key in s])
    return st["median"] if st else None


def cell_text(cell, key, fmt):
    """The median with a failed-samples note; with no accepted sample, the
    failure (e.g. "refused") when every sample failed the same way."""
    value = median(cell, key)
    if value is not None:
        return fmt.format(value) + tables.failed_note(cell)
    statuses = sorted({s["status"] for s in cell})
    return statuses[0] if len(statuses) == 1 else "/".join(statuses) if statuses else "—"


def ratio(two, one):
    return two / one if two and one else None


def bound(server1, client1, server2, client2):
    """The highest 2/1 ratio of requests/s two otherwise idle CPUs allow,
    from CPU times per request: with one server, server and generator
    each have a CPU, so at best 1/max(server1, client1) requests/s; with
    two, both servers and the generator share both CPUs, so at best
    2/(server2 + client2). None without the four figures."""
    if not (server1 and client1 is not None and server2 and client2 is not None):
        return None
    return 2 * max(server1, client1) / (server2 + client2)


def busy(rate, server_cpu_us):
    """The share of its CPU one server used: 1.0 is saturated, so below
    it the 1-server rate was held down by something else (the generator,
    latency, other work on a shared machine) and bound() does not hold."""
    return rate * server_cpu_us / 1e6 if rate and server_cpu_us else None


def fmt_x(r):
    return "—" if r is None else f"{r:.2f}x"


def fmt_share(r):
    return "—" if r is None else f"{r:.2f}"


def standing(samples, row, cells):
    """Sentences on where zloopgo in interpreters stands with 2 servers."""
    rates = {c: median(measured(samples, row, *c, 2), "rate") for c in cells}
    ranked = sorted((c for c in cells if rates[c]), key=lambda c: -rates[c])
    out = []
    if ranked:
        first = ranked[0]
        out.append(f"First with 2 servers: {label(*first)} ({rates[first]:,.0f} req/s).")
    zl = ("interp", "zloopgo")
    if zl not in cells:
        return out
    if not rates.get(zl):
        cell = measured(samples, row, *zl, 2)
        details = sorted({s.get("detail", "") for s in cell if s["status"] != "ok"})
        why = f": {details[0]}" if len(details) == 1 else ""
        out.append(f"zloopgo in interpreters: {cell_text(cell, 'rate', '{}')}{why}.")
        return out
    place = ranked.index(zl) + 1
    rss = median(measured(samples, row, *zl, 2), "peak_rss_mib")
    against = []
    for c in ranked:
        other = median(measured(samples, row, *c, 2), "peak_rss_mib")
        if c[0] == "proc" and rss and other:
            against.append(f"{c[1]} {rss / other:.2f}")
    out.append(
        f"zloopgo in interpreters: {place} of {len(ranked)} with 2 servers"
        + (f"; its peak RSS / 2 processes' of: {', '.join(against)}" if against else "")
        + "."
    )
    return out


def split(samples, row):
    """A sentence on how SO_REUSEPORT spread the connections between 2
    servers: the smaller share in the accepted samples of the row."""
    smaller = sorted(
        min(s["connections"])
        for s in samples
        if s["row"] == row and s["servers"] == 2 and s["status"] == "ok" and s.get("connections")
    )
    if not smaller:
        return []
    total = sum(next(s["connections"] for s in samples if s.get("connections") and s["row"] == row))
    mid = smaller[len(smaller) // 2]
    return [
        f"SO_REUSEPORT's split of the {total} connections between 2 servers: the smaller "
        f"share was {smaller[0]}–{smaller[-1]} (median {mid}) over {len(smaller)} samples."
    ]


def grouped_failures(samples):
    """(label values, status, detail) of the failed samples, one per kind,
    the detail prefixed with how many samples failed so."""
    count = collections.Counter(
        (
            s["row"],
            label(s["arrangement"], s["loop"]),
            str(s["servers"]),
            s["status"],
            s.get("detail", ""),
        )
        for s in samples
        if s["status"] != "ok"
    )
    return [
        ((row, lab, n), status, f"{k} sample(s): {detail}")
        for (row, lab, n, status, detail), k in count.items()
    ]


def every_figure(key, value):
    """A value of the every-cell table, formatted as its figure (key[2])."""
    return next(fmt for _, name, fmt in FIGURES if name == key[2]).format(value)


def render(opts, cells, samples, absent):
    h = opts.heading
    lines = []
    add = lines.append
    add(f"{h} Scaling: one loop per interpreter against one loop per process, 1 and 2 servers")
    add("")
    pins = (
        f"with 1 server, the server on CPU {opts.pin_server[-1]} and the generator on CPU "
        f"{opts.pin_client[-1]}; with 2 servers, nothing pinned: both servers and the "
        "generator share both CPUs"
        if opts.pin_server
        else "nothing pinned (fewer than 2 CPUs or no taskset)"
    )
    add(
        "Each server is one event loop on a thread of its own serving a socket of its own "
        "bound to one port with SO_REUSEPORT: in interpreters, one process with one "
        "`concurrent.interpreters` interpreter (its own GIL) per server; in processes, one "
        f"process per server. {opts.conns} connections, one request in flight on each, "
        f"{opts.duration:g} s per sample (HTTP after {opts.warmup:g} s of warm-up); {pins}. "
        f"A fresh server per sample; {opts.rounds} rounds, the arrangements rotated. Every "
        "answer is checked by the generator (echo: every byte; HTTP: status 200 and the "
        "JSON body) and the servers' own counts must agree with it."
    )
    add("")
    add(
        "Server CPU per request: user + system time of every server process (every thread) "
        "over the generator's run, over the requests the servers counted; it shows scaling "
        "apart from the cores the generator takes. Bound of 2/1: the ratio two otherwise "
        "idle CPUs allow, 2 × max(server CPU(1), generator CPU(1)) / (server CPU(2) + "
        "generator CPU(2)) per request (one server and the generator each have a CPU; two "
        "servers and the generator share both); a 2/1 ratio near its bound is the "
        "machine's limit, not the loop's. It holds when the one server saturated its CPU: "
        "CPU busy ×1 is the share of its CPU it used (requests/s × CPU per request), and "
        "below 1 the 1-server rate was held down by something else (latency, the "
        "generator, other work on the machine). Peak RSS: VmHWM of every server process, "
        "summed."
    )
    if absent:
        add("")
        add("Not measured: " + "; ".join(f"**{k}**: {v}" for k, v in absent.items()) + ".")
    add("")
    for row in opts.rows:
        add(f"{h}# {ROW_TITLES[row]}")
        add("")
        head = ["arrangement", "req/s ×1", "req/s ×2", "2/1", "bound of 2/1", "CPU busy ×1"]
        head += ["server CPU µs/req ×1", "×2", "generator CPU µs/req ×1", "×2"]
        head += ["peak RSS MiB ×1", "×2"]
        rows = []
        for c in cells:
            one, two = (measured(samples, row, *c, n) for n in (1, 2))
            rows.append(
                [
                    label(*c),
                    cell_text(one, "rate", "{:,.0f}"),
                    cell_text(two, "rate", "{:,.0f}"),
                    fmt_x(ratio(median(two, "rate"), median(one, "rate"))),
                    fmt_x(
                        bound(
                            median(one, "server_cpu_us"),
                            median(one, "client_cpu_us"),
                            median(two, "server_cpu_us"),
                            median(two, "client_cpu_us"),
                        )
                    ),
                    fmt_share(busy(median(one, "rate"), median(one, "server_cpu_us"))),
                    cell_text(one, "server_cpu_us", "{:.1f}"),
                    cell_text(two, "server_cpu_us", "{:.1f}"),
                    cell_text(one, "client_cpu_us", "{:.1f}"),
                    cell_text(two, "client_cpu_us", "{:.1f}"),
                    cell_text(one, "peak_rss_mib", "{:.1f}"),
                    cell_text(two, "peak_rss_mib", "{:.1f}"),
                ]
            )
        lines.extend(tables.table(head, rows))
        lines.extend(standing(samples, row, cells) + split(samples, row) + [""])
        add("Every cell: median, min, max, CoV:")
        add("")
        every = []
        for c in cells:
            for n in (1, 2):
                cell = measured(samples, row, *c, n)
                for key, name, _ in FIGURES:
                    values = [s[key] for s in cell if s["status"] == "ok" and key in s]
                    every.append(((label(*c), str(n), name), cell, values))
        lines.extend(
            tables.every_cell(
                ["arrangement", "servers", "figure"],
                every,
                every_figure,
            )
        )
    failed = grouped_failures(samples)
    if failed:
        add("Failures (a refusal to load is one), grouped:")
        add("")
    lines.extend(tables.failures(["row", "arrangement", "servers"], failed, "Failures: none."))
    vers = ", ".join(f"{k} {v or 'not installed'}" for k, v in opts.versions.items())
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    add(
        f"Provenance: {vers}; load average at the start {opts.load_start}, at the end "
        f"{load}; {opts.elapsed:.0f} s."
    )
    add("")
    return "\n".join(lines)
