"""The natives machine: what a program can do to the objects whose methods
zloopgo runs natively (the stream, datagram and TLS app transports on
their native bases, and the TLS protocol), aimed at the state those
methods keep in the instance (capi/zl.h: zl_state_of_native) and at the
fields they read by slot offset (zl_layout). Every observation is
compared with asyncio's, with the descriptor canary on.

The objects, made at the start on the program's loop: a datagram client
connected to a datagram server ("dgram"), a stream transport over one end
of a socket pair whose other end the host reads ("stream"), a TLS client
connected to a TLS server of the same loop ("tls", its app transport;
"tlsproto", its SSLProtocol); on a second loop of the same kind in the
same thread, which runs only when a step says so, a datagram client and a
stream transport ("odgram", "ostream": objects of another loop, used from
this loop's callbacks).

A program (JSON):

    {"machine": "natives", "handler": mode, "canary": [kind, ...],
     "debug": bool, "steps": [step, ...]}

Ops (a step, or a trap's ["op", ...] action; ["call", [op, ...]] runs
several in one callback of the loop):

    ["m", target, method, arg]    a method of the target (METHODS), arg a
                                  payload or a size (ARGS), or none
    ["swap", target, to]          target.__class__ = a class (SWAPS): a
                                  subclass (empty, overriding the native
                                  methods, or with properties over the
                                  fields the native methods read), the
                                  class it had, another kind's class, a
                                  class of the same slots on asyncio's
                                  base; refused or not, as asyncio does
    ["shadow", target, method]    an instance attribute that shadows the
                                  method: records its calls, then calls
                                  the class's
    ["bare", target, method, arg, how]  object.__new__ of the target's
                                  class, or its own __new__ (how: object,
                                  cls), without __init__, and one method
                                  of the object
    ["reloop", target]            the target's _loop set to the other loop
    ["proto", target, actions]    the target's protocol's data_received or
                                  datagram_received replaced on the
                                  instance: runs actions the first time
    ["close_other"]               the other loop closed
    ["run_other"]                 a few iterations of the other loop (a
                                  RuntimeError from inside this one's)
    ["soon", callback]            a hostile callback (vocab)

After each step the loop settles; what the peers and the protocols
received in the step is recorded (length and digest, by role, not by
read: how bytes are cut into reads is timing), then each target's is_closing() and
get_write_buffer_size(), and the canary is checked. After the loop
closed, every target's methods are called again (recorded as "closed"
observations, which are compared after the end).

It knows the transports' and the TLS protocol's public and private
method names (asyncio's), nothing of zloopgo's layout.
"""

import asyncio
import contextlib
import functools
import hashlib
import re
import select
import socket
import ssl

from . import canary as canaries
from . import handler as handlers
from . import vocab
from .host import Host

TRANSPORTS = ("dgram", "stream", "tls", "odgram", "ostream")
TARGETS = TRANSPORTS + ("tlsproto",)
KIND = {
    "dgram": "dgram",
    "odgram": "dgram",
    "stream": "stream",
    "ostream": "stream",
    "tls": "tls",
    "tlsproto": "tlsproto",
}
# the methods a program calls, per kind: the native ones first
METHODS = {
    "dgram": ["sendto", "sendto", "is_closing", "_read_ready", "get_write_buffer_size", "close"],
    "stream": [
        "write",
        "write",
        "writelines",
        "is_closing",
        "_read_ready",
        "_read_ready__data_received",
        "_read_ready__get_buffer",
        "pause_reading",
        "resume_reading",
        "is_reading",
        "get_write_buffer_size",
        "write_eof",
        "close",
        "abort",
    ],
    "tls": [
        "write",
        "write",
        "writelines",
        "is_closing",
        "pause_reading",
        "resume_reading",
        "is_reading",
        "get_write_buffer_size",
        "close",
        "abort",
    ],
    "tlsproto": [
        "_do_read",
        "_do_write",
        "_process_outgoing",
        "_control_app_writing",
        "_control_ssl_reading",
        "get_buffer",
        "buffer_updated",
        "_write_appdata",
    ],
}
# the native methods, which a subclass overrides ("over")
NATIVE = {
    "dgram": ["_read_ready", "sendto"],
    "stream": ["_read_ready", "_read_ready__data_received", "_read_ready__get_buffer", "write"],
    "tls": ["write", "is_closing"],
    "tlsproto": ["get_buffer", "buffer_updated", "_do_read", "_do_write", "_process_outgoing"],
}
# fields the native methods read by slot or dict offset, and what a
# property over them returns instead of the instance's value ("props")
PROPS = {
    "dgram": {"_closing": True, "_conn_lost": 0, "_address": None},
    "stream": {"_closing": True, "_conn_lost": 0, "_eof": True, "_paused": True},
    "tls": {"_closed": True},
    "tlsproto": {"_state": None, "_app_reading_paused": True, "_write_backlog": None},
}
# "sibling": the class of another kind's target
SIBLING = {
    "dgram": "stream",
    "odgram": "stream",
    "stream": "dgram",
    "ostream": "dgram",
    "tls": "stream",
    "tlsproto": "tls",
}
SWAPS = ("sub", "sub", "over", "props", "back", "back", "sibling", "plain")
_QUALIFIED = re.compile(r"'(?:\w+\.)+(\w+)' object has no attribute")
ARGS = ["none", 0, 1, 100, 70000, "bytearray", "memoryview", "str", "list", "hbuf"]


