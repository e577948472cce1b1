"""Every private asyncio name zloopgo relies on, checked against the
running Python's asyncio, so that the next asyncio change is found by a
test and not by a user. A failure names what changed and where zloopgo
depends on it:

- the code zloopgo does again in C or Python (the stream fast path, the
  socket transport's read and write, the run loop's steps, scheduling,
  descriptor watching, handles, the datagram read): a fingerprint of each
  function's source (its tokens, without comments and docstring) must be
  one zloopgo was checked against;
- the methods it overrides or calls on BaseEventLoop,
  BaseSelectorEventLoop, _UnixSelectorEventLoop, _SelectorSocketTransport
  and _SelectorDatagramTransport, with their signatures, and that none of
  zloopgo's own names shadows an asyncio one;
- the attributes asyncio's loop and transport set, which zloopgo's native
  parts must know (a new one is reported for review);
- every attribute and method name the C adapter reads (the name tables in
  capi/*.c), on the asyncio object it reads it from;
- run_forever's steps, and which of them zloopgo takes on this Python;
- StreamReaderProtocol's and StreamReader's internals the fast path feeds;
- sslproto's internals the native read feeds (a BufferedProtocol);
- that asyncio's code reaches the loop state zloopgo replaces (the ready
  queue, the timer heap, the selector) only through methods zloopgo
  overrides.
"""

import ast
import asyncio
import collections
import contextvars
import hashlib
import importlib
import inspect
import io
import re
import selectors
import socket
import ssl
import sys
import textwrap
import threading
import tokenize
from asyncio import base_events, events, selector_events, sslproto, streams, unix_events
from pathlib import Path

import pytest

import zloopgo
from zloopgo import _datagram, _engine, _loop, _pipes, _sockmethods, _tls, _transports

ROOT = Path(__file__).resolve().parent.parent
VERSION = sys.version.split()[0]

# ---- code zloopgo does again: the fingerprints it was checked against ------

