"""The sock_* machine: tests/test_sock_ops_diff.py's programs (its socket
kinds, loops, steps and observations) with hostile steps added: receive
sizes that are traps (their __index__ runs when the size is converted,
and may cancel a task, close our socket or send from the peer), buffers
to send and to receive into that are traps' bytearray and bytes
subclasses, our socket closed while receives and sends wait (the canary
takes its number), and hostile callbacks.

A program (JSON):

    {"machine": "sockops", "kind": unix | tcp | udp | subclass,
     "debug": bool, "derived": bool, "handler": mode, "canary": [...],
     "steps": [step, ...]}

Steps are test_sock_ops_diff's, and
    ["recv", trap]  ["sendall", buffer]  ["recv_into", buffer]
    ["close_ours"]  ["soon", callback]
whose traps' ["op", step] actions run the steps that take no loop
iteration (test_sock_ops_diff.SockProgram.act_now).
"""

from . import canary as canaries
from . import handler as handlers
from . import vocab
from .host import Host

KINDS = ("unix", "tcp", "udp", "subclass")


class _Gen:
    def __init__(self, rng, kind):
        self.rng = rng
        self.kind = kind
        self.vocab = vocab.Vocab(self.op, weights={"op": 10, "run": 2, "cancel": 2})

    def op(self, rng, depth=0):
        pick = rng.randrange(10)
        if pick < 3:
            return ["cancel", rng.randrange(3)]
        if pick < 5:
            return ["peer_send", rng.choice([1, 1000])]
        if pick < 6:
            return ["close_ours"]
        if pick < 7:
            return ["close_peer"]
        if pick < 8:
            return ["recv", rng.choice([1, 1000])]
        return ["sendall", rng.choice(["one", "small"])]

    def hostile(self):
        rng = self.rng
        pick = rng.randrange(10)
        if pick < 3:
            return ["recv", vocab.gen_trap(rng, self.vocab, ["__index__"])]
        if pick < 5:
            return ["sendall", vocab.gen_buffer(rng, self.vocab, rng.choice([1, 1000]))]
        if pick < 6:
            buffer = vocab.gen_buffer(rng, self.vocab, rng.choice([0, 10, 1000]))
            buffer[1] = "bytearray"  # a buffer received into must be writable
            return ["recv_into", buffer]
        if pick < 8:
            return ["close_ours"]
        return ["soon", vocab.gen_callback(rng, self.vocab)]


def generate(rng):
    import test_sock_ops_diff as base

    kind = rng.choice(KINDS)
    debug = rng.randrange(3) == 0
    steps = [list(s) for s in base.make_program(rng, kind, debug)]
    g = _Gen(rng, kind)
    for _ in range(rng.randint(1, 5)):
        steps.insert(rng.randrange(len(steps) + 1), g.hostile())
    return {
        "machine": "sockops",
        "kind": kind,
        "debug": debug,
        "derived": rng.randrange(4) == 1,
        "handler": rng.choice(handlers.MODES),
        "canary": canaries.draw_order(rng),
        "steps": steps,
    }


class SockHost(Host):
    steps_end_at_canary = True  # test_sock_ops_diff's run_program ends each step there

    def start(self):
        import test_sock_ops_diff as base

        self.base = base
        if self.p.get("derived"):
            self.factory = base.DERIVED[self.loop_name]
        super().start()

    def make_loop(self):
        factory = getattr(self, "factory", None)
        return factory() if factory is not None else super().make_loop()

    def rec(self, entry):
        super().rec(list(entry) if isinstance(entry, tuple) else entry)

    def run_op(self, op):
        try:
            result = self.prog.act_now(-1, op)
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from a nested run too
            self.rec(["op", op[0], "!", type(exc).__name__, self.mask(exc)])
        else:
            self.rec(["op", op[0], repr(result)])

    def program(self):
        # run_program sets self.prog (what traps' ops act on)
        run = self.base.run_program(self.loop, self.p["kind"], self.p["steps"], self)
        self.run_until(run)

    def teardown(self):
        super().teardown()
        # tasks traps' ops started after the program's last step: their
        # exceptions are retrieved (not logged whenever they are collected)
        for task in self.prog.tasks:
            if task.done() and not task.cancelled():
                task.exception()


def run(program, loop_name, journal=None):
    return SockHost(program, loop_name, journal).execute()
