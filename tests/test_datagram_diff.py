"""Generated programs over datagram endpoints, run on asyncio and on
zloopgo, compared observation by observation. zloopgo receives and sends
natively for IPv4 and IPv6 (capi/datagram.c) and hands every other case
to asyncio's Python; these programs walk both sides of each of the native
path's limits:

- what is sent: empty, small, the largest IPv4 datagram and one byte more
  (EMSGSIZE), bytes, bytearray, memoryview, a str;
- where it goes: a connected endpoint with no address, its own address, an
  equal tuple, another address; an unconnected one to the sender's address
  as received, an equal tuple, a 2-tuple for IPv6, a hostname, a float
  port, None;
- max_size: 1, small, the default, 0, negative, 16 MiB and one byte more
  (the native read's largest);
- an endpoint whose peer is gone (ICMP errors to error_received), close and
  abort midway.

Loopback datagrams and their ICMP errors are queued at the send, or
moments later when the kernel defers its packet processing under load;
after each step the program runs the loop until nothing is left to read
on any endpoint and nothing new was observed for two looks a
millisecond apart: every observation is then deterministic, except that
a heavily loaded machine may defer the kernel's work past that, so a
program whose runs differ runs again (helpers.assert_same_observations). Observed:
every datagram (length, digest, sender by role), every error_received
and connection_lost, what each sendto raised, the exception handler's
calls, and each transport's buffer size and closing state after every
step. Both loops must see the same, for each of ZL_DATAGRAM_PROGRAMS
generated programs (seeded; 120 by default).

Every close is watched by the descriptor canary (hostile.canary.Watched:
on Windows its form over handle values, tests/hostile/canary_windows.py),
filled after every loop iteration while settling and after the loop's
close; the test prints what its fills met on each loop and fails unless
it landed on some.

On Windows (run under Wine: scripts/windows long-tests) one case is named,
not compared beyond its start (_known; docs/compatibility.md, "Windows"):
an ICMP error pending on an endpoint whose peer is gone, which zloopgo's
AFD poll reports readable (its read then meets the error, or a negative
max_size) while Wine's select() never does (recv returns the error while
select() calls the socket not readable), so asyncio's reference under
Wine never reads it.
"""

import asyncio
import hashlib
import os
import random
import re
import select
import socket
import sys

import pytest
from helpers import (
    FACTORIES,
    assert_same_observations,
    canary_tallies,
    report_canary_tallies,
    tally_canary,
)
from hostile.canary import Watched
from hostile.handler import probe

import zloopgo
from zloopgo import _datagram

PROGRAMS = int(os.environ.get("ZL_DATAGRAM_PROGRAMS", "120"))
STEPS = 18
SETTLE = 6  # loop iterations after each step
HAVE_IPV6 = socket.has_ipv6

# The "hostname" address: not an address literal (inet_pton refuses it, so
# sendto() resolves it, as it would a name), but answered by the C library
# itself, as 127.0.0.1. "localhost" asked /etc/hosts, and DNS where a
# machine's /etc/hosts lacks it (10 s a send with a server that does not
# answer).
NUMERIC_NAME = "127.1"


def _ipv6_works():
    if not HAVE_IPV6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


IPV6 = _ipv6_works()
PAYLOADS = ["empty", 1, 7, 1024, 9000, 65507, 65508, "bytearray", "memoryview", "str"]
MAX_SIZES = [1, 5, 1024, 65536, 256 * 1024, 0, -1, 1 << 24, (1 << 24) + 1]


def equal_copy(address):
    """A new tuple equal to address (tuple(address) would be address itself)."""
    return tuple(item for item in address)


class Recorder(asyncio.DatagramProtocol):
    def __init__(self, name, log, roles, reply):
        self.name, self.log, self.roles, self.reply = name, log, roles, reply

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        digest = hashlib.sha1(data).hexdigest()[:8]
        self.log.append(
            (self.name, "data", type(data).__name__, len(data), digest, self.roles(addr))
        )
        mode = self.reply[0] if self.name == "server" else "none"
        if mode == "none":
            return
        if mode == "addr":
            to = addr
        elif mode == "rebuilt":
            to = equal_copy(addr)
        elif mode == "two":
            to = (addr[0], addr[1])
        elif mode == "hostname":
            # IPv6 has no name the C library answers alone (the send side
            # skips it too)
            to = (NUMERIC_NAME, addr[1]) if len(addr) == 2 else equal_copy(addr)
        else:  # "float"
            to = (addr[0], float(addr[1])) + tuple(addr[2:])
        try:
            self.transport.sendto(data[:100], to)
        except Exception as exc:  # noqa: BLE001 - recorded, compared with asyncio's
            self.log.append((self.name, "reply raised", type(exc).__name__, self.roles(str(exc))))

    def error_received(self, exc):
        self.log.append((self.name, "error", type(exc).__name__, getattr(exc, "errno", None)))

    def connection_lost(self, exc):
        self.log.append((self.name, "lost", type(exc).__name__ if exc else None))


