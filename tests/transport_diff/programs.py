"""What a program of the transport differential test is, and the hypothesis
strategies that generate one.

A program is plain JSON data (so that a failing one can be saved, printed
and replayed); `runner` gives it its meaning:

    {"machine": "transport" | "stream",
     "net": "unix" | "tcp" | "tls",
     "tls": "start_tls" | "connect",       # net "tls": sslproto over the loop's
                                           # transport, or create_connection(ssl=)
     "debug": bool,                        # loop.set_debug()
     "sockbuf": int,                       # SO_SNDBUF and SO_RCVBUF, both ends
     "conns": [{"protocol": "plain" | "buffered", "chunk": int}, ...]  # transport
            | [{"limit": int}, ...],                                 # stream
     "log_ops": [op, ...],      # run by a handler on the 'asyncio' logger
     "handler_ops": [op, ...],  # run by the loop's exception handler
     "handler": mode,           # optional: hostile.handler's modes (custom)
     "canary": [kind, ...],     # optional: hostile.canary's order
     "steps": [step, ...],
     "probe": bool}             # optional: count Python's StreamReader.feed_data
                                # calls (the stream fast path skips them)

Steps, each followed by settling the loop:
    ["call", ops]            loop.call_soon(a callback that runs ops)
    ["direct", ops]          ops run by the test between loop iterations
    ["peer", t, action]      the peer of connection t acts (outside callbacks)
    ["arm", t, hook, ops, raises, ret]   (transport machine) the next call of
                             protocol method `hook` on connection t runs ops,
                             then raises ValueError if `raises`, then returns
                             `ret` (eof_received)
    ["task", ops]            (stream machine) a task that runs ops, awaiting
                             the stream coroutines among them
    ["cancel_task", k]       (stream machine) cancel task k (from 1), at
                             whatever await it is
    ["hostile", callback]    loop.call_soon(a hostile callback: tests/hostile/
                             vocab.py; its ["op", op] actions run ops here)

Ops (t is a connection index):
    ["write", t, kind, size, mutate]      kind: bytes, bytearray, memoryview
                                          (of bytes), mv_bytearray, strided;
                                          mutate: overwrite the bytearray after
                                          the call
    ["writelines", t, [[kind, size], ...], mutate]
    ["limits", t, high, low]   set_write_buffer_limits (ints, floats, None)
    ["get_limits", t]  ["size", t]
    ["pause_reading", t]  ["resume_reading", t]  ["is_reading", t]
    ["write_eof", t]  ["can_write_eof", t]  ["close", t]  ["abort", t]
    ["is_closing", t]
    ["max_size", t, value]     the socket transport's max_size (under TLS, the
                               one sslproto reads from): how much each recv
                               asks for; 0, negative, too large or not an int
                               end the connection as recv's result does
    ["peer", t, action]        the peer acts now, inside the callback
    ["marker"]                 loop.call_soon(record a numbered marker)
    ["soon", ops]              loop.call_soon(a callback that runs ops)
    ["fin", ops]               an object whose __del__ runs ops, dropped now
    ["raise"]                  raise ValueError (ends the op list; generated
                               at the end of a "call" step's ops)
    ["hwrite", t, buffer]      write a hostile buffer (vocab: a bytearray or
                               bytes subclass whose special methods run ops)
    ["override", t, target, method, ops]   replace target's `method` on the
                               instance: it records its calls, runs ops (the
                               first time), then the class's method. target: protocol, transport
                               (write, writelines), sock (the transport's _sock,
                               a wrapper: send, recv, recv_into), sslobj (TLS:
                               read, write, pending), reader (stream: feed_data,
                               feed_eof)
    ["buffer", t, kind]        (buffered protocol) what get_buffer() returns from
                               now on: bytearray, list, bytes, strided, empty,
                               hostile (a trap's bytearray subclass)
  ["max_size", t, value]'s value may be a trap (its __index__ runs ops)
  stream machine, in tasks: ["drain", t]  ["wait_closed", t]  ["read", t, n]
    ["readexactly", t, n]  ["readline", t]  ["at_eof", t]
    ["timeout", seconds, op]   asyncio.wait_for(op, seconds) (an await op)

Peer actions: ["recv", n] (one non-blocking recv), ["read"] (read everything
from now on), ["stop"] (stop reading), ["send", n], ["shut_wr"]
(shutdown(SHUT_WR); TLS: close_notify), ["reset"] (SO_LINGER 0, then close;
a Unix socket has no reset, see peer.RawPeer.reset), ["close"].

The strategies weight what the bugs of issue 19 needed (several writes and
a peer action inside one callback, writes from logging handlers in debug
mode, armed callbacks that write then raise); hypothesis shrinks a
program by deleting steps and ops and lowering sizes and choices.
"""