class _Gen:
    def __init__(self, rng):
        self.rng = rng
        self.vocab = vocab.Vocab(self.op, weights={"op": 10, "run": 2, "cancel": 2})

    def arg(self, rng, depth):
        arg = rng.choice(ARGS)
        if arg == "hbuf":
            return vocab.gen_buffer(rng, self.vocab, rng.choice([1, 7, 100]))
        return arg

    def op(self, rng, depth=0):
        target = rng.choice(TARGETS)
        kind = KIND[target]
        pick = rng.randrange(24)
        if pick < 11:
            return ["m", target, rng.choice(METHODS[kind]), self.arg(rng, depth)]
        if pick < 15:
            return ["swap", target, rng.choice(SWAPS)]
        if pick < 17:
            return ["shadow", target, rng.choice(METHODS[kind])]
        if pick < 19:
            how = rng.choice(["object", "cls"])
            return ["bare", target, rng.choice(METHODS[kind]), self.arg(rng, depth), how]
        if pick < 20:
            return ["reloop", rng.choice(TRANSPORTS)]
        if pick < 21:
            return ["close_other"] if rng.randrange(3) == 0 else ["run_other"]
        target = rng.choice(("dgram", "stream", "tls", "odgram", "ostream"))
        return ["proto", target, vocab.gen_actions(rng, self.vocab, depth + 1)]

    def steps(self):
        rng = self.rng
        pick = rng.randrange(12)
        if pick < 1:
            return [["soon", vocab.gen_callback(rng, self.vocab)]]
        if pick < 5:
            # in a callback: a swap between the calls it makes
            return [["call", [self.op(rng) for _ in range(rng.randint(2, 4))]]]
        if pick < 6:
            # an episode: a swap, then the native methods through it
            target = rng.choice(TARGETS)
            kind = KIND[target]
            return [
                ["swap", target, rng.choice(SWAPS)],
                ["call", [["m", target, m, self.arg(rng, 0)] for m in NATIVE[kind]]],
            ]
        return [self.op(rng)]


def generate(rng):
    g = _Gen(rng)
    steps = [s for _ in range(rng.randint(1, 10)) for s in g.steps()]
    return {
        "machine": "natives",
        "handler": rng.choice(handlers.MODES),
        "canary": canaries.draw_order(rng),
        "debug": rng.randrange(4) == 0,
        "steps": steps,
    }


_TLS = None


def _tls_contexts():
    """A server and a client context (one CA per worker: trustme's keys
    take a while)."""
    global _TLS
    if _TLS is None:
        import trustme

        ca = trustme.CA()
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("localhost").configure_cert(server)
        client = ssl.create_default_context()
        ca.configure_trust(client)
        _TLS = server, client
    return _TLS


def _digest(data):
    return [len(data), hashlib.sha256(bytes(data)).hexdigest()[:12]]


class _Recorder(asyncio.Protocol):
    """A protocol of the machine: what it is handed is recorded (by the
    role it plays), the buffered kind's and the datagram kind's too."""

    def __init__(self, host, role):
        self.host, self.role = host, role

    def connection_made(self, transport):
        self.host.rec(["made", self.role])

    def data_received(self, data):
        # how a stream's bytes are cut into reads is timing (a TLS
        # record's, the kernel's): what came is recorded by step
        self.host.received.setdefault(self.role, bytearray()).extend(data)

    def eof_received(self):
        self.host.rec(["eof", self.role])

    def datagram_received(self, data, addr):
        self.host.rec(["datagram", self.role, *_digest(data)])

    def error_received(self, exc):
        self.host.rec(["error_received", self.role, type(exc).__name__])

    def connection_lost(self, exc):
        self.host.rec(["lost", self.role, None if exc is None else type(exc).__name__])

    def pause_writing(self):
        self.host.rec(["pause_writing", self.role])

    def resume_writing(self):
        self.host.rec(["resume_writing", self.role])


