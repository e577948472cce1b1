"""getaddrinfo for numeric hosts, answered without calling libc's resolver.

``numeric_getaddrinfo(host, port, family, type, proto, flags)`` returns the
list ``socket.getaddrinfo`` would return for the same arguments, or None
when it cannot prove that list without asking libc. None is the only way it
declines: it never raises, so a caller falls back to ``socket.getaddrinfo``
(in asyncio: the executor), which then gives the real answer or the real
error.

What it answers, and why the answer is exact (glibc's getaddrinfo, as
called by CPython's socket module):

- host: a str of ASCII characters or bytes that ``inet_pton`` accepts for
  IPv4 (exactly four decimal parts, no leading zeros: glibc would read
  '010.0.0.1' as octal and also accepts '127.1', so those are declined) or
  for IPv6 without a scope id ('%'). glibc tries its own IPv4 parser and
  then the same ``inet_pton``, and CPython formats the address with
  ``inet_ntop``, which is what this module does. None as host with family
  AF_INET or AF_INET6: the loopback address, or the wildcard with
  AI_PASSIVE (host and port both None is an error: declined). Declined:
  names, '' and '*' (glibc reads '*' as None), and None with AF_UNSPEC,
  whose two answers glibc orders by the RFC 6724 rules (gai.conf, which
  addresses and routes the machine has).
- the host's family must be the one asked for, or AF_UNSPEC; a mismatch is
  an error or a name lookup in glibc, so it is declined.
- port: None, an int (exactly int, not bool) in 0..65535, or a str / bytes
  of ASCII digits whose value is at most 65535 ('' means 0). Service names,
  signs, spaces and larger numbers (glibc truncates them to 16 bits) are
  declined.
- type and proto: (0, 0) gives SOCK_STREAM/TCP, SOCK_DGRAM/UDP, SOCK_RAW/0 in
  that order; SOCK_STREAM with proto 0 or TCP; SOCK_DGRAM with proto 0 or
  UDP; type 0 with TCP or UDP. Everything else is declined (SOCK_RAW with a
  port is an error, other protocols pick other rows of glibc's table).
- flags: any combination of AI_PASSIVE, AI_NUMERICHOST and AI_NUMERICSERV.
  AI_CANONNAME, AI_V4MAPPED, AI_ALL and AI_ADDRCONFIG (which depends on the
  interfaces configured at the moment of the call) are declined, as is any
  other bit.

The rules above are glibc's, so the module only answers on Linux with
glibc, and only after a one-time self-check: on first use it compares its
own answers for a few numeric inputs with ``socket.getaddrinfo`` (numeric,
so no name service is consulted) and declines everything for the life of
the process if any differs.
"""

import os
import socket
import sys

__all__ = ["numeric_getaddrinfo"]

_AF_UNSPEC = socket.AF_UNSPEC
_AF_INET = socket.AF_INET
_AF_INET6 = getattr(socket, "AF_INET6", None)
_STREAM = socket.SOCK_STREAM
_DGRAM = socket.SOCK_DGRAM
_RAW = socket.SOCK_RAW
_TCP = socket.IPPROTO_TCP
_UDP = socket.IPPROTO_UDP
_ALLOWED_FLAGS = int(socket.AI_PASSIVE | socket.AI_NUMERICHOST | socket.AI_NUMERICSERV)
_OTHER_FLAGS = ~_ALLOWED_FLAGS  # also catches any negative flags
_PASSIVE = int(socket.AI_PASSIVE)

# (type, proto) -> the (type, proto) rows glibc returns, in its order.
_KINDS = {
    (0, 0): ((_STREAM, _TCP), (_DGRAM, _UDP), (_RAW, 0)),
    (0, _TCP): ((_STREAM, _TCP),),
    (0, _UDP): ((_DGRAM, _UDP),),
    (_STREAM, 0): ((_STREAM, _TCP),),
    (_STREAM, _TCP): ((_STREAM, _TCP),),
    (_DGRAM, 0): ((_DGRAM, _UDP),),
    (_DGRAM, _UDP): ((_DGRAM, _UDP),),
}
# Looked up with the caller's type and proto as they are: IntEnum members and
# bools hash and compare like the ints getaddrinfo reads them as.

_DIGITS = frozenset("0123456789")
_DIGIT_BYTES = frozenset(b"0123456789")

# Numeric host (str or bytes) -> (family, address as inet_ntop writes it), or
# False for "not a numeric host this module answers". Bounded.
_hosts = {}
_HOSTS_MAX = 512

# None: not checked yet; True: answers; False: declines everything.
_enabled = None