from hostile import canary as canaries
from hostile import handler as handlers
from hostile import vocab
from hypothesis import strategies as st

from . import peer as peers

MACHINES = ("transport", "stream")
# (peer.NETS: Windows has no "unix")
NETS = {"transport": peers.NETS, "stream": peers.NETS}

KINDS = ("bytes", "bytearray", "memoryview", "mv_bytearray", "strided")
MUTABLE = ("bytearray", "mv_bytearray")
HOOKS = (
    "data_received",
    "eof_received",
    "get_buffer",
    "buffer_updated",
    "connection_lost",
    "pause_writing",
    "resume_writing",
)
BUFFERED_ONLY = ("get_buffer", "buffer_updated")

# Every size the write paths treat differently, and one either side:
# empty, one byte, asyncio's default high-water mark and zloopgo's hold
# limit (64 KiB), page size, 1 MiB. High-water marks +-1 and socket buffer
# sizes +-1 are added per program.
THRESHOLDS = (0, 1, 2, 100, 4095, 4096, 4097, 65535, 65536, 65537, 1 << 20)
SOCKBUFS = (4096, 16384, 65536)
# TCP on loopback with a receive buffer smaller than a segment (64 KiB)
# crawls on timers (silly-window avoidance, zero-window probes).
SOCKBUFS_TCP = (65536, 262144)
CHUNKS = (1, 100, 65536)  # the BufferedProtocol's get_buffer() size
STREAM_LIMITS = (64, 1024, 65536)
HIGHS = (None, 0, 1, 100, 4096, 65535, 65536, 65537, 65536.0, 1000.5, 0.0, float("inf"), True, -1)
LOWS = (None, 0, 1, 100, 16384, 100.0, 0.5, -1)
RECV_SIZES = (1, 100, 4096, 65536, 1 << 20)
SEND_SIZES = (1, 10, 1000, 4096, 40000)  # 40000: three TLS records in one send
READ_SIZES = (-1, 0, 1, 10, 100, 65536)
# transport.max_size: one-digit ints (below 2**30) and larger ones read
# natively (1 << 62: no buffer that large can be had, recv's MemoryError),
# the rest (0, negative, True, too large, not an int) by asyncio's own read
# (capi/transport.c, read_size)
MAX_SIZES = (1, 7, 1000, 4096, 65536, 262144, 1 << 30, 0, -1, True, 1 << 62, 1 << 70, "x")


def _size(draw, world):
    """A write size: a threshold, a high-water mark or socket buffer size
    +-1, or any size up to 200 kB."""
    pick = draw(st.integers(0, 9))
    if pick < 6:
        return draw(st.sampled_from(THRESHOLDS))
    if pick < 8:
        base = draw(st.sampled_from(sorted(world["marks"])))
        return max(0, base + draw(st.integers(-1, 1)))
    return draw(st.integers(1, 200_000))


# The peer's actions, weighted: the ones that end or half-end the
# connection are common, since what a loop does about them inside one
# callback is where the bugs were.
_PEER = ("recv", "recv", "send", "send", "read", "stop", "shut_wr", "reset", "reset", "close")