class NativesHost(Host):
    def start(self):
        super().start()
        self.other = self.make_loop()
        self.other.set_exception_handler(
            lambda loop, ctx: self.rec(
                ["other handler", self.mask(ctx.get("message")), _exc_name(ctx.get("exception"))]
            )
        )
        self.peers = {}
        self.received = {}  # role -> the bytes its protocol was handed this step
        self.objects = {}
        self.original = {}
        self.classes = {}
        self.run_until(self._make(self.loop, ""))
        self.other.run_until_complete(self._make_other())
        for name, obj in self.objects.items():
            self.original[name] = type(obj)

    async def _make(self, loop, prefix):
        server, _ = await loop.create_datagram_endpoint(
            lambda: _Recorder(self, "dgram server"), local_addr=("127.0.0.1", 0)
        )
        self.dgram_server = server
        addr = server.get_extra_info("sockname")
        self.objects["dgram"], _ = await loop.create_datagram_endpoint(
            lambda: _Recorder(self, "dgram"), remote_addr=addr
        )
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)
        self.peers["stream"] = theirs
        self.objects["stream"], _ = await loop.create_connection(
            lambda: _Recorder(self, "stream"), sock=ours
        )
        server_ctx, client_ctx = _tls_contexts()
        self.tls_server = await loop.create_server(
            lambda: _Recorder(self, "tls server"), "127.0.0.1", 0, ssl=server_ctx
        )
        port = self.tls_server.sockets[0].getsockname()[1]
        tls, _ = await loop.create_connection(
            lambda: _Recorder(self, "tls"),
            "127.0.0.1",
            port,
            ssl=client_ctx,
            server_hostname="localhost",
        )
        self.objects["tls"] = tls
        self.objects["tlsproto"] = tls._ssl_protocol
        # the server side's handshake
        for _ in range(3):
            await asyncio.sleep(0)

    async def _make_other(self):
        loop = self.other
        addr = self.dgram_server.get_extra_info("sockname")
        self.objects["odgram"], _ = await loop.create_datagram_endpoint(
            lambda: _Recorder(self, "odgram"), remote_addr=addr
        )
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)
        self.peers["ostream"] = theirs
        self.objects["ostream"], _ = await loop.create_connection(
            lambda: _Recorder(self, "ostream"), sock=ours
        )

    # -- the ops

    def mask(self, text):
        """handler.mask, loopback ports, and the module of a class an
        AttributeError names: CPython 3.14+ names an unset slot's class
        by its qualified name ('hostile.natives.Sub' object has no
        attribute), a missing instance attribute's by its name alone;
        zloopgo keeps in slots the fields asyncio keeps in the instance's
        dictionary (docs/compatibility.md)."""
        text = re.sub(r"(127\.0\.0\.1(', |:))\d+", r"\1<port>", super().mask(text))
        return _QUALIFIED.sub(r"'\1' object has no attribute", text)

    def payload(self, arg):
        if isinstance(arg, list):
            return vocab.make_value(self, arg)
        if arg == "bytearray":
            return bytearray(b"b" * 10)
        if arg == "memoryview":
            return memoryview(b"m" * 20)[2:]
        if arg == "str":
            return "text"
        if arg == "list":
            return [b"l" * 3, b"l" * 4]
        return b"p" * arg

    def call(self, obj, kind, method, arg):
        fn = getattr(obj, method)
        if method in ("sendto", "write", "_write_appdata"):
            data = self.payload(0 if arg == "none" else arg)
            if method == "_write_appdata" and not isinstance(data, list):
                data = [data]
            return fn(data)
        if method == "writelines":
            data = self.payload(0 if arg == "none" else arg)
            return fn(data if isinstance(data, list) else [data])
        if method == "get_buffer":
            return len(fn(arg if isinstance(arg, int) else -1))
        if method == "buffer_updated":
            return fn(0)
        return fn()

    def klass(self, target, to):
        """The class a swap assigns (made once per program and target)."""
        obj = self.objects[target]
        kind = KIND[target]
        base = self.original[target]
        if to == "back":
            return base
        if to == "sibling":
            return self.original[SIBLING[target]]
        key = (target, to)
        if key in self.classes:
            return self.classes[key]
        host = self
        body = {}
        if to == "over":
            for name in NATIVE[kind]:

                def method(self, *args, _name=name):
                    host.rec(["over", target, _name])
                    return getattr(super(cls, self), _name)(*args)

                method.__name__ = name
                body[name] = method
        elif to == "props":
            for name, value in PROPS[kind].items():
                body[name] = property(lambda self, _v=value: _v)
        elif to == "plain":
            # asyncio's base of the same slots, with a __dict__: the layout
            # of asyncio's own transport classes
            base = asyncio.transports._FlowControlMixin if kind != "tlsproto" else object
        cls = type(f"{to.capitalize()}", (base,), body)
        self.classes[key] = cls
        del obj
        return cls

    def run_op(self, op):
        name = op[0]
        try:
            if name == "m":
                _, target, method, arg = op
                result = self.call(self.objects[target], KIND[target], method, arg)
                if method in ("close", "abort"):
                    self.fill_canary()
            elif name == "swap":
                result = self.swap(*op[1:])
            elif name == "shadow":
                _, target, method = op
                obj = self.objects[target]
                original = getattr(type(obj), method)
                host = self

                def shadow(*args):
                    host.rec(["shadow", target, method])
                    return original(obj, *args)

                setattr(obj, method, shadow)
                result = "shadowed"
            elif name == "bare":
                _, target, method, arg, how = op
                cls = type(self.objects[target])
                bare = object.__new__(cls) if how == "object" else cls.__new__(cls)
                # asyncio's class attribute _sock = None is shadowed by the
                # slot zloopgo's transports keep it in, unset without
                # __init__ (a kept difference, docs/compatibility.md):
                # given, as asyncio's class gives it
                if KIND[target] in ("dgram", "stream"):
                    bare._sock = None
                try:
                    result = self.call(bare, KIND[target], method, arg)
                finally:
                    # what asyncio's finalizers read
                    for attr in ("_sock", "_ssl_protocol"):
                        with contextlib.suppress(AttributeError, TypeError):
                            setattr(bare, attr, None)
            elif name == "reloop":
                self.objects[op[1]]._loop = self.other
                result = None
            elif name == "proto":
                result = self.override(op[1], op[2])
            elif name == "close_other":
                result = self.other.close()
                self.fill_canary()
            elif name == "run_other":
                for _ in range(3):
                    self.other.stop()
                    self.other.run_forever()
                result = None
            else:
                raise AssertionError(f"unknown op {op!r}")
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from a nested run too
            self.rec(["op", name, *op[1:3], "!", type(exc).__name__, self.mask(exc)])
        else:
            self.rec(["op", name, *op[1:3], self.mask(repr(result))])

    def swap(self, target, to):
        """target.__class__ = the class `to` names. zloopgo's transports
        and TLS protocol have a native base that asyncio's have not, so a
        class without it (another kind's, or one on asyncio's base: "plain"
        and "sibling") is refused where asyncio accepts it, a kept
        difference (docs/compatibility.md). That refusal and asyncio's
        acceptance are recorded alike (and asyncio's object given its class
        back, so that both programs go on with the same objects); a
        foreign class zloopgo accepted, or one asyncio refused, as it is."""
        obj = self.objects[target]
        cls = self.klass(target, to)
        before = type(obj)
        try:
            obj.__class__ = cls
        except TypeError as exc:
            if (
                self.loop_name == "zloopgo"
                and "object layout differs" in str(exc)
                and _zloopgo_refuses(target, to)
                and self._asyncio_accepts(before, cls)
            ):
                return "foreign class: asyncio accepts, zloopgo refuses"
            raise
        if self.loop_name != "zloopgo" and _zloopgo_refuses(target, to):
            obj.__class__ = before
            return "foreign class: asyncio accepts, zloopgo refuses"
        return type(obj).__name__

    @staticmethod
    def _asyncio_accepts(before, cls):
        """Whether asyncio takes the same swap: an object of asyncio's
        class of before's kind (a subclass of the same layout whose
        finalizer does nothing) given asyncio's counterpart of cls."""
        classes = _asyncio_classes()
        ours = next(c for c in before.__mro__ if c in classes)
        counterpart = classes.get(cls, cls)
        probe_class = type("Probe", (classes[ours],), {"__del__": lambda self: None})
        probe = object.__new__(probe_class)
        try:
            probe.__class__ = counterpart
        except TypeError:
            return False
        probe.__class__ = probe_class
        return True

    def override(self, target, actions):
        proto = self.objects[target].get_protocol()
        method = "datagram_received" if KIND[target] == "dgram" else "data_received"
        original = getattr(type(proto), method)
        host, calls = self, []

        def replaced(*args):
            host.rec(["override", target, method])
            calls.append(None)
            if len(calls) == 1:
                vocab.run_actions(host, actions)
            return original(proto, *args)

        setattr(proto, method, replaced)
        return "replaced"

    # -- settling and recording

    def drain_peers(self):
        for name, sock in list(self.peers.items()):
            got = b""
            while True:
                try:
                    chunk = sock.recv(1 << 20)
                except (BlockingIOError, OSError):
                    break
                if not chunk:
                    got += b"<eof>"
                    sock.close()  # the canary may take its number now
                    del self.peers[name]
                    break
                got += chunk
            if got:
                self.received.setdefault(f"peer {name}", bytearray()).extend(got)

    def pending(self):
        fds = [s.fileno() for s in self.peers.values() if s.fileno() >= 0]
        return select.select(fds, [], [], 0)[0] if fds else []

    def settle(self, quiet=3):
        still = 0
        for _ in range(300):
            seen = len(self.obs)
            for _ in range(3):
                self.run_once()
                self.fill_canary()
            waiting = self.pending()
            if waiting:
                self.drain_peers()
            if len(self.obs) == seen and not waiting:
                still += 1
                if still >= quiet:
                    return
            else:
                still = 0
        self.rec(["unsettled"])

    def state(self):
        for role in sorted(self.received):
            self.rec(["data", role, *_digest(self.received[role])])
        self.received.clear()
        entry = ["state"]
        for name in TRANSPORTS:
            t = self.objects[name]
            try:
                entry.append([name, t.is_closing(), t.get_write_buffer_size()])
            except BaseException as exc:  # noqa: BLE001 - a swapped class may have neither
                entry.append([name, "!", type(exc).__name__])
        self.rec(entry)

    def program(self):
        self.run_callback_steps()

    def teardown(self):
        super().teardown()
        for name in TRANSPORTS:
            obj = self.objects[name]
            try:
                obj.__class__ = self.original[name]
                obj.close()
            except BaseException:  # noqa: BLE001 - teardown is not compared
                pass
        self.dgram_server.close()
        self.tls_server.close()
        self.settle()
        self.fill_canary()

    def after_close(self):
        """Both loops closed: every target's methods once more."""
        super().after_close()
        if not self.other.is_closed():
            self.other.close()
        for target in TARGETS:
            for method in METHODS[KIND[target]]:
                try:
                    result = repr(self.call(self.objects[target], KIND[target], method, 1))
                except BaseException as exc:  # noqa: BLE001 - the outcome is what is compared
                    result = [type(exc).__name__, self.mask(exc)]
                self.rec(["closed", target, method, result])
        self.fill_canary()

    def close_resources(self):
        for sock in self.peers.values():
            sock.close()
        if getattr(self, "other", None) is not None and not self.other.is_closed():
            self.other.close()


