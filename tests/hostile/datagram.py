"""The datagram machine: tests/test_datagram_diff.py's endpoints (a
server, a client connected to it, an unconnected one) and its payloads,
with hostile parts: payloads that are traps' buffers (a bytearray or
bytes subclass, so asyncio's Python sendto takes them), a max_size whose
__index__ runs, instance-level overrides of what the native paths bypass
(the transport's `_sock`, replaced by a wrapper whose send and sendto
record their calls and can fail with BlockingIOError so that the
transport buffers; the protocol's datagram_received and error_received
on the instance), closes and aborts in callbacks, and the canary.

A program (JSON):

    {"machine": "datagram", "handler": mode, "canary": [kind, ...],
     "debug": bool, "steps": [step, ...]}

Steps (ops too: a trap's ["op", ...] action runs them; ["call", [op, ...]]
runs several in one callback):
    ["sendto", who, payload, where]    who: connected, unconnected;
        payload: a test_datagram_diff payload kind or a vocab buffer;
        where: none (connected: no address), equal (an equal tuple of the
        server's address), own (the connected one's peer address)
    ["close", who]  ["abort", who]     who: also server
    ["sock", who, n]        who's _sock becomes a wrapper (once); its
                            next n sends raise BlockingIOError
    ["max_size", who, value]           value: an int or a trap
    ["proto", who, method, actions]    protocol.method replaced on the
                            instance: runs actions (the first time), then
                            the class's
    ["soon", callback]                  a hostile callback (vocab)

After each step the loop settles (until nothing is left to read on any
open endpoint and nothing new was recorded), then each endpoint's
get_write_buffer_size() and is_closing() are recorded and the canary is
checked. Datagrams are recorded as test_datagram_diff's Recorder records
them (length, digest, sender by role).
"""

import re
import select

from . import canary as canaries
from . import handler as handlers
from . import vocab
from .host import Host

WHO = ("connected", "unconnected")
PAYLOADS = ["empty", 1, 7, 1024, "bytearray", "memoryview", "str"]
MAX_SIZES = [1, 5, 1024, 65536, 0, -1]


class _Gen:
    def __init__(self, rng):
        self.rng = rng
        self.vocab = vocab.Vocab(self.op, weights={"op": 10, "run": 2, "cancel": 2})

    def payload(self):
        if self.rng.randrange(6) == 0:
            return vocab.gen_buffer(self.rng, self.vocab, self.rng.choice([1, 7, 100]))
        return self.rng.choice(PAYLOADS)

    def op(self, rng, depth=0):
        pick = rng.randrange(20)
        who = rng.choice(WHO)
        if pick < 11:
            where = rng.choice(["none", "none", "equal"] if who == "connected" else ["equal"])
            return ["sendto", who, self.payload(), where]
        if pick < 14:
            return [rng.choice(["close", "close", "abort"]), rng.choice(WHO + ("server",))]
        if pick < 16:
            return ["sock", who, rng.choice([0, 1, 1, 2])]
        if pick < 18:
            size = rng.choice(MAX_SIZES)
            if rng.randrange(4) == 0:
                size = vocab.gen_trap(rng, self.vocab, ["__index__"], depth + 1)
            return ["max_size", rng.choice(WHO + ("server",)), size]
        method = rng.choice(["datagram_received", "error_received"])
        actions = vocab.gen_actions(rng, self.vocab, 1)
        return ["proto", rng.choice(WHO + ("server",)), method, actions]

    def steps(self):
        """One step, or now and then an episode of four: a send the
        transport must buffer (its _sock wrapper fails once), a close that
        waits for the buffer to drain, then a send (what the native path
        takes once the transport closed its socket itself)."""
        rng = self.rng
        pick = rng.randrange(16)
        if pick < 2:
            return [["soon", vocab.gen_callback(rng, self.vocab)]]
        if pick < 3:
            who = rng.choice(WHO)
            where = "none" if who == "connected" else "equal"
            return [
                ["sock", who, 1],
                [
                    "call",
                    [
                        ["sendto", who, rng.choice(["bytearray", "memoryview"]), where],
                        ["close", who],
                    ],
                ],
                ["sendto", who, rng.choice([1, 7, 1024]), where],
            ]
        if pick < 6:
            return [["call", [self.op(rng) for _ in range(rng.randint(2, 4))]]]
        return [self.op(rng)]


def generate(rng):
    g = _Gen(rng)
    steps = [s for _ in range(rng.randint(1, 12)) for s in g.steps()]
    return {
        "machine": "datagram",
        "handler": rng.choice(handlers.MODES),
        "canary": canaries.draw_order(rng),
        "debug": rng.randrange(4) == 0,
        "steps": steps,
    }


class _Log:
    """test_datagram_diff.Recorder's log: its entries become records."""

    def __init__(self, host):
        self.host = host

    def append(self, entry):
        self.host.rec(list(entry))