def _peer_action(draw):
    what = draw(st.sampled_from(_PEER))
    if what == "recv":
        return ["recv", draw(st.sampled_from(RECV_SIZES))]
    if what == "send":
        return ["send", draw(st.sampled_from(SEND_SIZES))]
    return [what]


# Weighted op names: (name, weight). The weights make the programs that
# matter (several writes and a peer action inside one callback) common.
_SYNC_OPS = (
    ("write", 30),
    ("writelines", 6),
    ("size", 8),
    ("is_closing", 8),
    ("limits", 6),
    ("get_limits", 1),
    ("pause_reading", 4),
    ("resume_reading", 3),
    ("is_reading", 2),
    ("write_eof", 4),
    ("can_write_eof", 1),
    ("close", 4),
    ("abort", 3),
    ("peer", 16),
    ("marker", 6),
    ("soon", 3),
    ("fin", 2),
    ("max_size", 2),
    ("hwrite", 2),
    ("override", 3),
    ("buffer", 1),
)
# What a program's hostile objects may replace on an instance (the native
# paths must call what the instance has, as asyncio's Python does).
OVERRIDES = {
    "protocol": ("data_received", "eof_received", "connection_lost", "get_buffer"),
    "transport": ("write", "writelines"),
    "sock": ("send", "recv", "recv_into"),
    "sslobj": ("read", "write", "pending"),
    "reader": ("feed_data", "feed_eof"),
}
BUFFERS = ("bytearray", "list", "bytes", "strided", "empty", "hostile")
# What Python code outside the protocol (a logging handler, the exception
# handler, a finalizer) does: mostly write to a transport.
_HOOK_OPS = (("write", 12), ("writelines", 1), ("is_closing", 2), ("close", 1), ("marker", 2))
_STREAM_SYNC = ("write", "writelines", "size", "is_closing", "limits", "write_eof")
_STREAM_SYNC += ("can_write_eof", "close", "peer", "marker", "soon", "fin", "max_size")
_STREAM_SYNC += ("hwrite", "override")
_STREAM_AWAIT = (
    ("drain", 10),
    ("wait_closed", 3),
    ("read", 6),
    ("readexactly", 5),
    ("readline", 4),
    ("at_eof", 2),
)


def _weighted(draw, table):
    names = [name for name, weight in table for _ in range(weight)]
    return draw(st.sampled_from(names))


def _op(draw, world, depth, name):
    t = draw(st.integers(0, world["n"] - 1))
    if name == "write":
        kind = draw(st.sampled_from(KINDS if draw(st.integers(0, 19)) == 19 else KINDS[:4]))
        mutate = kind in MUTABLE and draw(st.booleans())
        return ["write", t, kind, _size(draw, world), mutate]
    if name == "writelines":
        # Never an empty chunk: asyncio 3.13.0's writelines() spins forever
        # on an empty chunk left in its buffer, on any loop.
        chunks = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(KINDS[:4]),
                    st.one_of(st.sampled_from(THRESHOLDS[1:10]), st.integers(1, 70_000)),
                ).map(list),
                max_size=4,
            )
        )
        return ["writelines", t, chunks, draw(st.booleans())]
    if name == "limits":
        high, low = draw(st.sampled_from(HIGHS)), draw(st.sampled_from(LOWS))
        if isinstance(high, int) and not isinstance(high, bool) and high > 1:
            world["marks"].add(high)
        return ["limits", t, high, low]
    if name == "peer":
        return ["peer", t, _peer_action(draw)]
    if name == "marker":
        return ["marker"]
    if name in ("soon", "fin"):
        return [name, _ops(draw, world, depth + 1, max_ops=3, table=_HOOK_OPS + _SYNC_OPS)]
    if name == "read":
        return ["read", t, draw(st.sampled_from(READ_SIZES))]
    if name == "readexactly":
        return ["readexactly", t, draw(st.sampled_from(READ_SIZES[1:]))]
    if name == "max_size":
        if draw(st.integers(0, 4)) == 0:
            return ["max_size", t, vocab.gen_trap(world["rng"], world["vocab"], ["__index__"])]
        return ["max_size", t, draw(st.sampled_from(MAX_SIZES))]
    if name == "hwrite":
        rng = world["rng"]
        size = draw(st.sampled_from(THRESHOLDS[:8]))
        buffer = vocab.gen_buffer(rng, world["vocab"], size)
        # what a buffer's finalizer does depends on when a loop lets the
        # object go (asyncio copies it at once): not a hostile method here
        buffer[2][2].pop("__del__", None)
        return ["hwrite", t, buffer]
    if name == "override":
        return _override(draw, world, t)
    if name == "buffer":
        return ["buffer", t, draw(st.sampled_from(BUFFERS))]
    return [name, t]