def _parse_host(host):
    kind = type(host)
    if kind is not str and kind is not bytes:
        return False  # subclasses and other types: left to getaddrinfo
    info = _hosts.get(host)
    if info is not None:
        return info
    info = False
    if not host.isascii():
        text = None
    elif kind is bytes:
        text = host.decode("ascii")
    else:
        text = host
    if text and "%" not in text and "\x00" not in text:
        for af in (_AF_INET, _AF_INET6):
            if af is None:
                continue
            try:
                info = (af, socket.inet_ntop(af, socket.inet_pton(af, text)))
                break
            except (OSError, ValueError):
                pass
    if len(_hosts) >= _HOSTS_MAX:
        _hosts.clear()
    _hosts[host] = info
    return info


def _parse_port(port):
    if port is None:
        return 0
    kind = type(port)
    if kind is int:
        return port if 0 <= port <= 65535 else None
    if kind is str:
        if len(port) > 5 or not _DIGITS.issuperset(port):
            return None
    elif kind is bytes:
        if len(port) > 5 or not _DIGIT_BYTES.issuperset(port):
            return None
    else:
        return None
    value = int(port) if port else 0
    return value if value <= 65535 else None


def numeric_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    """socket.getaddrinfo's exact result for a numeric host, or None when
    that cannot be known without libc (see the module's docstring)."""
    if not _enabled and (_enabled is not None or not _self_check()):
        return None
    return _answer(host, port, family, type, proto, flags)


def _answer(host, port, family, type, proto, flags):
    # The integer arguments: exact ints (or IntEnum / IntFlag members, which
    # getaddrinfo takes as ints too); anything else is left to getaddrinfo.
    if not (
        isinstance(family, int)
        and isinstance(type, int)
        and isinstance(proto, int)
        and isinstance(flags, int)
    ):
        return None
    if flags & _OTHER_FLAGS:
        return None
    kinds = _KINDS.get((type, proto))
    if kinds is None:
        return None
    if host is None and port is None:
        return None  # neither: an error (EAI_NONAME) in getaddrinfo
    port = _parse_port(port)
    if port is None:
        return None
    if host is None:
        if family == _AF_INET:
            addr = "0.0.0.0" if flags & _PASSIVE else "127.0.0.1"
            af = _AF_INET
        elif family == _AF_INET6 and _AF_INET6 is not None:
            addr = "::" if flags & _PASSIVE else "::1"
            af = _AF_INET6
        else:
            return None  # AF_UNSPEC: two addresses in an order only libc knows
    else:
        info = _parse_host(host)
        if not info:
            return None
        af, addr = info
        if family != af and family != _AF_UNSPEC:
            return None
    sockaddr = (addr, port) if af is _AF_INET else (addr, port, 0, 0)
    if len(kinds) == 1:
        ((t, p),) = kinds
        return [(af, t, p, "", sockaddr)]
    (t0, p0), (t1, p1), (t2, p2) = kinds
    return [(af, t0, p0, "", sockaddr), (af, t1, p1, "", sockaddr), (af, t2, p2, "", sockaddr)]


# ---- the one-time self-check ----------------------------------------------------

_N = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_PROBES = [
    ("127.0.0.1", 80, 0, 0, 0, _N),
    (b"10.1.2.3", "8080", _AF_INET, 0, 0, _N),
    ("127.0.0.1", None, 0, _STREAM, 0, _N),
    ("127.0.0.1", 0, 0, 0, _UDP, _N),
    ("255.255.255.255", 65535, 0, _DGRAM, _UDP, _N),
    ("::1", 443, 0, 0, 0, _N),
    ("0:0::1", b"", _AF_INET6, _STREAM, _TCP, _N),
    ("FE80::A:1", 1, 0, 0, _TCP, _N),
    ("::ffff:192.0.2.1", 5, 0, _DGRAM, 0, _N),
    (None, 80, _AF_INET, _STREAM, 0, socket.AI_PASSIVE),
    (None, "80", _AF_INET, 0, 0, 0),
    (None, 0, _AF_INET6, 0, 0, socket.AI_PASSIVE),
    (None, 1234, _AF_INET6, _DGRAM, 0, 0),
]


def _libc_is_glibc():
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc ")
    except (ValueError, OSError, AttributeError):
        return False


def _self_check():
    global _enabled
    ok = sys.platform.startswith("linux") and _AF_INET6 is not None and _libc_is_glibc()
    if ok:
        try:
            for args in _PROBES:
                mine = _answer(*args)
                libc = socket.getaddrinfo(*args)
                if mine is None or mine != libc or repr(mine) != repr(libc):
                    ok = False
                    break
        except (OSError, ValueError, TypeError):  # gaierror is an OSError
            ok = False
    _enabled = ok
    _hosts.clear()
    return ok
