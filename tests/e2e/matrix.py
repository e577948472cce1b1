"""Prints the end-to-end matrix from pytest's JUnit XML reports (one per
Python, as scripts/e2e writes them): a Markdown table with a row per case
and a column per Python and loop, each cell passed, FAILED or skipped (with
the reason), then every case whose result differs between asyncio and
zloopgo. Exit status 1 if any case failed or the loops differ.

usage: python matrix.py [--out FILE] LABEL=junit.xml ..."""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET

LOOPS = ("asyncio", "zloopgo")


def outcome(case: ET.Element) -> str:
    for tag, word in (("failure", "FAILED"), ("error", "ERROR")):
        element = case.find(tag)
        if element is not None:
            first = (element.get("message") or "").splitlines()[:1]
            return f"{word}: {first[0][:80]}" if first else word
    skipped = case.find("skipped")
    if skipped is not None:
        reason = (skipped.get("message") or "").removeprefix("Skipped: ")
        return f"skipped: {reason}"
    return "passed"


def split_id(classname: str, name: str) -> tuple[str, str]:
    """('asgi_servers: keep_alive [uvicorn-h11]', 'zloopgo') from the
    JUnit names of test_e2e_asgi_servers.py::test_keep_alive[zloopgo-uvicorn-h11]."""
    module = classname.rsplit(".", 1)[-1].removeprefix("test_e2e_").removeprefix("test_")
    match = re.fullmatch(r"(\w+?)(?:\[(.*)\])?", name)
    assert match, name
    function, params = match.group(1).removeprefix("test_"), match.group(2) or ""
    loop = ""
    rest = []
    for part in params.split("-") if params else []:
        if part in LOOPS and not loop:
            loop = part
        else:
            rest.append(part)
    label = f"{module}: {function}" + (f" [{'-'.join(rest)}]" if rest else "")
    return label, loop or "-"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("reports", nargs="+", metavar="LABEL=junit.xml")
    args = parser.parse_args()

    labels: list[str] = []
    cells: dict[tuple[str, str, str], str] = {}
    rows: list[str] = []
    counts: dict[str, int] = {}
    for report in args.reports:
        label, _, path = report.partition("=")
        labels.append(label)
        try:
            cases = list(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError) as exc:
            # pytest ended before writing its report: a failure of the run.
            row = "pytest run"
            if row not in rows:
                rows.append(row)
            counts["ERROR"] = counts.get("ERROR", 0) + 1
            for each in LOOPS:
                cells[(row, label, each)] = f"ERROR: no JUnit report ({exc})"
            continue
        for case in cases:
            row, loop = split_id(case.get("classname", ""), case.get("name", ""))
            result = outcome(case)
            counts[result.split(":")[0]] = counts.get(result.split(":")[0], 0) + 1
            if row not in rows:
                rows.append(row)
            # A case that takes no loop (the package check) fills both columns.
            for each in LOOPS if loop == "-" else (loop,):
                cells[(row, label, each)] = result
    columns = [(label, loop) for label in labels for loop in LOOPS]

    lines = [
        "| case | " + " | ".join(f"{label} {loop}" for label, loop in columns) + " |",
        "| --- |" + " --- |" * len(columns),
    ]
    for row in rows:
        lines.append(
            f"| {row} | "
            + " | ".join(cells.get((row, label, loop), "—") for label, loop in columns)
            + " |"
        )
    lines.append("")
    total = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    lines.append(f"tests: {total or 'none ran'} ({', '.join(labels)})")

    differences = []
    for row in rows:
        for label in labels:
            got = {loop: cells.get((row, label, loop)) for loop in LOOPS}
            if None not in got.values() and got["asyncio"] != got["zloopgo"]:
                differences.append(
                    f"- {label}, {row}: asyncio {got['asyncio']}; zloopgo {got['zloopgo']}"
                )
    lines.append("")
    if differences:
        lines.append("asyncio and zloopgo differ:")
        lines.extend(differences)
    else:
        lines.append("asyncio and zloopgo give the same result in every case.")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    failed = any(v.startswith(("FAILED", "ERROR")) for v in cells.values())
    return 1 if failed or differences else 0


if __name__ == "__main__":
    sys.exit(main())