def _override(draw, world, t):
    targets = ["protocol", "transport", "sock"]
    if world["net"] == "tls":
        targets.append("sslobj")
    if world["machine"] == "stream":
        targets = ["transport", "sock", "reader"] + (["sslobj"] if world["net"] == "tls" else [])
    target = draw(st.sampled_from(targets))
    method = draw(st.sampled_from(OVERRIDES[target]))
    if target == "protocol" and world["conns"][t].get("protocol") == "buffered":
        method = draw(st.sampled_from(["eof_received", "connection_lost", "get_buffer"]))
    elif target == "protocol" and method == "get_buffer":
        method = "data_received"
    ops = _ops(draw, world, depth=2, max_ops=2, table=_HOOK_OPS)
    return ["override", t, target, method, ops]


@st.composite
def _one_op(draw, world, depth, table, in_task):
    if depth >= 2:  # inside an override's or a trap's ops: no hostile objects
        table = [(n, w) for n, w in table if n not in ("hwrite", "override", "buffer", "max_size")]
    if world["machine"] == "stream":
        if in_task and draw(st.integers(0, 2)) == 2:
            table = _STREAM_AWAIT
        else:
            table = [(n, w) for n, w in table if n in _STREAM_SYNC]
    if world["machine"] == "transport" or not in_task:
        table = [(n, w) for n, w in table if n != "buffer" or world["buffered"]]
    name = _weighted(draw, table)
    if depth >= 2 and name in ("soon", "fin"):
        name = "marker"
    op = _op(draw, world, depth, name)
    if table is _STREAM_AWAIT and draw(st.integers(0, 5)) == 0:
        # a timeout at this await (wait_for cancels it)
        op = ["timeout", draw(st.sampled_from([0, 0.0001, 0.01])), op]
    return op


def _ops(draw, world, depth=0, max_ops=6, in_task=False, table=_SYNC_OPS):
    """The ops of one callback (or task): a list hypothesis can shrink by
    deleting ops; at depth 0 sometimes ending with a raise."""
    out = draw(st.lists(_one_op(world, depth, table, in_task), min_size=1, max_size=max_ops))
    if depth == 0 and not in_task and draw(st.integers(0, 9)) == 9:
        out.append(["raise"])
    return out


@st.composite
def _arm(draw, world):
    """An armed protocol method, and usually the peer action that calls it."""
    t = draw(st.integers(0, world["n"] - 1))
    buffered = world["conns"][t]["protocol"] == "buffered"
    hooks = [h for h in HOOKS if buffered or h not in BUFFERED_ONLY]
    if buffered:
        hooks.remove("data_received")
    hook = draw(st.sampled_from(hooks))
    ops = _ops(draw, world, depth=1, max_ops=5)
    raises = draw(st.booleans())
    ret = draw(st.sampled_from([None, True, False])) if hook == "eof_received" else None
    steps = [["arm", t, hook, ops, raises, ret]]
    if draw(st.integers(0, 4)) < 4:
        if hook in ("data_received", "get_buffer", "buffer_updated"):
            steps.append(["peer", t, ["send", draw(st.sampled_from(SEND_SIZES))]])
        elif hook == "eof_received":
            steps.append(["peer", t, ["shut_wr"]])
        elif hook == "connection_lost":
            steps.append(["peer", t, draw(st.sampled_from([["reset"], ["close"], ["shut_wr"]]))])
    return steps