async def settle(log, ends, canary):
    """Runs the loop until the step's datagrams, replies and ICMP errors
    have all been handled (see the module's docstring); the canary takes
    what each iteration's closes freed."""
    quiet = 0
    for _ in range(500):
        seen = len(log)
        for _ in range(SETTLE):
            await asyncio.sleep(0)
            canary.fill()
        fds = [t.get_extra_info("socket").fileno() for t in ends.values()]
        pending = select.select([fd for fd in fds if fd >= 0], [], [], 0)[0]
        if len(log) == seen and not pending:
            quiet += 1
            if quiet == 2:
                return
            await asyncio.sleep(0.001)
        else:
            quiet = 0
    raise AssertionError("the endpoints never went quiet")


def make_program(rng):
    steps = []
    for _ in range(STEPS):
        kind = rng.choices(["send", "reply", "max_size", "end"], [12, 3, 3, 1])[0]
        if kind == "send":
            who = rng.choice(["connected", "unconnected", "dead"])
            where = rng.choice(
                ["none", "own", "equal", "other"]
                if who != "unconnected"
                else ["equal", "equal", "two", "hostname", "float", "none"]
            )
            steps.append(("send", who, rng.choice(PAYLOADS), where))
        elif kind == "reply":
            steps.append(
                (
                    "reply",
                    rng.choice(["addr", "addr", "rebuilt", "two", "hostname", "float", "none"]),
                )
            )
        elif kind == "max_size":
            steps.append(
                (
                    "max_size",
                    rng.choice(["server", "connected", "unconnected"]),
                    rng.choice(MAX_SIZES),
                )
            )
        else:
            steps.append(
                (rng.choice(["close", "abort"]), rng.choice(["connected", "unconnected", "dead"]))
            )
    return steps