# name: (what in zloopgo depends on it, {fingerprint: the CPython versions it
# was seen on and checked against}). A function whose fingerprint is not
# listed changed: review the zloopgo side named, then add the fingerprint.
STREAMS = "capi/streamfeed.c (the stream fast path)"
TRANSPORT_READ = "capi/transport.c (the native read)"
TRANSPORT_WRITE = "capi/transport.c and zloopgo/_transports.py (the native write)"
SCHEDULE = "capi/schedule.c (call_soon and the rest)"
FDS = "capi/fds.c (descriptor watching) and zloopgo/_loop.py"
HANDLES = "capi/handle.c and zloopgo/_loop.py's _handle_repr"
DATAGRAM = "capi/datagram.c and zloopgo/_datagram.py (the native receive and sendto)"
SOCK_METHODS = (
    "zloopgo/_sockmethods.py (asyncio's sock_recv, sock_recv_into, sock_sendall and "
    "sock_recvfrom, but for the receive and the adapter asked first)"
)
SOCK_OPS = "capi/sockops.c (asyncio's sock_recv, sock_recv_into and sock_sendall steps, natively)"
PIPES = "zloopgo/_pipes.py (the read pipe transport's _read_ready, asyncio's own but for the read)"
TLS = "capi/tls.c and zloopgo/_tls.py (the native TLS record path)"
REVIEWED = {
    "asyncio.streams.StreamReaderProtocol.data_received": (
        STREAMS,
        {"3097bcd186dd": "3.10.13-3.15.2"},
    ),
    "asyncio.streams.StreamReaderProtocol._stream_reader": (
        STREAMS,
        {"66927725b6b9": "3.10.13-3.15.2"},
    ),
    "asyncio.streams.StreamReader.feed_data": (STREAMS, {"7ba0cb0adc26": "3.10.13-3.15.2"}),
    "asyncio.streams.StreamReader._wakeup_waiter": (STREAMS, {"321e847a09d5": "3.10.13-3.15.2"}),
    "asyncio.selector_events._SelectorSocketTransport._read_ready": (
        TRANSPORT_READ,
        {"1025ddf71a1e": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events._SelectorSocketTransport._read_ready__data_received": (
        TRANSPORT_READ,
        {"cda5c5b783bf": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events._SelectorSocketTransport._read_ready__get_buffer": (
        TRANSPORT_READ,
        {"5d67048aaaea": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events._SelectorSocketTransport.is_closing": (
        TRANSPORT_READ,
        {"47f95cfc4dc6": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events._SelectorSocketTransport.write": (
        TRANSPORT_WRITE,
        {
            "8eb80198065d": "3.10.13-3.11.7",
            "0dcc0900ca71": "3.12.1-3.13.0",
            "8b355a7474ab": "3.13.15, 3.14.8 (the TypeError names the types)",
            "92989eb88a0e": "3.15.2 (_buffer_size; the writer through the transport)",
        },
    ),
    "asyncio.selector_events._SelectorDatagramTransport._read_ready": (
        DATAGRAM,
        {"6d81adf68c62": "3.10.13-3.15.2"},
    ),
    # capi/datagram.c sends natively only on the path all of these share
    # (bytes, nothing buffered, the connection not lost) and hands the rest
    # (empty data, buffering, the address check's error) to asyncio's sendto
    "asyncio.selector_events._SelectorDatagramTransport.sendto": (
        DATAGRAM,
        {
            "bf08662713e0": "3.10.13",
            "6be498f5bfb8": "3.11.7-3.12.1 (_buffer_size)",
            "0300f0ff62fc": "3.13.0 (empty datagrams sent; the header counted)",
            "7b5032d499b0": "3.13.15, 3.14.8 (_header_size)",
            "aab1571fbe61": "3.15.2 (the writer through the transport)",
        },
    ),
    "asyncio.unix_events._UnixReadPipeTransport._read_ready": (
        PIPES,
        {"39fbea6d93e5": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop.sock_recv": (
        f"{SOCK_METHODS}; {SOCK_OPS}",
        {"8c442e2bcc03": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._sock_recv": (
        SOCK_OPS,
        {"9a0219ddec6f": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop.sock_recv_into": (
        f"{SOCK_METHODS}; {SOCK_OPS}",
        {"f9035a186775": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._sock_recv_into": (
        SOCK_OPS,
        {"2c9e4a4d0368": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop.sock_sendall": (
        f"{SOCK_METHODS}; {SOCK_OPS}",
        {"2a48123b3b5c": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._sock_sendall": (
        SOCK_OPS,
        {"f053a7d7d2de": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._sock_read_done": (
        SOCK_OPS,
        {"8305af992cf3": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._sock_write_done": (
        SOCK_OPS,
        {"c177fb9e1d5c": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._ensure_fd_no_transport": (
        SOCK_OPS,
        {
            "463c7be16bb9": "3.10.13-3.12.1",
            "8d2eb8ef6be3": "3.13.0-3.15.2 (_transports.get)",
        },
    ),
    "asyncio.selector_events.BaseSelectorEventLoop.remove_reader": (
        SOCK_OPS,
        {"0ac86e604af7": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop.remove_writer": (
        SOCK_OPS,
        {"b4c238695afd": "3.10.13-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._add_reader": (
        FDS,
        {
            "50836f0552aa": "3.10.13-3.12.1",
            "a7badcb3f4ba": "3.13.0-3.14.8",
            "cffbdc6aae47": "3.15.2 (context=: _engine.set_handle_context)",
        },
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._add_writer": (
        FDS,
        {
            "a65270a17d21": "3.10.13-3.12.1",
            "7d17e55fb585": "3.13.0-3.14.8",
            "5acac77c808c": "3.15.2 (context=: _engine.set_handle_context)",
        },
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._remove_reader": (
        FDS,
        {"54d1ca2ceaf4": "3.10.13-3.12.1", "36af943b7b77": "3.13.0-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._remove_writer": (
        FDS,
        {"0fef6750f96c": "3.10.13-3.12.1", "fdcc79726178": "3.13.0-3.15.2"},
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._make_socket_transport": (
        "zloopgo/_loop.py's _make_socket_transport",
        {
            "a8e249698346": "3.10.13-3.11.7",
            "e1d4c5fa0652": "3.12.1-3.14.8, 3.13.15",
            "c5244bf7508a": "3.15.2 (context=)",
        },
    ),
    "asyncio.selector_events.BaseSelectorEventLoop._make_datagram_transport": (
        "zloopgo/_loop.py's _make_datagram_transport",
        {"c540d2d41c4f": "3.10.13-3.11.7", "9dde07011533": "3.12.1-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.run_forever": (
        "zloopgo/_loop.py's run_forever (its steps)",
        {
            "db79e236f4d8": "3.10.13-3.12.1 (inline)",
            "27eadb5d947b": "3.13.0 (setup inside the try)",
            "bb2e74dbb917": "3.13.15, 3.14.8-3.15.2 (setup before the try)",
        },
    ),
    "asyncio.base_events.BaseEventLoop.create_task": (
        "capi/tasks.c (create_task)",
        {
            "e710da6d5b03": "3.10.13",
            "47de4fae70cb": "3.11.7-3.12.1",
            "6e957e6b9ad1": "3.13.0",
            "d6f885c6cdf2": "3.13.15 (name=, context= and **kwargs)",
            "ba8b60954aa9": "3.14.8-3.15.2 (**kwargs)",
        },
    ),
    "asyncio.base_events.BaseEventLoop.create_future": (
        "capi/tasks.c (create_future)",
        {"d99693217140": "3.10.13-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.call_soon": (SCHEDULE, {"0c54e5f73a65": "3.10.13-3.15.2"}),
    "asyncio.base_events.BaseEventLoop._call_soon": (
        SCHEDULE,
        {"285b9836c740": "3.10.13-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.call_soon_threadsafe": (
        SCHEDULE,
        {
            "c4cfcb1b5a9f": "3.10.13-3.13.0",
            "636689069c6a": "3.14.8-3.15.2 (zloopgo/_loop.py returns asyncio's _ThreadSafeHandle)",
        },
    ),
    "asyncio.base_events.BaseEventLoop.call_later": (
        SCHEDULE,
        {"a1a43a17c36c": "3.10.13", "1547d362df25": "3.11.7-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.call_at": (
        SCHEDULE,
        {"896e0bb4237c": "3.10.13", "6daa1e02f4c2": "3.11.7-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.time": (
        "capi/clock.c (time)",
        {"64cb4b7e46fa": "3.10.13-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.stop": (
        "capi/loop.c (stop)",
        {"8b77c8a4f23a": "3.10.13-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.get_debug": (
        "capi/loop.c (get_debug)",
        {"9e7a90610d53": "3.10.13-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop._add_callback": (
        "zloopgo/_loop.py's _add_callback",
        {"b0562cfc8829": "3.10.13-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.getaddrinfo": (
        "zloopgo/_loop.py's getaddrinfo (its debug path)",
        {"d7b38660df1c": "3.10.13-3.15.2"},
    ),
    "asyncio.base_events.BaseEventLoop.getnameinfo": (
        "zloopgo/_loop.py's getnameinfo (its debug path)",
        {"ef11a92b81cc": "3.10.13-3.15.2"},
    ),
    "asyncio.events.Handle._run": (
        HANDLES,
        {"f379c8105737": "3.10.13-3.12.1", "3c09b551b5d5": "3.13.0-3.15.2"},
    ),
    "asyncio.events.Handle.cancel": (HANDLES, {"29eb7dd262aa": "3.10.13-3.15.2"}),
    "asyncio.events.Handle._repr_info": (
        HANDLES,
        {"5c82be0e5bb2": "3.10.13-3.12.1", "9b065700ebca": "3.13.0-3.15.2"},
    ),
    "asyncio.events.TimerHandle.cancel": (HANDLES, {"84d6460097ba": "3.10.13-3.15.2"}),
    "asyncio.events.TimerHandle._repr_info": (HANDLES, {"cd43771e1032": "3.10.13-3.15.2"}),
}
if sys.version_info >= (3, 11):  # sock_recvfrom is new in 3.11
    REVIEWED["asyncio.selector_events.BaseSelectorEventLoop.sock_recvfrom"] = (
        SOCK_METHODS,
        {"6610b224f760": "3.11.7-3.15.2"},
    )
    REVIEWED["asyncio.selector_events.BaseSelectorEventLoop._sock_recvfrom"] = (
        SOCK_METHODS,
        {"d16609fc1e31": "3.11.7-3.15.2"},
    )

if sys.version_info >= (3, 11):  # 3.10's sslproto is another state machine
    _SSL = "asyncio.sslproto.SSLProtocol."
    for _method, _print in {
        "get_buffer": "6980441e1265",
        "buffer_updated": "a5ded1919622",
        "_do_read": "6339aaa596c3",
        "_do_read__copied": "cf6a5da7b479",
        "_do_write": "c003faa16497",
        "_process_outgoing": "a9dff278289b",
        "_write_appdata": "b4aa5864f6a9",
        "_control_app_writing": "0acdbaad8733",
        "_control_ssl_reading": "f1868aa52e87",
        "_get_write_buffer_size": "9fd4e5ecf8e7",
        "_get_read_buffer_size": "ba7050052054",
        "_get_app_transport": "9b5bf620f6bc",
    }.items():
        REVIEWED[_SSL + _method] = (TLS, {_print: "3.11.7-3.15.2"})
    REVIEWED["asyncio.sslproto._SSLProtocolTransport.write"] = (
        TLS,
        {"a7a1ac2b5f5b": "3.11.7-3.15.2"},
    )
    REVIEWED["asyncio.sslproto._SSLProtocolTransport.is_closing"] = (
        TLS,
        {
            "d2767ab18acd": "3.11.7-3.13.0",
            "6f6027f51a70": "3.13.15, 3.14.8-3.15.2 (asks the socket's)",
        },
    )
    REVIEWED["asyncio.base_events.BaseEventLoop.start_tls"] = (
        "zloopgo/_tls.py's start_tls (asyncio's, making zloopgo's SSLProtocol)",
        {
            "7054041e99ae": "3.11.7-3.13.0",
            "8e6a0d0a580b": "3.13.15, 3.14.8 (hands a StreamReader's bytes to the SSL protocol)",
            "92f61e16b063": "3.15.2 (and drops the waiter when the handshake fails)",
        },
    )
    REVIEWED["ssl.SSLObject.read"] = (TLS, {"cd40ad059e1c": "3.11.7-3.15.2"})
    REVIEWED["ssl.SSLObject.write"] = (TLS, {"0e38ab6515fe": "3.11.7-3.15.2"})
    if hasattr(sslproto.SSLProtocol, "_is_transport_closing"):  # 3.13.15, 3.14+
        REVIEWED[_SSL + "_is_transport_closing"] = (
            TLS,
            {"33a5b6535804": "3.13.15, 3.14.8-3.15.2"},
        )


def _resolve(name):
    parts = name.split(".")
    module = 2 if parts[0] == "asyncio" else 1  # asyncio.<module>.<class>..., or ssl.<class>...
    obj = importlib.import_module(".".join(parts[:module]))
    for part in parts[module:]:
        owner = obj
        obj = None
        for klass in inspect.getmro(owner) if inspect.isclass(owner) else [owner]:
            if part in vars(klass):
                obj = vars(klass)[part]
                break
        if obj is None:
            raise AttributeError(f"{name}: {owner!r} has no {part!r}")
    if isinstance(obj, property):
        obj = obj.fget
    return obj


def fingerprint(fn):
    """The function's source as tokens, without comments, layout and its
    docstring: the same text gives the same value on CPython 3.10 to 3.15."""
    return fingerprint_source(inspect.getsource(fn))


def fingerprint_source(src):
    """fingerprint() of a function's source text."""
    src = textwrap.dedent(src)
    body = ast.parse(src).body[0].body
    skip = set()
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        skip = set(range(first.lineno, first.end_lineno + 1))
    layout = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
    tokens = [
        t.string
        for t in tokenize.generate_tokens(io.StringIO(src).readline)
        if t.type not in layout and t.start[0] not in skip
    ]
    return hashlib.sha256("".join(tokens).encode()).hexdigest()[:12]


@pytest.mark.parametrize("name", sorted(REVIEWED))
def test_code_zloopgo_does_again_is_the_code_it_was_checked_against(name):
    depends, seen = REVIEWED[name]
    try:
        fn = _resolve(name)
    except AttributeError as exc:
        pytest.fail(f"{name} is gone on CPython {VERSION} ({exc}); {depends} does what it did")
    got = fingerprint(fn)
    assert got in seen, (
        f"{name} changed on CPython {VERSION}: fingerprint {got}, not one of the versions "
        f"{depends} was checked against ({'; '.join(f'{v}: {k}' for k, v in seen.items())}). "
        f"Review {depends} against it, then add {got!r}.\nIts source now:\n"
        + textwrap.dedent(inspect.getsource(fn))
    )


def _without_adapter_first(src):
    """A SockMethods method's source without its first statements, which
    ask the adapter (self._zl_sock_...) and return what it answered."""
    lines = src.splitlines(keepends=True)
    asks = [i for i, line in enumerate(lines) if "self._zl_sock_" in line]
    if not asks:
        return src
    rest = next(i for i, line in enumerate(lines) if "base_events._check_ssl_socket" in line)
    return "".join(lines[: asks[0]] + lines[rest:])


@pytest.mark.parametrize(
    ("name", "receive", "asyncios_receive"),
    [
        ("sock_recv", "_recv(self, sock, n)", "sock.recv(n)"),
        ("sock_recv_into", None, None),
        ("sock_sendall", None, None),
        ("sock_recvfrom", "_recvfrom(self, sock, bufsize)", "sock.recvfrom(bufsize)"),
        ("_sock_recvfrom", "_recvfrom(self, sock, bufsize)", "sock.recvfrom(bufsize)"),
    ],
)
def test_zloopgos_sock_methods_are_asyncios_but_for_the_receive(name, receive, asyncios_receive):
    theirs = getattr(selector_events.BaseSelectorEventLoop, name, None)
    ours = _sockmethods.SockMethods.__dict__.get(name)
    assert (ours is None) == (theirs is None), f"{name}: asyncio has it, zloopgo not, or back"
    if theirs is None:
        return
    src = _without_adapter_first(inspect.getsource(ours))
    if receive is not None:
        call = re.compile(r"(?<![\w.])" + re.escape(receive))
        assert len(call.findall(src)) == 1, f"{name} should call {receive} once"
        src = call.sub(asyncios_receive, src)
    assert fingerprint_source(src) == fingerprint(theirs)


@pytest.mark.parametrize(
    "name",
    ["_sock_recv", "_sock_recv_into", "_sock_sendall", "_sock_read_done", "_sock_write_done"],
)
def test_the_callbacks_of_sock_recv_and_sock_sendall_are_the_adapters(name):
    # capi/sockops.c does these (REVIEWED pins asyncio's code they follow):
    # asyncio's steps in Python (zloopgo/_sockmethods.py) hand them on too.
    # Loop owns a descriptor of LoopCore's C method (_engine.own_methods).
    assert _is_own_copy(_loop.Loop, _engine.LoopCore, name)


def test_the_stream_fast_path_is_on_exactly_where_its_code_was_checked():
    names = [n for n, (depends, _) in REVIEWED.items() if depends == STREAMS]
    checked = all(fingerprint(_resolve(n)) in REVIEWED[n][1] for n in names)
    assert checked == _transports.STREAM_FAST_PATH, (
        f"zloopgo/_transports.py turns the stream fast path "
        f"{'on' if _transports.STREAM_FAST_PATH else 'off'} on CPython {VERSION}, whose "
        f"stream code {'is' if checked else 'is not'} what capi/streamfeed.c was checked against"
    )


# ---- run_forever's steps ----------------------------------------------------


def _run_forever_shape():
    """How this Python's BaseEventLoop.run_forever is built: 'inline' (the
    steps in its body, 3.10-3.12), 'setup-in-try' (3.13) or
    'setup-before-try' (3.14+)."""
    fn = ast.parse(textwrap.dedent(inspect.getsource(base_events.BaseEventLoop.run_forever)))
    body = [
        s
        for s in fn.body[0].body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    text = [ast.unparse(s) for s in body]
    if text and text[0] == "self._run_forever_setup()" and isinstance(body[1], ast.Try):
        assert [ast.unparse(s) for s in body[1].finalbody] == ["self._run_forever_cleanup()"]
        return "setup-before-try"
    if len(body) == 1 and isinstance(body[0], ast.Try):
        inner = [ast.unparse(s) for s in body[0].body]
        if inner[0] == "self._run_forever_setup()":
            assert [ast.unparse(s) for s in body[0].finalbody] == ["self._run_forever_cleanup()"]
            return "setup-in-try"
    return "inline"


def test_run_forever_takes_the_steps_of_this_pythons_asyncio():
    shape = _run_forever_shape()
    zloopgo_takes = (
        "setup-before-try"
        if _loop._SETUP_BEFORE_TRY
        else "setup-in-try"
        if _loop._HAS_RUN_FOREVER_SETUP
        else "inline"
    )
    assert shape == zloopgo_takes, (
        f"CPython {VERSION}'s BaseEventLoop.run_forever is {shape!r}; zloopgo/_loop.py's "
        f"run_forever takes the {zloopgo_takes!r} steps"
    )
    # What the inline steps (3.10-3.12) and _run_forever_setup/_cleanup call.
    for name in (
        "_check_closed",
        "_check_running",
        "_set_coroutine_origin_tracking",
        "_asyncgen_firstiter_hook",
        "_asyncgen_finalizer_hook",
    ):
        assert callable(getattr(base_events.BaseEventLoop, name, None)), name
    if shape != "inline":
        for name in ("_run_forever_setup", "_run_forever_cleanup"):
            assert list(inspect.signature(getattr(base_events.BaseEventLoop, name)).parameters) == [
                "self"
            ]


# ---- methods zloopgo overrides or calls, with their signatures --------------

ASYNCIO_LOOP = unix_events._UnixSelectorEventLoop


def _asyncio_method(cls, name):
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None, None


# Python overrides whose signature differs from asyncio's on purpose.
OWN_SIGNATURE = {
    ("Loop", "__init__"): "zloopgo.Loop() takes no selector: it brings its own",
    ("SocketTransport", "__init__"): "passes every argument on to asyncio's",
    ("DatagramTransport", "__init__"): "passes every argument on to asyncio's",
}
# zloopgo's own names (never asyncio's).
OWN_NAME = re.compile(r"^_zl_|^__")


def _overrides(cls, asyncio_cls):
    """(name, zloopgo's function, asyncio's class, asyncio's function) for
    what cls (and its C base) defines that asyncio_cls also has."""
    own = {}
    for klass in cls.__mro__:
        if klass is asyncio_cls or issubclass(asyncio_cls, klass):
            break
        for name, value in vars(klass).items():
            own.setdefault(name, (klass, value))
    return own


@pytest.mark.parametrize(
    ("cls", "asyncio_cls"),
    [
        (zloopgo.Loop, ASYNCIO_LOOP),
        (_transports.SocketTransport, selector_events._SelectorSocketTransport),
        (_datagram.DatagramTransport, selector_events._SelectorDatagramTransport),
        (_pipes.ReadPipeTransport, unix_events._UnixReadPipeTransport),
    ],
    ids=["loop", "socket-transport", "datagram-transport", "read-pipe-transport"],
)
def test_overridden_methods_keep_asyncios_signatures(cls, asyncio_cls):
    problems = []
    attributes = {
        "Loop": LOOP_ATTRIBUTES,
        "SocketTransport": TRANSPORT_ATTRIBUTES,
        "DatagramTransport": DATAGRAM_ATTRIBUTES,
    }.get(cls.__name__, {})
    for name, (klass, value) in sorted(_overrides(cls, asyncio_cls).items()):
        base, theirs = _asyncio_method(asyncio_cls, name)
        if inspect.isgetsetdescriptor(value) or inspect.ismemberdescriptor(value):
            # a native attribute or slot: one asyncio sets on its instances
            if name not in attributes and not OWN_NAME.match(name):
                problems.append(f"{klass.__name__}.{name}: not an attribute asyncio sets")
            continue
        if base is None:
            if not (OWN_NAME.match(name) or name in ZLOOPGO_OWN[cls.__name__]):
                problems.append(
                    f"{klass.__name__}.{name}: not asyncio's, and not listed as zloopgo's own"
                )
            continue
        if OWN_NAME.match(name) and name != "__init__":
            continue
        if name in ZLOOPGO_OWN[cls.__name__]:
            problems.append(f"{name}: zloopgo's own name is also {base.__qualname__}'s")
            continue
        if (cls.__name__, name) in OWN_SIGNATURE or not callable(theirs):
            continue
        if isinstance(value, (staticmethod, classmethod)) or not inspect.isfunction(value):
            continue  # the C methods: NATIVE_SIGNATURES pins asyncio's side
        ours_sig, theirs_sig = inspect.signature(value), inspect.signature(theirs)
        if ours_sig != theirs_sig:
            problems.append(
                f"{klass.__name__}.{name}{ours_sig} overrides {base.__qualname__}{theirs_sig}"
            )
    assert not problems, f"on CPython {VERSION}:\n" + "\n".join(problems)


# Names zloopgo's classes define that asyncio's must not have (else they
# would silently replace asyncio's behaviour).
ZLOOPGO_OWN = {
    "Loop": {"_watched_fd", "_zl_rx"},
    "SocketTransport": set(),
    "DatagramTransport": set(),
    "ReadPipeTransport": set(),
}


def _sig(params):
    return "(" + ", ".join(params) + ")"


# asyncio's signatures of what zloopgo implements in C (capi/), which
# inspect cannot read: any of the forms listed is one the C code takes.
CALLBACK = "callback, *args, context=None"
# create_task's forms, each with the one capi/tasks.c does natively for it
# (zloopgo/_loop.py reads it from the signature at import: the ZL_CREATE_TASK_*
# of capi/zl.h)
CREATE_TASK_FORMS = {
    "(self, coro, *, name=None)": 1,  # 3.10: Task(coro, loop=self, name=name)
    "(self, coro, *, name=None, context=None)": 2,  # 3.11-3.13.0: and context=
    # 3.13's later patch releases (3.13.15): every other keyword to Task too
    "(self, coro, *, name=None, context=None, **kwargs)": 4,
    "(self, coro, **kwargs)": 3,  # 3.14+: every keyword to Task
}
NATIVE_SIGNATURES = {
    (ASYNCIO_LOOP, "call_soon"): {f"(self, {CALLBACK})"},
    (ASYNCIO_LOOP, "call_soon_threadsafe"): {f"(self, {CALLBACK})"},
    (ASYNCIO_LOOP, "call_later"): {f"(self, delay, {CALLBACK})"},
    (ASYNCIO_LOOP, "call_at"): {f"(self, when, {CALLBACK})"},
    (ASYNCIO_LOOP, "time"): {"(self)"},
    (ASYNCIO_LOOP, "stop"): {"(self)"},
    (ASYNCIO_LOOP, "get_debug"): {"(self)"},
    (ASYNCIO_LOOP, "create_future"): {"(self)"},
    (ASYNCIO_LOOP, "create_task"): set(CREATE_TASK_FORMS),
    (selector_events._SelectorSocketTransport, "_read_ready"): {"(self)"},
    (selector_events._SelectorSocketTransport, "_read_ready__data_received"): {"(self)"},
    (selector_events._SelectorSocketTransport, "_read_ready__get_buffer"): {"(self)"},
    (selector_events._SelectorSocketTransport, "write"): {"(self, data)"},
    (selector_events._SelectorSocketTransport, "is_closing"): {"(self)"},
    (selector_events._SelectorDatagramTransport, "_read_ready"): {"(self)"},
    (selector_events._SelectorDatagramTransport, "sendto"): {"(self, data, addr=None)"},
}


@pytest.mark.parametrize(
    ("cls", "name"), sorted(NATIVE_SIGNATURES, key=lambda k: (k[0].__name__, k[1]))
)
def test_native_methods_match_asyncios_signatures(cls, name):
    base, theirs = _asyncio_method(cls, name)
    assert base is not None, f"{cls.__name__}.{name} is gone on CPython {VERSION}"
    got = str(inspect.signature(theirs))
    assert got in NATIVE_SIGNATURES[(cls, name)], (
        f"{base.__qualname__}.{name}{got} on CPython {VERSION}: zloopgo's native {name} takes "
        f"{' or '.join(sorted(NATIVE_SIGNATURES[(cls, name)]))}"
    )


def test_create_task_does_natively_the_form_asyncios_has():
    # chosen from asyncio's signature, not from the version: 3.13's patch
    # releases changed it
    theirs = str(inspect.signature(base_events.BaseEventLoop.create_task))
    assert CREATE_TASK_FORMS[theirs] == _loop._CREATE_TASK_FORM, theirs


def test_create_task_form_unknown_to_the_adapter_is_asyncios_method():
    # a signature not in CREATE_TASK_FORMS: every call is asyncio's own method
    def create_task(self, coro, *, name=None, eager_start=None):
        pass

    def not_a_method(coro, **kwargs):
        pass

    assert _loop._create_task_form(create_task) == 0
    assert _loop._create_task_form(not_a_method) == 0
    for form, want in CREATE_TASK_FORMS.items():
        namespace = {}
        exec(f"def create_task{form}: pass", namespace)
        assert _loop._create_task_form(namespace["create_task"]) == want, form


def test_create_task_in_a_form_not_known_runs_asyncios_method():
    # form 0 (capi/tasks.c): every call, even a plain one, is the method's
    from asyncio import futures, tasks

    calls = []

    def create_task(self, coro, **kwargs):
        calls.append(sorted(kwargs))
        return base_events.BaseEventLoop.create_task(self, coro, **kwargs)

    async def child():
        return "ran"

    lp = zloopgo.new_event_loop()
    try:
        with pytest.raises(ValueError, match="unknown create_task form 5"):
            _engine.set_asyncio(futures, tasks, create_task, 5)
        _engine.set_asyncio(futures, tasks, create_task, 0)
        try:
            task = lp.create_task(child())
            named = lp.create_task(child(), name="n")
        finally:
            _engine.set_asyncio(
                futures, tasks, base_events.BaseEventLoop.create_task, _loop._CREATE_TASK_FORM
            )
        assert lp.run_until_complete(task) == "ran"
        assert lp.run_until_complete(named) == "ran" and named.get_name() == "n"
        assert calls == [[], ["name"]]
        assert lp.run_until_complete(lp.create_task(child(), name="again")) == "ran"  # native again
        assert calls == [[], ["name"]]
    finally:
        lp.close()


def _is_own_copy(cls, base, name):
    """cls's name is the descriptor of base's C method that cls owns
    (_engine.own_methods): a method descriptor of cls, named and documented
    as base's."""
    own, theirs = vars(cls).get(name), vars(base).get(name)
    return (
        type(own) is type(_engine.LoopCore.__dict__["call_soon"])
        and own.__objclass__ is cls
        and theirs is not None
        and (own.__name__, own.__doc__) == (theirs.__name__, theirs.__doc__)
    )


def test_native_loop_methods_are_the_c_ones():
    # The C methods of LoopCore come first in zloopgo.Loop's MRO, each as
    # Loop's own descriptor of it (the transports' likewise).
    owners = {
        ASYNCIO_LOOP: (zloopgo.Loop, _engine.LoopCore),
        selector_events._SelectorSocketTransport: (
            _transports.SocketTransport,
            _engine.StreamFastPaths,
        ),
        selector_events._SelectorDatagramTransport: (
            _datagram.DatagramTransport,
            _engine.DatagramFastPaths,
        ),
    }
    for cls, name in NATIVE_SIGNATURES:
        owner, base = owners[cls]
        klass, _value = _asyncio_method(owner, name)
        assert klass is owner and _is_own_copy(owner, base, name), (name, klass)


# What zloopgo calls (by name) on asyncio's objects and modules, with the
# parameters it passes.
CALLED = {
    (ASYNCIO_LOOP, "_check_closed"): "(self)",
    (ASYNCIO_LOOP, "_check_thread"): "(self)",
    (ASYNCIO_LOOP, "_check_callback"): "(self, callback, method)",
    (ASYNCIO_LOOP, "_ensure_fd_no_transport"): "(self, fd)",
    (ASYNCIO_LOOP, "call_exception_handler"): "(self, context)",
    (ASYNCIO_LOOP, "close"): "(self)",
    (selector_events._SelectorSocketTransport, "_maybe_pause_protocol"): "(self)",
    (selector_events._SelectorSocketTransport, "_write_ready"): None,  # see below
    (selector_events._SelectorSocketTransport, "_fatal_error"): (
        "(self, exc, message='Fatal error on transport')"
    ),
    (selector_events._SelectorSocketTransport, "_read_ready__on_eof"): "(self)",
    (selector_events._SelectorSocketTransport, "_force_close"): "(self, exc)",
    (selector_events._SelectorSocketTransport, "_make_empty_waiter"): "(self)",
    (selector_events._SelectorSocketTransport, "set_protocol"): "(self, protocol)",
    (selector_events._SelectorDatagramTransport, "_fatal_error"): (
        "(self, exc, message='Fatal error on transport')"
    ),
}


@pytest.mark.parametrize(("cls", "name"), sorted(CALLED, key=lambda k: (k[0].__name__, k[1])))
def test_methods_zloopgo_calls_exist_with_its_arguments(cls, name):
    base, fn = _asyncio_method(cls, name)
    want = CALLED[(cls, name)]
    if name == "_write_ready":
        # 3.10-3.11: a method; 3.12+: set per instance in __init__ to
        # _write_sendmsg or _write_send, both (self)
        if fn is not None and inspect.isfunction(fn):
            assert str(inspect.signature(fn)) == "(self)"
        for alt in ("_write_sendmsg", "_write_send"):
            _b, f = _asyncio_method(cls, alt)
            if f is not None:
                assert str(inspect.signature(f)) == "(self)", alt
        return
    assert base is not None, f"{cls.__name__}.{name} is gone on CPython {VERSION}"
    assert str(inspect.signature(fn)) == want, (
        f"{base.__qualname__}.{name}{inspect.signature(fn)} on CPython {VERSION}; zloopgo calls "
        f"it as {want}"
    )


def test_helpers_zloopgo_calls():
    from asyncio import format_helpers

    debug = "debug" in inspect.signature(format_helpers._format_callback_source).parameters
    assert debug == (sys.version_info >= (3, 13)), "zloopgo/_loop.py's _format_callback"
    assert list(inspect.signature(format_helpers._format_callback_source).parameters)[:2] == [
        "func",
        "args",
    ]
    assert list(inspect.signature(format_helpers.extract_stack).parameters) == ["f", "limit"]
    assert list(inspect.signature(base_events._format_handle).parameters) == ["handle"]
    assert base_events.logger.name == "asyncio"
    assert list(inspect.signature(events._set_running_loop).parameters) == ["loop"]
    assert events._get_running_loop() is None
    assert list(inspect.signature(selectors._fileobj_to_fd).parameters) == ["fileobj"]
    assert selectors.SelectorKey._fields == ("fileobj", "fd", "events", "data")
    # The policy by names that do not warn (zloopgo/__init__.py)
    private = sys.version_info >= (3, 14)
    assert hasattr(events, "_get_event_loop_policy") == private
    assert hasattr(events, "_set_event_loop_policy") == private
    assert issubclass(zloopgo.EventLoopPolicy, unix_events._UnixDefaultEventLoopPolicy)
    new_loop = inspect.getsource(type(zloopgo.EventLoopPolicy()).__mro__[1].new_event_loop)
    assert "self._loop_factory()" in new_loop, (
        "the policy's new_event_loop no longer asks _loop_factory"
    )


# ---- attributes asyncio's loop and transports set ---------------------------

# Instance attributes of asyncio's Unix selector loop (after __init__), each
# with what zloopgo does about it. A new one fails this test: decide
# whether the native loop must honour it.
LOOP_ATTRIBUTES = {
    "_asyncgens": "asyncio's",
    "_asyncgens_shutdown_called": "asyncio's",
    "_clock_resolution": "asyncio's; the engine takes it at creation",
    "_closed": "native (capi/loop.c), set by asyncio's __init__ and close",
    "_coroutine_origin_tracking_enabled": "asyncio's",
    "_coroutine_origin_tracking_saved_depth": "asyncio's",
    "_csock": "asyncio's self-pipe: the wakeup fd while the loop runs",
    "_current_handle": "set by zloopgo's debug run (_zl_run_debug)",
    "_debug": "native (capi/loop.c)",
    "_default_executor": "asyncio's",
    "_exception_handler": "asyncio's",
    "_executor_shutdown_called": "asyncio's",
    "_internal_fds": "asyncio's",
    "_old_agen_hooks": "asyncio's (3.13+), kept by _run_forever_setup/_cleanup",
    "_ready": "asyncio's queue, never run: every path to it is overridden (below)",
    "_scheduled": "asyncio's heap, never used: call_at/call_later are native",
    "_selector": "zloopgo's _WatchedDescriptors (get_key, close)",
    "_signal_handlers": "asyncio's",
    "_ssock": "asyncio's self-pipe, watched natively",
    "_stopping": "native (capi/loop.c)",
    "_task_factory": "native (capi/tasks.c reads it)",
    "_thread_id": "asyncio's",
    "_timer_cancelled_count": "asyncio's, never used",
    "_transports": "asyncio's",
    "_unix_server_sockets": "asyncio's (3.13+)",
    "_watcher": "asyncio's child watcher (3.14+)",
    "slow_callback_duration": "read by zloopgo's debug run",
}

# Flow control and the protocol's state: both transports' asyncio
# attributes, which no native method reads.
ASYNCIO_FLOW_ATTRIBUTES = dict.fromkeys(
    (
        "_high_water",
        "_low_water",
        "_paused",
        "_protocol_connected",
        "_protocol_paused",
        "_server",
    ),
    "asyncio's",
)
TRANSPORT_ATTRIBUTES = {
    **ASYNCIO_FLOW_ATTRIBUTES,
    "_buffer": "read natively (a bytearray up to 3.11, a deque from 3.12)",
    "_buffer_size": "3.15's count of _buffer's bytes: the native write must keep it",
    "_closing": "read natively",
    "_conn_lost": "read natively",
    "_context": "3.15: the transport's context; its handles run in it",
    "_empty_waiter": "read natively",
    "_eof": "read natively",
    "_extra": "asyncio's",
    "_loop": "read natively",
    "_protocol": "read natively",
    "_read_ready_cb": "read natively",
    "_sock": "read natively (a write once it is None goes to asyncio's)",
    "_sock_fd": "read natively",
    "_write_ready": "asyncio's (3.12+ per instance)",
}


# What asyncio's datagram transport sets on itself; zloopgo's class keeps the
# ones capi/datagram.c reads in slots.
DATAGRAM_ATTRIBUTES = {
    **ASYNCIO_FLOW_ATTRIBUTES,
    "_address": "read natively",
    "_buffer": "read natively (a deque)",
    "_buffer_size": "3.11+'s count of _buffer's bytes (asyncio's sendto keeps it)",
    "_closing": "asyncio's",
    "_conn_lost": "read natively",
    "_context": "3.15: the transport's context; its handles run in it",
    "_extra": "read natively (its peername)",
    "_loop": "read natively",
    "_protocol": "read natively",
    "_sock": "asyncio's",
    "_sock_fd": "read natively",
}


def _slots(obj):
    names = set()
    for klass in type(obj).__mro__:
        slots = vars(klass).get("__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
    return {n for n in names if not n.startswith("__") and hasattr(obj, n)}


def _stock_transport(loop):
    a, b = socket.socketpair()

    async def connect():
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
        return transport

    transport = loop.run_until_complete(connect())
    return transport, b


def test_asyncios_loop_sets_only_attributes_zloopgo_knows():
    loop = asyncio.SelectorEventLoop()
    try:
        new = sorted(set(vars(loop)) - set(LOOP_ATTRIBUTES))
    finally:
        loop.close()
    assert not new, (
        f"asyncio's loop on CPython {VERSION} sets {new}: check whether zloopgo's native "
        "loop (capi/, zloopgo/_loop.py) must honour them, then list them in LOOP_ATTRIBUTES"
    )


def test_zloopgo_loop_keeps_asyncios_native_attributes_settable():
    loop = zloopgo.new_event_loop()
    try:
        for name in ("_closed", "_debug", "_stopping", "_task_factory"):
            assert name in LOOP_ATTRIBUTES
            value = getattr(loop, name)
            setattr(loop, name, value)  # asyncio's code assigns them
    finally:
        loop.close()


def test_asyncios_transport_sets_only_attributes_zloopgo_knows():
    loop = asyncio.SelectorEventLoop()
    transport, peer = _stock_transport(loop)
    try:
        present = set(vars(transport)) | _slots(transport)
        new = sorted(present - set(TRANSPORT_ATTRIBUTES))
        assert type(transport._buffer) is (
            collections.deque if _transports._BUFFER_IS_DEQUE else bytearray
        )
    finally:
        transport.close()
        loop.run_until_complete(asyncio.sleep(0))
        peer.close()
        loop.close()
    assert not new, (
        f"asyncio's socket transport on CPython {VERSION} sets {new}: check whether "
        "zloopgo's native read and write (capi/transport.c, zloopgo/_transports.py) must "
        "keep them, then list them in TRANSPORT_ATTRIBUTES"
    )


def test_asyncios_datagram_transport_sets_only_attributes_zloopgo_knows():
    loop = asyncio.SelectorEventLoop()
    try:
        transport, _ = loop.run_until_complete(
            loop.create_datagram_endpoint(asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0))
        )
        present = set(vars(transport)) | _slots(transport)
        transport.close()
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    new = sorted(present - set(DATAGRAM_ATTRIBUTES))
    assert not new, (
        f"asyncio's datagram transport on CPython {VERSION} sets {new}: check whether "
        "zloopgo's native receive and sendto (capi/datagram.c, zloopgo/_datagram.py) must "
        "keep them, then list them in DATAGRAM_ATTRIBUTES"
    )


def test_handles_have_every_slot_of_asyncios():
    loop = zloopgo.new_event_loop()
    try:
        handle = loop.call_soon(print)
        timer = loop.call_later(10, print)
        for theirs, ours in ((events.Handle, handle), (events.TimerHandle, timer)):
            slots = {
                s
                for k in theirs.__mro__
                for s in vars(k).get("__slots__", ())
                if s != "__weakref__"
            }
            missing = sorted(s for s in slots if not hasattr(ours, s))
            assert not missing, f"asyncio's {theirs.__name__} has {missing}, zloopgo's has not"
            for method in ("cancel", "cancelled", "_run") + (("when",) if ours is timer else ()):
                assert callable(getattr(ours, method))
        handle.cancel()
        timer.cancel()
    finally:
        loop.close()


# ---- what the C adapter reads: the name tables of capi/*.c ------------------


def _c_names():
    """file -> names the C adapter interns: {&slot, "name"} tables,
    PyUnicode_InternFromString("name") and Py_BuildValue keyword tuples."""
    out = {}
    for path in sorted((ROOT / "capi").glob("*.c")):
        text = path.read_text()
        names = set(re.findall(r'\{&\w+,\s*"([^"]+)"\}', text))
        names |= set(re.findall(r'PyUnicode_InternFromString\("([^"]+)"\)', text))
        for fmt_args in re.findall(r'Py_BuildValue\("\(s+\)",\s*([^;]+)\);', text):
            names |= set(re.findall(r'"([^"]+)"', fmt_args))
        if names:
            out[path.name] = names
    return out


def _stream_pair(loop):
    reader = streams.StreamReader(loop=loop)
    protocol = streams.StreamReaderProtocol(reader, loop=loop)
    return reader, protocol


# What each interned name is read from, checked below on asyncio's objects.
# Messages are compared with asyncio's source.
C_NAMES = {
    "transport": {
        "_conn_lost",
        "_sock_fd",
        "max_size",
        "_protocol",
        "_read_ready_cb",
        "_eof",
        "_empty_waiter",
        "_buffer",
        "_loop",
        "_closing",
        "_sock",
        "_fatal_error",
        "_read_ready__on_eof",
    },
    "protocol": {"data_received"},
    "datagram_transport": {
        "_conn_lost",
        "max_size",
        "_sock_fd",
        "_protocol",
        "_fatal_error",
        "_address",
        "_buffer",
        "_extra",
        "_loop",
    },
    "datagram_protocol": {"datagram_received", "error_received"},
    "datagram_extra": {"peername"},
    "buffered_protocol": {"get_buffer", "buffer_updated"},
    "stream_protocol": {"data_received", "_stream_reader", "_stream_reader_wr"},
    "stream_reader": {
        "feed_data",
        "_wakeup_waiter",
        "_eof",
        "_buffer",
        "_waiter",
        "_transport",
        "_paused",
        "_limit",
    },
    "future": {"cancelled", "set_result", "set_exception", "done", "add_done_callback"},
    "reader_transport": {"pause_reading"},
    "loop": {
        "time",
        "slow_callback_duration",
        # capi/sockops.c: asyncio's sock_recv and sock_sendall steps
        "_ensure_fd_no_transport",
        "_transports",
        "_sock_recv",
        "_sock_recv_into",
        "_sock_sendall",
        "_sock_read_done",
        "_sock_write_done",
        "remove_reader",
        "remove_writer",
    },
    # capi/sockops.c: a socket's methods it calls, the dict a
    # WeakValueDictionary (loop._transports) keeps its references in, and
    # the keyword asyncio binds _sock_read_done's handle with
    "socket": {"fileno", "recv", "recv_into", "send"},
    "weak_value_dict": {"data"},
    "done_keywords": {"handle"},
    "asyncio_modules": {"Future", "Task"},
    "task_keywords": {"loop", "name", "context"},
    "call_keywords": {"context"},
    "messages": {
        "Fatal read error on socket transport",
        "Fatal error: protocol.data_received() call failed.",
        "Fatal write error on socket transport",
        "Fatal error: protocol.get_buffer() call failed.",
        "Fatal error: protocol.buffer_updated() call failed.",
        "Fatal read error on datagram transport",
    },
    # asyncio's Handle._run calls self._context.run(callback, *args); zloopgo
    # makes that call for a context= that is not a Context
    "context": {"run"},
    # __module__ of Handle and TimerHandle, whose tp_name has no module
    "module": {"zloopgo"},
    "zloopgo": {
        "_zl_write_python",
        "_zl_read_python",
        "_zl_state",
        "_zl_buffer_rest",
        "_zl_callback_error",
        "_zl_run_debug",
        "_zl_debug_schedule",
        "_zl_slow_callback",
        "_zl_call_soon_threadsafe_python",
        "_zl_bind_call_soon",
        "_zl_bind_call_soon_threadsafe",
        "_zl_bind_call_later",
        "_zl_bind_call_at",
    },
    # zloopgo/_datagram.py's, which capi/datagram.c reads
    "zloopgo_datagram": {"_zl_dgram", "_zl_read_ready_python", "_zl_sendto_python"},
    # zloopgo/_tls.py's SSLProtocol's own slot, which capi/tls.c marks
    "zloopgo_tls": {"_zl_replaced"},
    # the lock of a _ThreadSafeHandle asyncio made (threading's RLock, debug
    # mode), which the native runner enters and leaves as _run's `with` does
    "threadsafe_lock": {"__enter__", "__exit__"},
    # capi/tls.c: what it reads on asyncio's SSLProtocol (3.11+), on its
    # _SSLProtocolTransport, SSLProtocolState's members, the MemoryBIOs,
    # ssl.SSLObject, the backlog (a deque) and bytes
    "tls_protocol": {
        "_state",
        "_incoming",
        "_outgoing",
        "_sslobj",
        "_ssl_buffer",
        "_ssl_buffer_view",
        "max_size",
        "_app_protocol",
        "_app_protocol_is_buffer",
        "_app_reading_paused",
        "_write_backlog",
        "_write_buffer_size",
        "_ssl_writing_paused",
        "_transport",
        "_outgoing_high_water",
        "_outgoing_low_water",
        "_app_writing_paused",
        "_incoming_high_water",
        "_incoming_low_water",
        "_ssl_reading_paused",
        "_do_handshake",
        "_do_flush",
        "_do_shutdown",
        "_call_eof_received",
        "_start_shutdown",
        "_fatal_error",
        "_write_appdata",
        "get_buffer",
        "_do_read__buffered",
        "_control_app_writing",
        "_control_ssl_reading",
        # the methods whose steps it takes itself while they are not
        # replaced (on the instance, in a subclass): it looks them up
        "_do_read",
        "_do_read__copied",
        "_do_write",
        "_process_outgoing",
    },
    # 3.13.15 and 3.14+: _SSLProtocolTransport.is_closing() asks the SSL protocol
    "tls_protocol_314": {"_is_transport_closing"},
    "tls_app_transport": {"_closed", "_ssl_protocol", "is_closing"},
    "tls_states": {"DO_HANDSHAKE", "WRAPPED", "FLUSHING", "SHUTDOWN", "UNWRAPPED"},
    "memory_bio": {"read", "write", "pending", "eof"},
    "sslobject": {"read", "write", "_sslobj"},
    # the _ssl object an ssl.SSLObject wraps, which capi/tls.c calls directly
    "ssl_inner": {"read", "write", "pending"},
    "deque": {"append"},
    "bytes": {"join"},
    "tls_messages": {"Fatal error on SSL protocol"},
}


def test_every_name_the_c_adapter_reads_is_classified():
    known = set().union(*C_NAMES.values())
    found = set().union(*_c_names().values())
    unclassified = sorted(found - known)
    assert not unclassified, (
        f"capi/*.c reads {unclassified}: say in C_NAMES what each is read from, so that "
        "this test checks it on asyncio's objects"
    )


def test_names_the_c_adapter_reads_exist_on_asyncios_objects():
    loop = asyncio.SelectorEventLoop()
    transport, peer = _stock_transport(loop)
    reader, protocol = _stream_pair(loop)
    fut = loop.create_future()
    datagrams, _ = loop.run_until_complete(
        loop.create_datagram_endpoint(asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0))
    )
    try:
        assert "peername" in datagrams._extra  # capi/datagram.c reads it (None: unconnected)
        where = {
            "datagram_transport": datagrams,
            "datagram_protocol": asyncio.DatagramProtocol(),
            "transport": transport,
            "protocol": asyncio.Protocol(),
            "buffered_protocol": asyncio.BufferedProtocol(),
            "stream_protocol": protocol,
            "stream_reader": reader,
            "future": fut,
            "reader_transport": transport,
            "loop": loop,
            "socket": peer,
            "weak_value_dict": loop._transports,
        }
        missing = [
            f"{kind}.{name}"
            for kind, obj in where.items()
            for name in sorted(C_NAMES[kind])
            if not hasattr(obj, name) and name != "_stream_reader_wr"
        ]
        assert protocol._stream_reader_wr() is reader  # a weak reference
        assert type(reader._buffer) is bytearray
        assert not missing, f"on CPython {VERSION}, asyncio's objects lack {missing}"
        assert all(hasattr(contextvars.Context, name) for name in C_NAMES["context"])
        assert zloopgo.Loop().call_soon(print).__class__.__module__ in C_NAMES["module"]
        for name in C_NAMES["asyncio_modules"]:
            assert hasattr(asyncio.futures if name == "Future" else asyncio.tasks, name)
        task_params = inspect.signature(asyncio.tasks._PyTask).parameters
        # capi/tasks.c passes context= natively from 3.11 only
        wanted = set(C_NAMES["task_keywords"]) - (
            {"context"} if sys.version_info < (3, 11) else set()
        )
        assert wanted <= set(task_params), sorted(task_params)
        assert "context" in inspect.signature(base_events.BaseEventLoop.call_soon).parameters
        for name in ("_sock_read_done", "_sock_write_done"):
            done_params = inspect.signature(getattr(selector_events.BaseSelectorEventLoop, name))
            assert C_NAMES["done_keywords"] <= set(done_params.parameters), name
        source = inspect.getsource(selector_events)
        for message in C_NAMES["messages"]:
            assert message in source, f"asyncio no longer says {message!r}"
        zl_loop = zloopgo.new_event_loop()
        try:
            ours, _ = zl_loop.run_until_complete(
                zl_loop.create_datagram_endpoint(
                    asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0)
                )
            )
            for name in C_NAMES["zloopgo_datagram"]:
                assert hasattr(ours, name), name
            ours.close()
            zl_loop.run_until_complete(asyncio.sleep(0))
        finally:
            zl_loop.close()
        zl = zloopgo.Loop
        for name in C_NAMES["zloopgo"]:
            owner = (
                zl
                if name
                in (
                    "_zl_callback_error",
                    "_zl_run_debug",
                    "_zl_debug_schedule",
                    "_zl_slow_callback",
                    "_zl_call_soon_threadsafe_python",
                    "_zl_bind_call_soon",
                    "_zl_bind_call_soon_threadsafe",
                    "_zl_bind_call_later",
                    "_zl_bind_call_at",
                )
                else _transports.SocketTransport
            )
            if name == "_zl_call_soon_threadsafe_python" and not hasattr(
                asyncio.events, "_ThreadSafeHandle"
            ):
                continue  # 3.14+: made only where asyncio has the class
            assert hasattr(owner, name) or name in _transports.SocketTransport.__slots__, name
        lock = threading.RLock()
        assert all(callable(getattr(lock, name)) for name in C_NAMES["threadsafe_lock"])
    finally:
        fut.cancel()
        transport.close()
        datagrams.close()
        loop.run_until_complete(asyncio.sleep(0))
        peer.close()
        loop.close()


def test_context_layout_self_test_passes():
    # capi/context.c reads PyThreadState.context and PyContext's variables;
    # without its self-test every handle copies the context (correct, larger).
    loop = zloopgo.new_event_loop()
    loop.close()
    assert _engine.context_layout_ok(), (
        f"capi/context.c's PyContext layout does not match CPython {VERSION} "
        "(Include/internal/pycore_context.h): handles no longer share context snapshots"
    )


# ---- sslproto: the native read feeds asyncio's TLS protocol -----------------


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's SSLProtocol is a plain Protocol")
def test_sslproto_is_a_buffered_protocol_the_native_read_feeds():
    assert issubclass(sslproto.SSLProtocol, asyncio.BufferedProtocol)
    assert list(inspect.signature(sslproto.SSLProtocol.get_buffer).parameters) == ["self", "n"]
    assert list(inspect.signature(sslproto.SSLProtocol.buffer_updated).parameters) == [
        "self",
        "nbytes",
    ]
    loop = asyncio.SelectorEventLoop()
    try:
        proto = sslproto.SSLProtocol(
            loop,
            asyncio.Protocol(),
            ssl.create_default_context(),
            None,
            server_side=False,
            server_hostname="localhost",
        )
        assert isinstance(proto._incoming, ssl.MemoryBIO)  # 3.14's start_tls writes to it
        assert isinstance(proto._app_transport, asyncio.Transport)
    finally:
        loop.close()
    # set_protocol picks the native read by the protocol's kind: the
    # BufferedProtocol one for SSLProtocol (start_tls switches protocols).
    src = inspect.getsource(selector_events._SelectorSocketTransport.set_protocol)
    assert "self._read_ready_cb = self._read_ready__get_buffer" in src
    assert "self._read_ready_cb = self._read_ready__data_received" in src
    start_tls = inspect.getsource(base_events.BaseEventLoop.start_tls)
    for step in (
        "transport.pause_reading()",
        "transport.set_protocol(ssl_protocol)",
        "transport.resume_reading",
    ):
        assert step in start_tls, step


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's SSLProtocol is a plain Protocol")
def test_names_the_native_tls_path_reads_exist_on_asyncios_objects():
    loop = asyncio.SelectorEventLoop()
    try:
        context = ssl.create_default_context()
        proto = sslproto.SSLProtocol(
            loop, asyncio.Protocol(), context, None, server_side=False, server_hostname="localhost"
        )
        sslobj = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="localhost")
        where = {
            "tls_protocol": proto,
            **(
                {"tls_protocol_314": proto}
                if hasattr(sslproto.SSLProtocol, "_is_transport_closing")
                else {}
            ),
            "tls_app_transport": proto._app_transport,
            "tls_states": sslproto.SSLProtocolState,
            "memory_bio": proto._incoming,
            "sslobject": sslobj,
            "ssl_inner": sslobj._sslobj,
            "deque": proto._write_backlog,
            "bytes": b"",
        }
        missing = [
            f"{kind}.{name}"
            for kind, obj in where.items()
            for name in sorted(C_NAMES[kind])
            if not hasattr(obj, name)
        ]
        assert not missing, f"on CPython {VERSION}, asyncio's objects lack {missing}"
        assert type(sslobj) is ssl.SSLObject and type(proto._write_backlog) is collections.deque
        assert sslproto.SSLAgainErrors == (ssl.SSLWantReadError, ssl.SSLSyscallError)
        source = inspect.getsource(sslproto)
        for message in C_NAMES["tls_messages"]:
            assert message in source, f"asyncio no longer says {message!r}"
        # zloopgo's subclasses keep in slots only what asyncio's __init__ sets,
        # and their own
        set_by_init = set(vars(proto)) | C_NAMES["zloopgo_tls"]
        for ours in (_tls.SSLProtocol, _tls._SSLProtocolTransport):
            assert set(ours.__slots__) <= set_by_init | set(vars(proto._app_transport))
        assert C_NAMES["zloopgo_tls"] <= set(_tls.SSLProtocol.__slots__)
    finally:
        loop.close()


# ---- the loop state zloopgo replaces ----------------------------------------

# What asyncio's loop keeps that zloopgo's native loop replaces. A method of
# asyncio's loop classes that uses one, or calls one that does, must be
# overridden by zloopgo, or be listed here with why it is harmless.
REPLACED = {
    "_ready",
    "_scheduled",
    "_run_once",
    "_timer_cancelled_count",
    "_selector",
    "_process_events",
}
HARMLESS = {
    ("BaseEventLoop", "_timer_handle_cancelled"): (
        "asyncio's TimerHandle calls it; zloopgo's timers are native"
    ),
    ("BaseEventLoop", "_run_once"): "never called: run_forever is zloopgo's",
    ("BaseEventLoop", "_call_soon"): "called only by methods zloopgo overrides",
}
# (zloopgo's __init__ and close call asyncio's, which create and clear the
# unused queue, heap and selector: overridden methods are zloopgo's choice.)
LOOP_CLASSES = (
    base_events.BaseEventLoop,
    selector_events.BaseSelectorEventLoop,
    unix_events._UnixSelectorEventLoop,
)


def _methods(cls):
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return {
        fn.name: fn
        for fn in tree.body[0].body
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _self_attrs(fn):
    return {
        n.attr
        for n in ast.walk(fn)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }


def test_asyncio_reaches_the_replaced_loop_state_only_through_overridden_methods():
    overridden = {
        name
        for name in dir(zloopgo.Loop)
        if _asyncio_method(zloopgo.Loop, name)[0]
        not in LOOP_CLASSES + (asyncio.AbstractEventLoop, object)
    }
    methods = {}
    for cls in LOOP_CLASSES:
        for name, fn in _methods(cls).items():
            methods.setdefault(name, (cls.__name__, fn))
    touching = {
        n for n, (_c, fn) in methods.items() if n not in overridden and _self_attrs(fn) & REPLACED
    }
    changed = True
    while changed:  # and what calls them, through self
        changed = False
        for n, (_c, fn) in methods.items():
            if n not in touching and n not in overridden and _self_attrs(fn) & touching:
                touching.add(n)
                changed = True
    bad = sorted(f"{methods[n][0]}.{n}" for n in touching if (methods[n][0], n) not in HARMLESS)
    assert not bad, (
        f"on CPython {VERSION} these use the loop state zloopgo replaces "
        f"({sorted(REPLACED)}) and zloopgo does not override them: {bad}"
    )
    stale = sorted(f"{c}.{n}" for c, n in HARMLESS if n in methods and n not in touching)
    assert not stale, f"HARMLESS lists what no longer uses that state: {stale}"


def test_asyncio_asks_the_selector_only_what_zloopgo_answers():
    # Outside the methods zloopgo overrides, asyncio's code may call only
    # get_key() and close() on loop._selector (zloopgo/_loop.py's
    # _WatchedDescriptors); and nothing outside the loop reads its queue.
    import asyncio as pkg

    overridden = {"_add_reader", "_add_writer", "_remove_reader", "_remove_writer", "_run_once"}
    problems = []
    for path in sorted(Path(pkg.__file__).parent.glob("*.py")):
        if path.stem.startswith(("windows", "proactor", "__main__")):
            continue
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name in overridden:
                continue
            for n in ast.walk(fn):
                if (
                    isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Attribute)
                    and n.value.attr == "_selector"
                    and n.attr not in ("get_key", "close")
                ):
                    problems.append(f"{path.name}:{n.lineno} {fn.name}: _selector.{n.attr}")
                owner = n.value if isinstance(n, ast.Attribute) else None
                owner_name = getattr(owner, "attr", None) or getattr(owner, "id", None)
                if (
                    n is not None
                    and isinstance(n, ast.Attribute)
                    and n.attr in ("_ready", "_scheduled")
                    and owner_name in ("loop", "_loop")
                ):
                    problems.append(f"{path.name}:{n.lineno} {fn.name}: .{n.attr}")
    assert not problems, f"on CPython {VERSION}: " + "; ".join(problems)
