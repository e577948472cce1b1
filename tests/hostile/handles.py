"""The handles machine: call_soon, call_soon_threadsafe (from the loop's
thread and from another), call_later and call_at with hostile callbacks
and arguments (vocab), then what a program does with the handles: cancel,
a direct or nested _run, comparisons, list.remove / in / index / count
(TimerHandle.__eq__ compares callbacks and arguments), sorted, hash,
when, repr; loop iterations, collections, debug mode.

A program (JSON):

    {"machine": "handles", "debug": bool, "handler": handler mode,
     "canary": [kind, ...], "steps": [step, ...]}

Steps (each followed by settling the loop and recording every known
handle's cancelled()):

    ["schedule", how, callback, [arg, ...], slot]
        how: call_soon, call_soon_threadsafe, thread (call_soon_threadsafe
        from another thread, joined), call_later, call_at; a timer's
        deadline by slot: "same" (call_at only: all such timers share one
        deadline an hour away, so comparisons reach the callbacks), ["due", n] (already
        due, in order of n: no two timers of a program share a deadline,
        so the order of equal deadlines, a kept difference, never shows),
        ["far", n] (an hour away, distinct)
    ["cancel", k]  ["run", k]  ["cancelled", k]  ["hash", k]  ["when", k]
    ["repr", k]  ["drop", k] (the program forgets handle k: the loop may
    hold the only reference)
    ["cmp", op, i, j]            op: == != < <= > >=
    ["list", op, [i, ...], k]    op: remove, in, index, count
    ["sort", [i, ...]]           sorted(handles), recorded as indices
    ["actions", actions]         run by the program between iterations
    ["debug", bool]  ["collect"]

Every step may also be an ["op", ...] action of a trap (run from inside a
special method), but "schedule" makes its traps anew each time.
"""

import operator
import threading

from . import canary as canaries
from . import handler as handlers
from . import vocab
from .host import Host

HOWS = ("call_soon", "call_soon_threadsafe", "thread") + ("call_later", "call_at") * 2
TIMERS = ("call_later", "call_at")
CMP_FUNCS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
CMPS = tuple(CMP_FUNCS)
LIST_OPS = ("remove", "in", "index", "count")
# Actions that re-enter handles matter most here.
WEIGHTS = {"cancel": 10, "run": 8, "op": 4}