class SockWrapper:
    """What a program puts in a transport's `_sock`: the socket's methods,
    recorded, with the next `fail` sends raising BlockingIOError."""

    def __init__(self, host, who, sock, fail):
        self._host, self._who, self._sock, self.fail = host, who, sock, fail

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def _send(self, name, *args):
        self._host.rec(["sock", self._who, name])
        if self.fail > 0:
            self.fail -= 1
            raise BlockingIOError("the wrapper's send would block")
        return getattr(self._sock, name)(*args)

    def send(self, data, *flags):
        return self._send("send", data, *flags)

    def sendto(self, data, *args):
        return self._send("sendto", data, *args)


class DatagramHost(Host):
    def start(self):
        import test_datagram_diff as base

        self.base = base
        super().start()
        self.ports = {}
        log = _Log(self)
        self.reply = ["none"]

        def roles(value):
            text = value if isinstance(value, str) else repr(value)
            for port, role in self.ports.items():
                text = re.sub(rf"\b{port}\b", role, text)
            return text

        self.roles = roles

        async def make():
            ends = {}
            ends["server"], _ = await self.loop.create_datagram_endpoint(
                lambda: base.Recorder("server", log, roles, self.reply),
                local_addr=("127.0.0.1", 0),
            )
            addr = ends["server"].get_extra_info("sockname")
            for name, kw in (("connected", {"remote_addr": addr}), ("unconnected", {})):
                if not kw:
                    kw = {"local_addr": ("127.0.0.1", 0)}
                ends[name], _ = await self.loop.create_datagram_endpoint(
                    lambda name=name: base.Recorder(name, log, roles, self.reply), **kw
                )
            return ends, addr

        self.ends, self.server_addr = self.run_until(make())
        for name, t in self.ends.items():
            self.ports[t.get_extra_info("sockname")[1]] = name.upper()
        self.socks = {n: t.get_extra_info("socket") for n, t in self.ends.items()}
        self.data = bytes(range(256)) * 4

    def mask(self, text):
        """handler.mask, and ports by role (the endpoints' ports, then any
        other loopback port: one an endpoint had before its role was known)."""
        text = self.roles(super().mask(text)) if hasattr(self, "roles") else super().mask(text)
        return re.sub(r"'127\.0\.0\.1', \d+", "'127.0.0.1', <port>", text)

    def payload(self, kind):
        if isinstance(kind, list):
            return vocab.make_value(self, kind)
        return self.base.payload(kind, self.data)

    def run_op(self, op):
        name, who = op[0], op[1]
        t = self.ends[who]
        try:
            if name == "sendto":
                data = self.payload(op[2])
                where = op[3]
                if where == "none":
                    result = t.sendto(data)
                else:
                    addr = self.base.equal_copy(self.server_addr)
                    if where == "own":
                        addr = t.get_extra_info("peername")
                    result = t.sendto(data, addr)
                del data
            elif name in ("close", "abort"):
                result = getattr(t, name)()
                self.fill_canary()
            elif name == "sock":
                sock = getattr(t, "_sock", None)
                if isinstance(sock, SockWrapper):
                    sock.fail = op[2]
                    result = "again"
                elif sock is None:
                    result = "no socket"
                else:
                    t._sock = SockWrapper(self, who, sock, op[2])
                    result = "wrapped"
            elif name == "max_size":
                t.max_size = vocab.make_value(self, op[2])
                result = None
            elif name == "proto":
                result = self.override(who, op[2], op[3])
            else:
                raise AssertionError(f"unknown op {op!r}")
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from a nested run too
            self.rec(["op", name, who, "!", type(exc).__name__, self.mask(exc)])
        else:
            self.rec(["op", name, who, repr(result)])

    def override(self, who, method, actions):
        proto = self.ends[who].get_protocol()
        original = getattr(type(proto), method)
        host = self

        calls = []

        def replaced(*args):
            # runs its actions the first time, as a trap's methods do (a
            # send that brings a datagram back would go on for ever)
            host.rec(["override", who, method])
            calls.append(None)
            if len(calls) == 1:
                vocab.run_actions(host, actions)
            return original(proto, *args)

        setattr(proto, method, replaced)
        return "replaced"

    def pending(self):
        """The endpoints' sockets (those still open) with a datagram to read."""
        fds = [fd for fd in (s.fileno() for s in self.socks.values()) if fd >= 0]
        return select.select(fds, [], [], 0)[0] if fds else []

    def settle(self, quiet=3):
        still = 0
        for _ in range(500):
            seen = len(self.obs)
            for _ in range(4):
                self.run_once()
                self.fill_canary()
            if len(self.obs) == seen and not self.pending():
                still += 1
                if still >= quiet:
                    return
            else:
                still = 0
        self.rec(["unsettled"])

    def state(self):
        self.rec(
            ["state"]
            + [[n, t.get_write_buffer_size(), t.is_closing()] for n, t in self.ends.items()]
        )

    def program(self):
        self.run_callback_steps()

    def teardown(self):
        super().teardown()
        for t in self.ends.values():
            t.close()
        self.settle()
        self.fill_canary()


def run(program, loop_name, journal=None):
    return DatagramHost(program, loop_name, journal).execute()
