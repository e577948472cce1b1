"""The bugs of issue 39's table that the hostile machines must find, each
as (machine, predicate on a confirmed difference and its program): what
`python -m tests.hostile --hunt` counts programs for.

A predicate looks at the first difference (reference asyncio first,
zloopgo second) and at the step of the program it is in.
"""


def _since_step(obs, index):
    """The observations from the last ["step", i] before index."""
    start = 0
    for i in range(min(index, len(obs)) - 1, -1, -1):
        if obs[i][0] == "step":
            start = i
            break
    return obs[start:index]


def _crash_index(diff):
    """Where zloopgo's worker crashed or hung (the last observation, after
    what its journal held), or None. A crash counts wherever it comes:
    an earlier difference (the handler's context, on this build) must not
    hide it."""
    ended = ("crash", "hang")
    if diff.other and diff.other[-1][0] in ended and not (diff.ref and diff.ref[-1][0] in ended):
        return len(diff.other) - 1
    return None


def _canary(diff, kinds):
    """zloopgo's observations hold a canary violation of one of kinds
    that asyncio's do not."""
    ours = [e for e in diff.other if e[0] == "canary" and e[1] in kinds]
    return bool(ours) and not any(e[0] == "canary" for e in diff.ref)


def bug1_datagram_on_a_freed_number(diff, program):
    # a datagram sent after the transport closed itself reached a canary
    # (or was sent at all: asyncio raised)
    if _canary(diff, ("stream", "pipe", "file")):
        return True
    a, b = diff.a, diff.b
    # asyncio's sendto fails on the missing socket (AttributeError); the
    # native one sends, or fails otherwise (on 3.14: error_received on a
    # protocol already gone)
    return (
        a is not None
        and b is not None
        and a[:2] == b[:2] == ["op", "sendto"]
        and "AttributeError" in a
        and a != b
    )


def bug2_file_op_after_close(diff, program):
    return _canary(diff, ("file",))


def _task_steps(diff, program):
    """The steps ("call", "start", "timeout") of the files machine's tasks
    whose outcomes differ in a differing ["done", ...] entry."""
    if not (diff.a and diff.b and diff.a[0] == diff.b[0] == "done"):
        return []
    ours, theirs = dict(map(tuple, diff.a[1])), dict(map(tuple, diff.b[1]))
    numbers = {k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k)}
    return [
        s
        for s in program.get("steps", [])
        if s[0] in ("call", "start", "timeout") and s[1] in numbers
    ]


def _negative(value):
    return isinstance(value, int) and not isinstance(value, bool) and value < 0


def bug3_pread_pwrite_offsets(diff, program):
    # pread/pwrite with a negative offset or size, or pread on a file
    # opened for writing only (row 3's cases; an offset too large for
    # off_t is another message, not counted here)
    files = program.get("files", [])
    for s in _task_steps(diff, program):
        method, args = s[3], s[4]
        if method not in ("pread", "pwrite"):
            continue
        write_only = "r" not in files[s[2]]["mode"] and "+" not in files[s[2]]["mode"]
        if any(_negative(a) for a in args) or (method == "pread" and write_only):
            return True
    return False


def _crash_step(diff, program):
    """(the program step the crash came in, the observations of that step
    up to the crash), or (None, None)."""
    at = _crash_index(diff)
    if at is None:
        return None, None
    recent = _since_step(diff.other, at)
    step = None
    if recent and recent[0][0] == "step" and recent[0][1] < len(program.get("steps", [])):
        step = program["steps"][recent[0][1]]
    return step, recent


def bug4_nested_run(diff, program):
    # a crash after a nested _run() of a handle in that step
    _, recent = _crash_step(diff, program)
    if recent is None:
        return False
    return any(e[:2] in (["act", "run"], ["op", "run"]) for e in recent)


def bug5_eq_after_free(diff, program):
    # a crash in a comparison of timer handles whose callback's __eq__ ran
    step, recent = _crash_step(diff, program)
    if recent is None:
        return False
    compared = step is not None and step[0] in ("cmp", "list")
    compared = compared or any(e[:2] in (["op", "cmp"], ["op", "list"]) for e in recent)
    nested = any(e[:2] in (["act", "run"], ["op", "run"]) for e in recent)
    return compared and not nested and any(e[0] == "trap" and e[2] == "__eq__" for e in recent)


def bug6_handler_outside_except(diff, program):
    a, b = diff.a, diff.b
    if a is None or b is None or a[0] != b[0]:
        return False
    if a[:2] == b[:2] == ["act", "exc_info"]:
        # a trap's __repr__ run while the handler's message is made
        return a[2] is not None and b[2] is None
    if a[0] == "handler":
        # the probe (hostile.handler.probe) is the entry's last item
        return a[:-1] == b[:-1] and a[-1] != b[-1]
    if a[0] == "log":  # the exception the handler raised: its __context__
        return a[:5] == b[:5] and a[5] != b[5]
    return False


def bug7_text_mode(diff, program):
    # a call on a file opened in text mode
    files = program.get("files", [])
    return any("b" not in files[s[2]]["mode"] for s in _task_steps(diff, program))


KNOWN = {
    "1": ("datagram", bug1_datagram_on_a_freed_number),
    "2": ("files", bug2_file_op_after_close),
    "3": ("files", bug3_pread_pwrite_offsets),
    "4": ("handles", bug4_nested_run),
    "5": ("handles", bug5_eq_after_free),
    "6": ("handles", bug6_handler_outside_except),
    "7": ("files", bug7_text_mode),
}


def which(diff, program):
    """The numbers of the bugs whose machine ran program and whose
    predicate takes diff."""
    return [
        n
        for n, (machine, pred) in KNOWN.items()
        if (machine == program.get("machine") or n == "6") and pred(diff, program)
    ]