class _Gen:
    def __init__(self, rng):
        self.rng = rng
        self.handles = 0
        self.slots = 0
        self.same = []  # handles of timers that share one deadline
        self.vocab = vocab.Vocab(self.op, weights=WEIGHTS)

    def slot(self, how):
        if how not in TIMERS:
            return None
        self.slots += 1
        pick = self.rng.randrange(6)
        if pick < 3:
            return "same"
        return ["due" if pick < 5 else "far", self.rng.randrange(1000) * 1000 + self.slots]

    def index(self):
        """A handle; half the time one of the timers that share a deadline
        (what makes TimerHandle.__eq__ compare callbacks and arguments)."""
        if self.same and self.rng.randrange(2) == 0:
            return self.rng.choice(self.same)
        return self.rng.randrange(max(1, self.handles))

    def schedule(self, depth):
        rng = self.rng
        how = rng.choice(HOWS)
        slot = self.slot(how)
        if slot == "same":
            # one deadline exactly: call_later's is the loop's time plus
            # the delay, rounded as the time happens to be
            how = "call_at"
        if slot == "same" and rng.randrange(2) == 0:
            # a callback compared with another's: its __eq__ re-enters,
            # often to cancel a timer it may be compared with
            cb = vocab.gen_trap(rng, self.vocab, ["__eq__", "__call__"], depth)
            if self.same and rng.randrange(2) == 0:
                cb[2]["__eq__"].insert(0, ["cancel", rng.choice(self.same)])
        else:
            cb = vocab.gen_callback(rng, self.vocab, depth)
        args = []
        if cb[0] != "builtin":
            args = [vocab.gen_arg(rng, self.vocab, depth) for _ in range(rng.randint(0, 2))]
        if slot == "same":
            self.same.append(self.handles)
        self.handles += 1
        return ["schedule", how, cb, args, slot]

    def op(self, rng, depth):
        """A step run from inside a trap's method (no new traps deeper
        than depth 1)."""
        pick = rng.randrange(10)
        if pick < 2 and depth < 1:
            return self.schedule(depth + 1)
        return self.plain(pick)

    def plain(self, pick):
        rng = self.rng
        if pick < 4:
            return ["cmp", rng.choice(CMPS), self.index(), self.index()]
        if pick < 6:
            ks = [self.index() for _ in range(rng.randint(1, 3))]
            return ["list", rng.choice(LIST_OPS), ks, self.index()]
        if pick < 7:
            return ["cancel", self.index()]
        if pick < 8:
            return ["run", self.index()]
        return [rng.choice(["cancelled", "hash", "when", "sort"]), self.index()]

    def compared(self):
        """An episode: two timers that share a deadline, the second's
        callback's __eq__ re-entering (cancelling the first, or itself, or
        running one nested), and a comparison of the two (what
        list.remove, `in`, index, count and ==, !=, <=, >= do)."""
        rng = self.rng
        first, second = self.handles, self.handles + 1
        steps = []
        for k in range(2):
            how = "call_at"  # one deadline exactly (see schedule)
            cb = vocab.gen_trap(rng, self.vocab, ["__eq__", "__call__"])
            if k == 1:
                target = rng.choice([first, first, second])
                cb[2]["__eq__"].insert(0, [rng.choice(["cancel", "cancel", "run"]), target])
            args = [vocab.gen_arg(rng, self.vocab) for _ in range(rng.randint(0, 2))]
            self.same.append(self.handles)
            self.handles += 1
            steps.append(["schedule", how, cb, args, "same"])
        if rng.randrange(2) == 0:
            steps.append(["list", rng.choice(LIST_OPS), [second], first])
        else:
            steps.append(["cmp", rng.choice(["==", "!=", "<=", ">="]), second, first])
        return steps

    def steps(self):
        if self.rng.randrange(12) == 0:
            return self.compared()
        return [self.step()]

    def step(self):
        rng = self.rng
        pick = rng.randrange(20)
        if pick < 8 or self.handles == 0:
            return self.schedule(0)
        if pick < 14:
            return self.plain(rng.randrange(10))
        if pick < 15:
            return ["sort", [self.index() for _ in range(rng.randint(2, 4))]]
        if pick < 16:
            return ["repr", self.index()]
        if pick < 17:
            return ["drop", self.index()]
        if pick < 18:
            return ["actions", vocab.gen_actions(rng, self.vocab, 0)]
        if pick < 19:
            return ["debug", rng.random() < 0.5]
        return ["collect"]


def generate(rng):
    g = _Gen(rng)
    steps = [s for _ in range(rng.randint(1, 12)) for s in g.steps()]
    order = canaries.draw_order(rng)
    return {
        "machine": "handles",
        "debug": rng.randrange(4) == 0,
        "handler": rng.choice(handlers.MODES),
        "canary": order,
        "steps": steps,
    }


