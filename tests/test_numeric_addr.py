"""zloopgo._numeric_addr.numeric_getaddrinfo against socket.getaddrinfo.

Whenever numeric_getaddrinfo answers, its answer must equal
socket.getaddrinfo's exactly (same list, same types: AddressFamily and
SocketKind members, str addresses); it never raises, so where getaddrinfo
raises it must have declined (None). The reference is called only where it
cannot consult a name service (numeric host, or AI_NUMERICHOST, or no host),
so the test needs no network.
"""

import itertools
import socket
import sys
import time

import pytest

from zloopgo import _numeric_addr
from zloopgo._numeric_addr import numeric_getaddrinfo

pytestmark = pytest.mark.skipif(
    not _numeric_addr._self_check(), reason="numeric_getaddrinfo is off here (not glibc on Linux)"
)

HOSTS = [
    # answered
    "127.0.0.1",
    "0.0.0.0",
    "255.255.255.255",
    "192.0.2.1",
    b"127.0.0.1",
    "::1",
    "::",
    "0:0:0:0:0:0:0:1",
    "2001:DB8::A",
    "fe80::1",
    "::ffff:192.0.2.1",
    "::192.0.2.1",
    b"::1",
    None,
    # numeric for glibc (inet_aton) but declined here
    "127.1",
    "010.0.0.1",
    "0x7f.0.0.1",
    "2130706433",
    # not numeric, or not a plain address
    "",
    "*",
    "fe80::1%lo",
    "1.2.3.256",
    "127.0.0.1 ",
    "127.0.0.1.",
    "127.0.0.1\x00x",
    "localhost",
    "１２７.0.0.1",
    bytearray(b"127.0.0.1"),
]
PORTS = [None, 0, 80, 65535, 65536, -1, "443", "0080", "", b"8080", b"", " 80", "+80", "http",
         True, 80.0]  # fmt: skip
FAMILIES = [socket.AF_UNSPEC, socket.AF_INET, socket.AF_INET6]
TYPES = [0, socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW]
PROTOS = [0, socket.IPPROTO_TCP, socket.IPPROTO_UDP, socket.IPPROTO_SCTP]
FLAGS = [
    0,
    socket.AI_PASSIVE,
    socket.AI_NUMERICHOST,
    socket.AI_NUMERICSERV,
    socket.AI_PASSIVE | socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
    socket.AI_NUMERICHOST | socket.AI_CANONNAME,
    socket.AI_NUMERICHOST | socket.AI_ADDRCONFIG,
    socket.AI_NUMERICHOST | socket.AI_V4MAPPED,
]


def reference(args):
    try:
        return "ok", socket.getaddrinfo(*args)
    except BaseException as exc:  # noqa: BLE001 - any outcome is compared
        return "raised", exc


def safe_to_ask_libc(host, flags):
    # No name service: no host, or AI_NUMERICHOST forbids a lookup (a
    # service name like 'http' is read from the local /etc/services).
    return host is None or bool(flags & socket.AI_NUMERICHOST)


def test_agrees_with_getaddrinfo_over_a_grid():
    combos = answered = declined = compared = libc_raised = 0
    disagreements = []
    for host, port, family, type_, proto, flags in itertools.product(
        HOSTS, PORTS, FAMILIES, TYPES, PROTOS, FLAGS
    ):
        args = (host, port, family, type_, proto, flags)
        combos += 1
        mine = numeric_getaddrinfo(*args)  # must never raise
        if mine is None:
            declined += 1
            if not safe_to_ask_libc(host, flags):
                continue
        else:
            answered += 1
        outcome, ref = reference(args)
        compared += 1
        if outcome == "raised":
            libc_raised += 1
            if mine is not None:
                disagreements.append((args, mine, ref))
            continue
        if mine is not None and (mine != ref or repr(mine) != repr(ref)):
            disagreements.append((args, mine, ref))
    print(
        f"\n{combos} combinations: numeric_getaddrinfo answered {answered} (all equal to "
        f"socket.getaddrinfo), declined {declined}; {compared} compared with libc, "
        f"of which libc raised {libc_raised}"
    )
    assert not disagreements, disagreements[:10]
    assert combos >= 2000
    assert answered >= 1000


@pytest.mark.parametrize(
    "args",
    [
        ("127.0.0.1", 80),
        ("127.0.0.1", 80, socket.AF_INET, socket.SOCK_STREAM),
        ("127.0.0.1", "8000", 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST),
        ("0.0.0.0", 0, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE),
        ("::1", 8080),
        ("::1", 8080, socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_UDP),
        ("::", 0, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE),
        (b"192.0.2.1", b"443"),
        ("2001:db8::1", None),
        (None, 0, socket.AF_INET, socket.SOCK_STREAM, 0, socket.AI_PASSIVE),
        (None, 0, socket.AF_INET6, socket.SOCK_STREAM, 0, socket.AI_PASSIVE),
        (None, 8080, socket.AF_INET, 0, 0, 0),
        (None, "53", socket.AF_INET6, socket.SOCK_DGRAM, 0, 0),
    ],
)
def test_answers_the_common_cases(args):
    mine = numeric_getaddrinfo(*args)
    assert mine is not None, "declined"
    ref = socket.getaddrinfo(*args)
    assert mine == ref and repr(mine) == repr(ref)


@pytest.mark.parametrize(
    "args",
    [
        # glibc orders the two answers by RFC 6724 (gai.conf, configured addresses)
        (None, 0, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE),
        (None, 80),
        # inet_aton forms, scope ids, service names, flags that depend on the system
        ("127.1", 80),
        ("fe80::1%lo", 80),
        ("127.0.0.1", "http"),
        ("127.0.0.1", 80, 0, 0, 0, socket.AI_ADDRCONFIG),
        ("127.0.0.1", 80, 0, 0, 0, socket.AI_CANONNAME),
        # family mismatches and impossible type/proto pairs: errors in libc
        ("127.0.0.1", 80, socket.AF_INET6),
        ("::1", 80, socket.AF_INET),
        ("127.0.0.1", 80, 0, socket.SOCK_RAW),
        ("127.0.0.1", 80, 0, socket.SOCK_STREAM, socket.IPPROTO_UDP),
        ("example.com", 80),
    ],
)
def test_declines(args):
    assert numeric_getaddrinfo(*args) is None


def test_answer_is_a_fresh_list():
    a = numeric_getaddrinfo("127.0.0.1", 80)
    a.append(None)
    assert numeric_getaddrinfo("127.0.0.1", 80) == socket.getaddrinfo("127.0.0.1", 80)


def test_speed(capsys):
    # Not a timing assertion (a benchmark is not a test): prints per-call times.
    def per_call(fn, n):
        t0 = time.perf_counter()
        for _ in range(n):
            fn("127.0.0.1", 80, 0, socket.SOCK_STREAM)
        return (time.perf_counter() - t0) / n * 1e9

    n = 20000
    per_call(numeric_getaddrinfo, 1000)
    mine = min(per_call(numeric_getaddrinfo, n) for _ in range(3))
    libc = min(per_call(socket.getaddrinfo, n) for _ in range(3))
    with capsys.disabled():
        print(
            f"\ngetaddrinfo('127.0.0.1', 80, type=SOCK_STREAM) on Python "
            f"{sys.version.split()[0]}: numeric_getaddrinfo {mine:.0f} ns/call, "
            f"socket.getaddrinfo {libc:.0f} ns/call ({libc / mine:.1f}x)"
        )
