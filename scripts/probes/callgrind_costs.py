"""Callgrind's output format read into each function's own instructions,
by the object, source file and function callgrind names for it: what
probes/instructions.py (--split) and probes/perrequest_functions.py add
up. Read from the file itself rather than from `callgrind_annotate`'s
listing, which prints code inlined from another file under that file's
name without its object, so a part chosen by object lost it (asyncpg's
C on the 20-query rows, some of the Go engine). It knows nothing of
which object is which part.
"""

import re


def own_costs(text):
    """{(object, file, function): own instructions} of a callgrind output
    file's text: every cost line added to the function it stands in,
    except the line after calls=, which is the call's inclusive cost.
    Names may be compressed ("(12) name" once, then "(12)"), with one
    table each for objects, files and functions."""
    tables = {"ob": {}, "fl": {}, "fn": {}}
    kinds = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl"}
    kinds.update({"cfl": "fl", "fn": "fn", "cfn": "fn"})
    current = {"ob": "", "fl": "", "fn": ""}
    events_at = 1  # the cost's column: after the positions (one, "line", by default)
    costs = {}
    skip_next = False

    def name(kind, spec):
        m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
        if m is None:
            return spec
        if m.group(2) is not None:
            tables[kind][m.group(1)] = m.group(2)
        return tables[kind].get(m.group(1), spec)

    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and key in kinds:
            got = name(kinds[key], value)
            if key in ("ob", "fl", "fn"):
                current[key] = got
            continue
        if line.startswith("positions:"):
            events_at = len(line.split()) - 1
        elif line.startswith("calls="):
            skip_next = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            if skip_next:
                skip_next = False
                continue
            cols = line.split()
            if len(cols) > events_at:
                where = (current["ob"], current["fl"], current["fn"])
                costs[where] = costs.get(where, 0) + int(cols[events_at])
    return costs
