"""Compares the observations of one program on two loops: the first entry
where they differ, a readable account of it, and a short signature that
names the kind of difference (so that a search can tell one bug from
another, and count how many programs it took to meet each).

KNOWN maps the bugs of issue 19 that this test must find to a predicate on
a difference; the signatures of anything else are reported as they are.
"""

import json

CONTEXT = 8


class Difference:
    """Where observations `ref` (the reference loop) and `other` part."""

    def __init__(self, ref, other, index, names=("asyncio", "zloopgo")):
        self.ref = ref
        self.other = other
        self.index = index
        self.names = names
        self.a = ref[index] if index < len(ref) else None
        self.b = other[index] if index < len(other) else None

    @property
    def step(self):
        """The step the difference is in (None: before the first step)."""
        for entry in reversed(self.ref[: self.index]):
            if entry[0] == "step":
                return entry[1]
            if entry[0] in ("end", "teardown"):
                return entry[0]
        return None

    @property
    def signature(self):
        a, b = label(self.a), label(self.b)
        return a if a == b else f"{a} | {b}"

    def describe(self, notes=None):
        lo = max(0, self.index - CONTEXT)
        lines = [
            f"first difference at observation {self.index} (step {self.step}): {self.signature}",
            f"  {self.names[0]}: {json.dumps(self.a)}",
            f"  {self.names[1]}: {json.dumps(self.b)}",
            "  before it (both):",
        ]
        lines += [f"    {json.dumps(e)}" for e in self.ref[lo : self.index]]
        for name, obs in zip(self.names, (self.ref, self.other), strict=True):
            lines.append(f"  {name} after it:")
            lines += [f"    {json.dumps(e)}" for e in obs[self.index : self.index + CONTEXT]]
        for name, n in zip(self.names, notes or (), strict=False):
            if n.get("stderr"):
                lines.append(f"  {name} stderr:\n" + n["stderr"])
            if n.get("traceback"):
                lines.append(f"  {name} harness traceback:\n" + n["traceback"])
        return "\n".join(lines)


def first_difference(ref, other, names=("asyncio", "zloopgo")):
    """The Difference between two observation lists, or None."""
    for i, (a, b) in enumerate(zip(ref, other, strict=False)):  # lengths compared below
        if a != b:
            return Difference(ref, other, i, names)
    if len(ref) != len(other):
        return Difference(ref, other, min(len(ref), len(other)), names)
    return None


def label(entry):
    """What kind of observation an entry is, without its values."""
    if entry is None:
        return "(nothing)"
    kind = entry[0]
    if kind == "op":
        text = f"op {entry[1]}"
        if len(entry) > 3 and entry[3] == "!":
            text += f" raises {entry[4]}"
        return text
    if kind in ("cb", "peer"):
        return f"{kind} {entry[2]}"
    if kind == "handler":
        msg = str(entry[1])
        if msg.startswith("Exception in callback"):
            msg = "Exception in callback"  # then the callback's repr
        return f"handler {msg!r}"
    # a signature is a dict key: an entry whose kind is not a word (a
    # machine's list-shaped observation) is named by its JSON
    return kind if isinstance(kind, str) else json.dumps(kind)


def _stream_bytes(entry):
    return int(entry[2].split(":", 1)[0]) if entry and entry[0] == "stream" else 0


def _send_error_seen(entry):
    """An observation that a send failed, right then."""
    if entry is None:
        return False
    text = json.dumps(entry)
    if entry[0] in ("log", "handler"):
        return "Fatal write error" in text
    if entry[:2] == ["op", "is_closing"]:
        return entry[-1] == "True"
    if entry[:2] == ["op", "drain"]:
        return len(entry) > 3 and entry[3] == "!"
    return False


# The bugs of issue 19's table this test must find (the others are not
# transport observations). Each takes a Difference (reference first).
KNOWN = {
    # a crash while flushing held writes re-entered from a logging handler
    "1": lambda d: d.b is not None and d.b[0] == "crash",
    # a callback that writes then raises: the peer does not get the bytes
    "3": lambda d: (
        d.a is not None
        and d.a[0] == "stream"
        and (d.b is None or d.b[0] != "stream" or _stream_bytes(d.b) < _stream_bytes(d.a))
        and any(e[0] in ("handler", "op") and "raise" in json.dumps(e) for e in d.ref[: d.index])
    ),
    # a send error is seen only when the callback returns: right after a
    # write to a reset peer asyncio has logged or reported it (is_closing()
    # True, drain() raises); zloopgo's callback goes on as if it had not
    "4": lambda d: _send_error_seen(d.a) and not _send_error_seen(d.b),
    # set_write_buffer_limits(high=<float>) then write(): TypeError
    "6": lambda d: (
        d.b is not None
        and d.b[0] == "op"
        and d.b[1] in ("write", "writelines")
        and len(d.b) > 4
        and d.b[3:5] == ["!", "TypeError"]
        and (d.a is None or "TypeError" not in d.a)
    ),
}


def known_bugs(diff):
    """The numbers of the issue's bugs that `diff` shows."""
    return [n for n, pred in KNOWN.items() if pred(diff)]