@st.composite
def _step(draw, world):
    """One step (an armed method comes with the step that calls it)."""
    kinds = ["call", "call", "call", "peer", "peer", "direct", "hostile"]
    kinds += ["arm", "arm"] if world["machine"] == "transport" else ["task", "task", "task"]
    if world["machine"] == "stream":
        kinds.append("cancel_task")
    kind = draw(st.sampled_from(kinds))
    if kind == "hostile":
        return [["hostile", vocab.gen_callback(world["rng"], world["vocab"])]]
    if kind == "cancel_task":
        return [["cancel_task", draw(st.integers(1, 4))]]
    if kind == "call":
        return [["call", _ops(draw, world)]]
    if kind == "direct":
        return [["direct", _ops(draw, world, depth=1)]]
    if kind == "peer":
        return [["peer", draw(st.integers(0, world["n"] - 1)), _peer_action(draw)]]
    if kind == "arm":
        return draw(_arm(world))
    return [["task", _ops(draw, world, in_task=True)]]


@st.composite
def programs(draw, machine=None, net=None):
    """A program for `machine` over `net` (each drawn when None)."""
    machine = machine or draw(st.sampled_from(MACHINES))
    net = net or draw(st.sampled_from(NETS[machine]))
    n = draw(st.integers(1, 2))
    sockbuf = draw(st.sampled_from(SOCKBUFS_TCP if net in peers.TCP_NETS else SOCKBUFS))
    if machine == "transport":
        conns = [
            {
                "protocol": draw(st.sampled_from(["plain", "buffered"])),
                "chunk": draw(st.sampled_from(CHUNKS)),
            }
            for _ in range(n)
        ]
    else:
        conns = [{"limit": draw(st.sampled_from(STREAM_LIMITS))} for _ in range(n)]
    world = {
        "machine": machine,
        "net": net,
        "n": n,
        "conns": conns,
        "marks": {65536, 2 * sockbuf, 4 * sockbuf},
        "buffered": any(c.get("protocol") == "buffered" for c in conns),
        "rng": vocab.Draws(draw),
    }

    def machine_op(rng, depth):
        # a trap's ["op", ...] action: one of the ops its hooks run
        return draw(_one_op(world, 2, _HOOK_OPS + _SYNC_OPS, False))

    # (no KeyboardInterrupt: the runner lets it end the program; the
    # handles machine of tests/hostile has it escape the loop)
    world["vocab"] = vocab.Vocab(machine_op, handles=True, weights={"op": 8}, interrupts=False)
    debug = draw(st.booleans())
    hook = {"depth": 1, "max_ops": 3, "table": _HOOK_OPS}
    # the 'asyncio' logger logs write and read errors only in debug mode
    log_ops = _ops(draw, world, **hook) if draw(st.integers(0, 3)) >= (1 if debug else 3) else []
    handler_ops = _ops(draw, world, **hook) if draw(st.integers(0, 2)) == 2 else []
    steps = [s for group in draw(st.lists(_step(world), min_size=1, max_size=10)) for s in group]
    program = {
        "machine": machine,
        "net": net,
        "debug": debug,
        "sockbuf": sockbuf,
        "conns": conns,
        "log_ops": log_ops,
        "handler_ops": handler_ops,
        "handler": draw(st.sampled_from(handlers.MODES)),
        "canary": canaries.draw_order(world["rng"]),
        "steps": steps,
    }
    if net == "tls":
        # streams: open_connection(ssl=) makes the connection, which is "connect"
        kinds = ["start_tls", "connect"] if machine == "transport" else ["connect"]
        program["tls"] = draw(st.sampled_from(kinds))
    return program
