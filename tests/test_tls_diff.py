"""Generated programs over a TLS connection, run on asyncio and on zloopgo,
compared observation by observation. On zloopgo (CPython 3.11+) the
methods of asyncio's SSLProtocol and _SSLProtocolTransport that carry each
record are native (capi/tls.c, zloopgo/_tls.py): the write into the SSL
object and on to the socket, the read out of it and into the application,
the flow-control marks on both sides. These programs walk both sides of
each limit that code has:

- both ends of one connection are the loop's: a client from
  create_connection(ssl=) and a server from connect_accepted_socket(ssl=),
  or both upgraded by loop.start_tls(), over a socket pair whose buffers
  are small, 64 KiB or large;
- writes and writelines of 1 byte to many records (16 KiB each, and one
  byte either side), as bytes, bytearray (changed after the call),
  memoryview, a memoryview of another format, and values write refuses;
- each end's application a Protocol or a BufferedProtocol whose buffer is
  1 byte to 64 KiB, and the SSL protocol's max_size asyncio's or below a
  record (decrypted bytes then wait in OpenSSL between reads);
- set_write_buffer_limits (pause_writing and resume_writing around the
  marks, with the SSL object's outgoing bytes counted), pause_reading and
  resume_reading (the read marks of the SSL protocol), a data_received or
  buffer_updated that raises, close, abort.

After each step the loop runs SETTLE iterations. Observed: every protocol
call (data by length and digest), what each call returned or raised, each
end's get_write_buffer_size, is_closing and is_reading after every step,
and the exception handler's calls (message and exception; the protocol's
class name, zloopgo's own, is masked). Both loops must see the same for
ZL_TLS_PROGRAMS generated programs (seeded; 200 by default).
"""

import asyncio
import hashlib
import os
import random
import re
import socket
import sys

import pytest
from helpers import FACTORIES, assert_same_observations
from hostile.canary import Canary
from hostile.handler import probe

from zloopgo import _tls

PROGRAMS = int(os.environ.get("ZL_TLS_PROGRAMS", "200"))
STEPS = 14
SETTLE = 8
SIZES = [1, 100, 16383, 16384, 16385, 40000, 65536, 200_000]
CHUNKS = [1, 100, 16384, 65536]
SOCKBUFS = [4096, 65536, 1 << 20]
HIGHS = [None, 0, 1, 16384, 65536, 200_000]
LOWS = [None, 0, 1, 8192]
# SSLProtocol.max_size, what one SSLObject.read asks for: None leaves
# asyncio's 256 KiB; below a record (16 KiB) a read leaves decrypted bytes
# in OpenSSL (SSL_pending), which the native read loop must go on reading
MAX_SIZES = [None, None, 100, 16384]
KINDS = ["bytes", "bytearray", "memoryview", "mv_words", "str", "int"]
if sys.version_info < (3, 11):
    # 3.10's SSL pipe (asyncio.sslproto._SSLPipe.feed_appdata) counts the
    # view's length in items and what the SSL object took in bytes, so a
    # write of a memoryview of 4-byte items never leaves its loop, on
    # either loop: zloopgo runs asyncio's own sslproto there.
    KINDS.remove("mv_words")


def _payload(kind, size, seed):
    data = bytes((seed + i) % 251 for i in range(size))
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    if kind == "mv_words":  # len() counts items, not bytes
        return memoryview(data[: size - size % 4] or b"\0\0\0\0").cast("I")
    if kind == "str":
        return "x" * size
    return size


def _digest(data):
    return len(data), hashlib.sha256(data).hexdigest()[:8]


class Recorder(asyncio.Protocol):
    def __init__(self, name, log):
        self.name, self.log = name, log
        self.transport = None
        self.raising = False

    def connection_made(self, transport):
        self.transport = transport
        self.log.append((self.name, "made"))

    def data_received(self, data):
        self.log.append((self.name, "data", *_digest(data)))
        if self.raising:
            self.raising = False
            raise RuntimeError("data_received fails")

    def eof_received(self):
        self.log.append((self.name, "eof"))

    def connection_lost(self, exc):
        self.log.append((self.name, "lost", type(exc).__name__, str(exc)))

    def pause_writing(self):
        self.log.append((self.name, "pause_writing"))

    def resume_writing(self):
        self.log.append((self.name, "resume_writing"))


class BufferedRecorder(Recorder, asyncio.BufferedProtocol):
    def __init__(self, name, log, chunk):
        super().__init__(name, log)
        self.buf = bytearray(chunk)

    def get_buffer(self, sizehint):
        self.log.append((self.name, "get_buffer"))
        return self.buf

    def buffer_updated(self, nbytes):
        self.log.append((self.name, "data", *_digest(bytes(self.buf[:nbytes]))))
        if self.raising:
            self.raising = False
            raise RuntimeError("buffer_updated fails")


def _program(rng):
    ends = [
        {
            "buffered": rng.random() < 0.3,
            "chunk": rng.choice(CHUNKS),
            "max_size": rng.choice(MAX_SIZES),
        }
        for _ in range(2)
    ]
    steps = []
    for _ in range(rng.randint(1, STEPS)):
        end = rng.randrange(2)
        pick = rng.random()
        if pick < 0.45:
            kind = rng.choice(KINDS) if rng.random() < 0.2 else rng.choice(KINDS[:3])
            step = ["write", end, kind, rng.choice(SIZES)]
        elif pick < 0.55:
            step = ["writelines", end, [rng.choice(SIZES) for _ in range(rng.randint(0, 3))]]
        elif pick < 0.65:
            step = ["limits", end, rng.choice(HIGHS), rng.choice(LOWS)]
        elif pick < 0.75:
            step = ["pause_reading", end]
        elif pick < 0.85:
            step = ["resume_reading", end]
        elif pick < 0.92:
            step = ["raise_next", end]
        else:
            step = [rng.choice(["close", "abort"]), end]
        step.append(rng.random() < 0.5)  # in a callback, or between iterations
        steps.append(step)
    how = rng.choice(["connect", "start_tls"])
    return {"sockbuf": rng.choice(SOCKBUFS), "how": how, "ends": ends, "steps": steps}