class HandlesHost(Host):
    def start(self):
        super().start()
        self.base = self.loop.time()
        self.whens = {}

    def when_of(self, slot):
        if slot == "same":
            return self.base + 3600
        kind, n = slot
        return self.base + (-1000 if kind == "due" else 3600) + n * 1e-6

    def known(self, k):
        """Handle k, or the reason there is none."""
        if not self.handles:
            return None, "no handles"
        h = self.handles[k % len(self.handles)]
        return (h, None) if h is not None else (None, "dropped")

    def schedule(self, step):
        _, how, cb_spec, arg_specs, slot = step
        cb, args = vocab.make_callback(self, cb_spec)
        args = args + [vocab.make_value(self, a) for a in arg_specs]
        if how in ("call_soon", "call_soon_threadsafe"):
            h = getattr(self.loop, how)(cb, *args)
        elif how == "thread":
            made = []

            def other_thread(cb=cb, args=args):
                try:
                    made.append(self.loop.call_soon_threadsafe(cb, *args))
                except Exception as exc:  # noqa: BLE001 - recorded below
                    made.append(exc)

            t = threading.Thread(target=other_thread)
            t.start()
            t.join()
            del other_thread  # its defaults hold the callback and arguments
            if isinstance(made[0], Exception):
                raise made[0]
            h = made[0]
        else:
            when = self.when_of(slot)
            if how == "call_at":
                h = self.loop.call_at(when, cb, *args)
            else:
                h = self.loop.call_later(when - self.loop.time(), cb, *args)
            self.whens[id(h)] = (when, how)
        index = self.add_handle(h, cb, *args)
        # the program keeps no other reference to what it made
        del cb, args
        return index

    def run_op(self, op):
        name = op[0]
        try:
            result = self.do(op)
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from a nested run too
            self.rec(["op", name, "!", type(exc).__name__, self.mask(exc)])
        else:
            self.rec(["op", name, result])

    def do(self, op):
        name = op[0]
        if name == "schedule":
            return self.schedule(op)
        if name == "cmp":
            (a, why), (b, why_b) = self.known(op[2]), self.known(op[3])
            if a is None or b is None:
                return why or why_b
            return CMP_FUNCS[op[1]](a, b)
        if name == "list":
            items = [self.known(k)[0] for k in op[2]]
            target, why = self.known(op[3])
            items = [h for h in items if h is not None]
            if target is None:
                return why
            if op[1] == "remove":
                items.remove(target)
                return len(items)
            if op[1] == "in":
                return target in items
            if op[1] == "index":
                return items.index(target)
            return items.count(target)
        if name == "sort":
            items = [h for h in (self.known(k)[0] for k in op[1]) if h is not None]
            return [self.handles.index(h) for h in sorted(items)]
        if name == "actions":
            vocab.run_actions(self, op[1])
            return None
        if name == "debug":
            self.loop.set_debug(op[1])
            return None
        if name == "collect":
            self.collect()
            return None
        h, why = self.known(op[1])
        if h is None:
            return why
        if name == "cancel":
            return repr(h.cancel())
        if name == "run":
            return repr(h._run())
        if name == "cancelled":
            return h.cancelled()
        if name == "hash":
            return type(hash(h)).__name__
        if name == "when":
            when, how = self.whens.get(id(h), (None, None))
            if when is None:
                return "not a timer"
            # call_at keeps the deadline it was given; call_later's is
            # the loop's time plus the delay, close to it
            return h.when() == when if how == "call_at" else abs(h.when() - when) < 1e-3
        if name == "repr":
            return self.mask_repr(repr(h))
        if name == "drop":
            k = op[1] % len(self.handles)
            # its deadline goes with it: once freed, its id may be the next
            # handle's (handles seed 434 program 823 on 3.14: zloopgo's free
            # list gave a dropped timer's memory to a handle made next)
            self.whens.pop(id(self.handles[k]), None)
            self.handles[k] = None
            return None
        raise AssertionError(f"unknown op {op!r}")

    @staticmethod
    def mask_repr(text):
        import re

        return re.sub(r"when=[-\d.e]+", "when=<t>", handlers.mask(text))

    def program(self):
        for i, step in enumerate(self.p["steps"]):
            self.step = i
            self.rec(["step", i])
            self.run_op(step)
            self.end_step()
            self.rec(["state", [None if h is None else h.cancelled() for h in self.handles]])


def run(program, loop_name, journal=None):
    return HandlesHost(program, loop_name, journal).execute()