def payload(kind, rng_bytes):
    if kind == "empty":
        return b""
    if kind == "bytearray":
        return bytearray(rng_bytes[:300])
    if kind == "memoryview":
        return memoryview(rng_bytes)[:500]
    if kind == "str":
        return "text"
    return (rng_bytes * (kind // len(rng_bytes) + 1))[:kind]


async def run_program(loop, steps, family, seed, canary):
    host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
    log = []
    ports = {}

    def roles(value):
        text = value if isinstance(value, str) else repr(value)
        for port, role in ports.items():
            text = re.sub(rf"\b{port}\b", role, text)
        return text

    # with what the handler sees: sys.exc_info(), whether logging.exception()
    # prints a traceback, __context__ (hostile.handler.probe)
    loop.set_exception_handler(
        lambda _loop, ctx: log.append(
            ("handler", ctx.get("message"), type(ctx.get("exception")).__name__, probe())
        )
    )
    reply = ["addr"]
    server, _ = await loop.create_datagram_endpoint(
        lambda: Recorder("server", log, roles, reply), local_addr=(host, 0), family=family
    )
    server_addr = server.get_extra_info("sockname")
    gone = socket.socket(family, socket.SOCK_DGRAM)
    gone.bind((host, 0))
    dead_addr = gone.getsockname()
    gone.close()  # nothing listens there: the kernel answers with ICMP
    ends = {"server": server}
    for name, kw in (
        ("connected", {"remote_addr": server_addr[:2]}),
        ("unconnected", {"local_addr": (host, 0)}),
        ("dead", {"remote_addr": dead_addr[:2]}),
    ):
        ends[name], _ = await loop.create_datagram_endpoint(
            lambda name=name: Recorder(name, log, roles, reply), family=family, **kw
        )
    for name, t in ends.items():
        ports[t.get_extra_info("sockname")[1]] = name.upper()
    ports[dead_addr[1]] = "GONE"
    data_rng = random.Random(seed)
    some = bytes(data_rng.randrange(256) for _ in range(1024))
    for step in steps:
        op = step[0]
        try:
            if op == "send":
                _, who, kind, where = step
                t = ends[who]
                target = server_addr if who != "dead" else dead_addr
                addr = {
                    "none": None,
                    "own": t.get_extra_info("peername"),
                    "equal": equal_copy(target),
                    "other": (host, 9),
                    "two": tuple(target[:2]),
                    "hostname": (NUMERIC_NAME, target[1]),
                    "float": (target[0], float(target[1])) + tuple(target[2:]),
                }[where]
                if where == "hostname" and family == socket.AF_INET6:
                    addr = equal_copy(target)
                if addr is None and who != "unconnected":
                    t.sendto(payload(kind, some))
                else:
                    t.sendto(payload(kind, some), addr)
            elif op == "reply":
                reply[0] = step[1]
                if step[1] == "hostname" and family == socket.AF_INET6:
                    reply[0] = "rebuilt"
            elif op == "max_size":
                ends[step[1]].max_size = step[2]
            elif op == "close":
                ends[step[1]].close()
            else:
                ends[step[1]].abort()
        except Exception as exc:  # noqa: BLE001 - recorded, compared with asyncio's
            log.append(("raised", op, type(exc).__name__, roles(str(exc))))
        await settle(log, ends, canary)
        log.append(
            ("state",)
            + tuple((n, t.get_write_buffer_size(), t.is_closing()) for n, t in ends.items())
        )
        log.extend(("canary", kind, what) for kind, what in canary.check())
    for t in ends.values():
        t.close()
    for _ in range(SETTLE):
        await asyncio.sleep(0)
        canary.fill()
    return log


def observe(loop_name, steps, family, seed, tallies):
    loop = FACTORIES[loop_name]()
    # new descriptors (on Windows handle values) take every number a close
    # frees: nothing may reach them
    canary = Watched()
    try:
        log = loop.run_until_complete(run_program(loop, steps, family, seed, canary))
    finally:
        loop.close()
        canary.fill()
        found = canary.check()
        canary.close()
        tally_canary(tallies, loop_name, canary)
    return log + [("canary", kind, what) for kind, what in found]


WSAEMSGSIZE = 10040


def _known(want, got):
    """Why asyncio's observations (want) and zloopgo's (got) may differ:
    the module's docstring names the case; None for any other."""
    if sys.platform != "win32":
        return None
    first = next((i for i, (a, z) in enumerate(zip(want, got, strict=False)) if a != z), None)
    if first is None or want[first][0] != "state":
        return None
    # what zloopgo's read of the error-pending endpoint records where
    # asyncio's loop, not told that it was readable, records nothing
    read = got[first]
    if read[:2] == ("handler", "Fatal read error on datagram transport") or (
        read[1:3] in (("error", "ConnectionRefusedError"), ("error", "ConnectionResetError"))
    ):
        return "Wine: select() does not report a pending ICMP error readable"
    return None


FAMILIES = [socket.AF_INET] + ([socket.AF_INET6] if IPV6 else [])


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_generated_datagram_programs_observe_what_asyncio_observes(family, capsys):
    rng = random.Random(1931 + int(family))
    known = {}
    tallies = canary_tallies()
    for n in range(PROGRAMS):
        steps = make_program(rng)
        why = assert_same_observations(
            f"program {n} ({family.name})",
            steps,
            observe,
            steps,
            family,
            n,
            tallies,
            context=3,
            known=_known,
        )
        if why is not None:
            known.setdefault(why, []).append(n)
    # a named difference is Windows' alone: on Linux every program agrees
    assert sys.platform == "win32" or not known, known
    report_canary_tallies(f"datagram programs ({family.name})", tallies, capsys)


def test_the_echo_takes_the_native_paths_and_the_rest_takes_asyncios(monkeypatch):
    # The programs above prove nothing about the native path if it never
    # ran: count the calls that reach the Python methods.
    calls = {"read": 0, "sendto": 0}
    read_py = _datagram.DatagramTransport._zl_read_ready_python
    send_py = _datagram.DatagramTransport._zl_sendto_python

    def counting_read(self):
        calls["read"] += 1
        return read_py(self)

    def counting_send(self, *args, **kwargs):
        calls["sendto"] += 1
        return send_py(self, *args, **kwargs)

    monkeypatch.setattr(_datagram.DatagramTransport, "_zl_read_ready_python", counting_read)
    monkeypatch.setattr(_datagram.DatagramTransport, "_zl_sendto_python", counting_send)
    loop = zloopgo.new_event_loop()
    log = []
    try:

        async def main():
            reply = ["addr"]
            server, _ = await loop.create_datagram_endpoint(
                lambda: Recorder("server", log, str, reply), local_addr=("127.0.0.1", 0)
            )
            client, _ = await loop.create_datagram_endpoint(
                lambda: Recorder("client", log, str, reply),
                remote_addr=server.get_extra_info("sockname"),
            )
            for _ in range(50):
                client.sendto(b"ping")
                for _ in range(SETTLE):
                    await asyncio.sleep(0)
            native = dict(calls)
            client.sendto(bytearray(b"not bytes"))
            client.max_size = 0
            for _ in range(SETTLE):
                await asyncio.sleep(0)
            client.close()
            server.close()
            return native

        native = loop.run_until_complete(main())
    finally:
        loop.close()
    assert native == {"read": 0, "sendto": 0}
    # the last read, at max_size 0, cuts its datagram short: Linux hands
    # over its first 0 bytes, Windows reports WSAEMSGSIZE to error_received
    # (asyncio's loops as well: the programs above compare max_size 0)
    data = [e for e in log if e[:2] == ("client", "data")]
    if sys.platform == "win32":
        assert len(data) == 50
        assert ("client", "error", "OSError", WSAEMSGSIZE) in log
    else:
        assert len(data) == 51
        assert data[-1][3] == 0
    assert calls == {"read": 1, "sendto": 1}