def _mask(text):
    # zloopgo's SSLProtocol and transports name their own classes
    text = re.sub(r"<[\w.]*(SSLProtocol|Transport)[^>]*>", "<masked>", text)
    return re.sub(r"0x[0-9a-f]+", "0x", text)


def _observe(loop_name, program, contexts, classes=None):
    server_ctx, client_ctx = contexts
    log = []
    loop = FACTORIES[loop_name]()
    # with what the handler sees: sys.exc_info(), whether logging.exception()
    # prints a traceback, __context__ (hostile.handler.probe)
    loop.set_exception_handler(
        lambda lp, ctx: log.append(
            ("handler", _mask(ctx["message"]), type(ctx.get("exception")).__name__, probe())
        )
    )
    # new descriptors take every number a close frees: nothing may reach them
    canary = Canary()
    protos = []
    for i, end in enumerate(program["ends"]):
        name = "client" if i == 0 else "server"
        protos.append(
            BufferedRecorder(name, log, end["chunk"]) if end["buffered"] else Recorder(name, log)
        )
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, program["sockbuf"])
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, program["sockbuf"])

    def gather(*coros):
        return asyncio.gather(*(loop.create_task(c) for c in coros))

    def settle():
        for _ in range(SETTLE):
            loop.stop()
            loop.run_forever()
            canary.fill()

    def state():
        for p in protos:
            seen = [p.name, "state"]
            for ask in ("get_write_buffer_size", "is_closing", "is_reading"):
                try:
                    seen.append(getattr(p.transport, ask)())
                except Exception as exc:  # noqa: BLE001 (after close: asyncio's AttributeError)
                    seen.append(type(exc).__name__)
            log.append(tuple(seen))

    def act(step):
        what, end = step[0], step[1]
        t = protos[end].transport
        try:
            if what == "write":
                data = _payload(step[2], step[3], len(log))
                r = t.write(data)
                if isinstance(data, bytearray):
                    data[:] = b"!" * len(data)
            elif what == "writelines":
                r = t.writelines([_payload("bytes", n, len(log) + n) for n in step[2]])
            elif what == "limits":
                r = t.set_write_buffer_limits(step[2], step[3])
                r = (r, t.get_write_buffer_limits())
            elif what == "raise_next":
                protos[end].raising = True
                r = None
            else:
                r = getattr(t, what)()
            log.append((protos[end].name, what, "->", repr(r)))
        except Exception as exc:  # noqa: BLE001 (what the call raised is observed)
            log.append((protos[end].name, what, "raised", type(exc).__name__, _mask(str(exc))))

    try:
        if program.get("how", "connect") == "connect":
            server = loop.connect_accepted_socket(lambda: protos[1], b, ssl=server_ctx)
            client = loop.create_connection(
                lambda: protos[0], sock=a, ssl=client_ctx, server_hostname="localhost"
            )
            loop.run_until_complete(gather(server, client))
        else:  # plain connections first, then loop.start_tls on each end
            plain = loop.run_until_complete(
                gather(
                    loop.connect_accepted_socket(lambda: protos[1], b),
                    loop.create_connection(lambda: protos[0], sock=a),
                )
            )
            server = loop.start_tls(plain[0][0], protos[1], server_ctx, server_side=True)
            client = loop.start_tls(plain[1][0], protos[0], client_ctx, server_hostname="localhost")
            tls = loop.run_until_complete(gather(server, client))
            protos[1].transport, protos[0].transport = tls
        if classes is not None:
            classes.extend(type(p.transport._ssl_protocol) for p in protos)
        for p, end in zip(protos, program["ends"], strict=True):
            if end["max_size"] is not None:
                p.transport._ssl_protocol.max_size = end["max_size"]
        settle()
        state()
        for step in program["steps"]:
            if step[-1]:
                loop.call_soon(act, step)
            else:
                act(step)
            settle()
            state()
            log.extend(("canary", kind, what) for kind, what in canary.check())
        for p in protos:
            p.transport.abort()
        settle()
    finally:
        loop.close()
        a.close()
        b.close()
        canary.fill()
        log.extend(("canary", kind, what) for kind, what in canary.check())
        canary.close()
    return log


@pytest.mark.parametrize("seed", range(PROGRAMS))
def test_tls_records_match_asyncio(seed, tls_contexts):
    # (a program that differs fails with its steps: replay it with
    # _observe(loop, program, contexts) on each loop)
    program = _program(random.Random(seed))
    assert_same_observations(f"TLS program {seed}", program, _observe, program, tls_contexts)


def test_the_native_tls_path_is_taken(tls_contexts):
    # zloopgo's connections get its SSLProtocol (3.11+), whose record
    # methods are the adapter's
    end = {"buffered": False, "chunk": 1, "max_size": None}
    want = _tls.SSLProtocol if _tls.NATIVE_TLS else asyncio.sslproto.SSLProtocol
    for how in ("connect", "start_tls"):
        program = {"sockbuf": 65536, "how": how, "ends": [end, end], "steps": []}
        classes = []
        log = _observe("zloopgo", program, tls_contexts, classes)
        assert ("client", "made") in log and ("server", "made") in log
        assert classes == [want, want], how
    if _tls.NATIVE_TLS:
        assert type(_tls.SSLProtocol.buffer_updated).__name__ == "method_descriptor"
        assert type(_tls._SSLProtocolTransport.write).__name__ == "method_descriptor"