def _native_on_zloopgo(kind):
    """Whether zloopgo's objects of this kind have a native base: its TLS
    classes only with the native record path (3.11+); on 3.10 they are
    asyncio's own, which take a swap as asyncio's do."""
    import zloopgo._tls

    return kind in ("dgram", "stream") or zloopgo._tls.NATIVE_TLS


def _zloopgo_refuses(target, to):
    """Whether zloopgo refuses target's swap to `to` for its layout: a
    class without the native base target's object has, or with another."""
    if to == "plain":
        return _native_on_zloopgo(KIND[target])
    if to == "sibling":
        return _native_on_zloopgo(KIND[target]) or _native_on_zloopgo(KIND[SIBLING[target]])
    return False


@functools.cache
def _asyncio_classes():
    """zloopgo's classes of the machine's kinds -> asyncio's."""
    from asyncio import selector_events, sslproto

    import zloopgo._datagram
    import zloopgo._tls
    import zloopgo._transports

    return {
        zloopgo._datagram.DatagramTransport: selector_events._SelectorDatagramTransport,
        zloopgo._transports.SocketTransport: selector_events._SelectorSocketTransport,
        zloopgo._tls._SSLProtocolTransport: sslproto._SSLProtocolTransport,
        zloopgo._tls.SSLProtocol: sslproto.SSLProtocol,
    }


def _exc_name(exc):
    return None if exc is None else type(exc).__name__


def run(program, loop_name, journal=None):
    return NativesHost(program, loop_name, journal).execute()
