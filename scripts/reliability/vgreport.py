"""Summarise a valgrind memcheck log of a zloopgo run.

Usage: python vgreport.py LOG [CAPI_DIR]

Splits the log into error and leak records and sorts each record by who it
points at: the C adapter (a frame in a function defined in capi/*.c), the
Go runtime or the rest (CPython, libc, extension modules). Prints a
Markdown summary, every adapter record in full, and exits 1 when the
adapter has an error or a definitely lost block.
"""

import pathlib
import re
import sys
from collections import Counter

FRAME = re.compile(r"^==\d+==\s+(?:at|by) 0x[0-9A-Fa-f]+: (\S+)")
HEAD = re.compile(r"^==\d+== (\S.*)$")
CFUNC = re.compile(r"^[A-Za-z_][\w \*]*?\b([A-Za-z_]\w*)\s*\([^;]*$", re.MULTILINE)


def capi_functions(capi_dir):
    names = set()
    for path in pathlib.Path(capi_dir).glob("*.c"):
        for m in CFUNC.finditer(path.read_text()):
            if m.group(1) not in {"if", "for", "while", "switch", "return", "sizeof"}:
                names.add(m.group(1))
    return names


def records(lines):
    """Yields (headline, frames, text) for each error or leak record."""
    cur = None
    for line in lines:
        body = line.split("== ", 1)[1] if "== " in line else ""
        if not body.strip():
            if cur and cur[1]:
                yield cur[0], cur[1], "\n".join(cur[2])
            cur = None
            continue
        m = FRAME.match(line)
        if m and cur is not None:
            cur[1].append(m.group(1))
            cur[2].append(line)
            continue
        h = HEAD.match(line)
        if h and not body.startswith(" "):
            if cur and cur[1]:
                yield cur[0], cur[1], "\n".join(cur[2])
            cur = [h.group(1), [], [line]]
        elif cur is not None:
            cur[2].append(line)
    if cur and cur[1]:
        yield cur[0], cur[1], "\n".join(cur[2])


def owner(frames, capi):
    base = [f.split(".constprop")[0].split(".isra")[0].split(".part")[0] for f in frames]
    if any(f in capi for f in base):
        return "adapter (capi/*.c)"
    if "." in frames[0] and not frames[0].startswith("0x"):
        return "Go runtime"
    return "CPython / libc / other"


def main():
    log = pathlib.Path(sys.argv[1]).read_text(errors="replace").splitlines()
    capi_dir = sys.argv[2] if len(sys.argv) > 2 else pathlib.Path(__file__).parents[2] / "capi"
    capi = capi_functions(capi_dir)
    kinds = Counter()
    adapter = []
    for head, frames, text in records(log):
        if "lost in loss record" in head:
            kind = head.split(" lost in")[0].split(" are ")[-1]
            if "definitely" not in kind:
                continue
            kind = "definitely lost"
        else:
            kind = re.sub(r"\s*\(.*", "", head)
            kind = re.sub(r" of size \d+", "", kind)
        who = owner(frames, capi)
        kinds[(kind, who)] += 1
        if who.startswith("adapter"):
            adapter.append(text)
    summary = [line.split("== ", 1)[1] for line in log if "definitely lost:" in line]
    print("| record | attributed to | count |")
    print("| --- | --- | --- |")
    for (kind, who), n in sorted(kinds.items()):
        print(f"| {kind} | {who} | {n} |")
    if not kinds:
        print("| (none) | | 0 |")
    if summary:
        print(f"\nvalgrind's leak summary: {summary[-1].strip()}")
    for text in adapter:
        print("\n```\n" + text + "\n```")
    return 1 if adapter else 0


if __name__ == "__main__":
    sys.exit(main())
