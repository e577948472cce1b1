"""The pipes machine: tests/test_pipe_diff.py's programs over a read pipe
transport (a pipe, a socket pair, a pseudo-terminal, and a child's stdout
through loop.subprocess_exec), with hostile steps added: a max_size that
is a trap (its __index__ runs at each read: it may close the transport or
the writer, pause reading, write), the protocol's data_received replaced
on the instance (running actions), and hostile callbacks. A child's
steps write at most 4 KiB (one atomic pipe write) and do not close its
pipes (when it exits is its own timing).

A program (JSON):

    {"machine": "pipes", "kind": pipe | socket | pty | child,
     "debug": bool, "handler": mode, "canary": [...], "steps": [step, ...]}

Steps are test_pipe_diff's, and ["max_size", trap], ["proto", actions],
["soon", callback]; traps' ["op", step] actions run test_pipe_diff's
steps (PipeProgram.act_now).
"""

from . import canary as canaries
from . import handler as handlers
from . import vocab
from .host import Host

KINDS = ("pipe", "socket", "pty", "child")


class _Gen:
    def __init__(self, rng, kind):
        self.rng = rng
        self.kind = kind
        self.vocab = vocab.Vocab(self.op, weights={"op": 10, "run": 2, "cancel": 2})

    def op(self, rng, depth=0):
        import test_pipe_diff as base

        pick = rng.randrange(10)
        if pick < 3:
            return ["write", rng.choice(base.WRITES[self.kind][:3])]
        if pick < 5:
            return [rng.choice(["pause", "resume"])]
        if pick < 7:
            return ["close"] if self.kind != "child" else ["pause"]
        if pick < 8:
            return ["close_writer"] if self.kind != "child" else ["resume"]
        return ["max_size", rng.choice([1, 5, 0, -1])]

    def hostile(self):
        rng = self.rng
        pick = rng.randrange(10)
        if pick < 4:
            return ["max_size", vocab.gen_trap(rng, self.vocab, ["__index__"])]
        if pick < 7:
            return ["proto", vocab.gen_actions(rng, self.vocab, 1)]
        return ["soon", vocab.gen_callback(rng, self.vocab)]


def generate(rng):
    import test_pipe_diff as base

    kind = rng.choice(KINDS)
    steps = [list(s) for s in base.make_program(rng, kind)]
    if kind == "child":
        # when a child whose stdin or stdout closed exits is its own timing
        steps = [s for s in steps if s[0] not in ("reset", "close_writer", "close")]
    g = _Gen(rng, kind)
    for _ in range(rng.randint(1, 4)):
        steps.insert(rng.randrange(len(steps) + 1), g.hostile())
    return {
        "machine": "pipes",
        "kind": kind,
        "debug": rng.randrange(3) == 0,
        "handler": rng.choice(handlers.MODES),
        "canary": canaries.draw_order(rng),
        "steps": steps,
    }


class PipesHost(Host):
    steps_end_at_canary = True  # test_pipe_diff's run_program ends each step there

    def start(self):
        import test_pipe_diff as base

        self.base = base
        self.errors = []  # test_pipe_diff's step records carry them; ours are records
        super().start()

    def rec(self, entry):
        super().rec(list(entry) if isinstance(entry, tuple) else entry)

    def mask(self, text):
        return self.base.masked(super().mask(text))

    @staticmethod
    def skip_log(text):
        # when a child exits, and closes its stdin, is its own timing: a
        # write to its stdin (the machine's only write pipe transport) that
        # meets the exit is a fatal write error on one run and not the other
        return (
            Host.skip_log(text)
            or "exited with return" in text
            or "closed by peer" in text
            or "Fatal write error on pipe transport" in text
        )

    def run_op(self, op):
        try:
            result = self.prog.act_now(-1, op)
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from a nested run too
            self.rec(["op", op[0], "!", type(exc).__name__, self.mask(exc)])
        else:
            self.rec(["op", op[0], repr(result)])

    def program(self):
        # run_program sets self.prog (what traps' ops act on)
        self.run_until(self.base.run_program(self.loop, self.p["kind"], self.p["steps"], self))


def run(program, loop_name, journal=None):
    return PipesHost(program, loop_name, journal).execute()
