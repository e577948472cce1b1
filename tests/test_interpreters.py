"""zloopgo and CPython's subinterpreters (issue 41). Every Python object
the module keeps is its module object's state (docs/architecture.md,
"State: per process, per interpreter, per loop"), so each interpreter,
isolated (its own GIL: Py_MOD_PER_INTERPRETER_GIL_SUPPORTED) or legacy
(sharing the main GIL), loads a module of its own and runs loops as
asyncio does there: each scenario runs the same program on asyncio first,
as the reference. The main interpreter's loops keep running afterwards.
Each scenario runs in its own process: a mix-up of two interpreters'
objects may crash. tests/test_interpreters_isolation.py runs more of the
suite inside interpreters, several at once."""

import importlib.util
import sys

import pytest
from helpers import check, run_script

# Runs `program` (which sets `outcome`) in a new subinterpreter of the kind
# asked for; the outcome comes back through a file, as subinterpreters share
# no objects.
SUBINTERPRETER = """
import os, tempfile
outcome_file = os.path.join(tempfile.mkdtemp(), "outcome")
PROGRAM = '''
import asyncio, sys
outcome = "unset"
try:
    import zloopgo
    async def main():
        await asyncio.sleep(0.001)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop.call_later(0.001, fut.set_result, 21)
        return await fut * 2
    loop = LOOP
    try:
        outcome = "ran %d" % loop.run_until_complete(main())
    finally:
        loop.close()
except ImportError as exc:
    outcome = "ImportError: %s" % exc
with open(OUTCOME_FILE, "w") as f:
    f.write(outcome)
'''
def in_subinterpreter(kind, loop_code):
    program = PROGRAM.replace("LOOP", loop_code).replace("OUTCOME_FILE", repr(outcome_file))
    if kind == "legacy":
        import _testcapi
        assert _testcapi.run_in_subinterp(program) == 0
    else:
        from concurrent import interpreters
        interp = interpreters.create()
        try:
            interp.exec(program)
        finally:
            interp.close()
    with open(outcome_file) as f:
        return f.read()

async def in_main():
    await asyncio.sleep(0.001)
    return "main ran"
"""

LOOP_CODE = {"asyncio": "asyncio.SelectorEventLoop()", "zloopgo": "zloopgo.new_event_loop()"}

KINDS = [
    pytest.param(
        "legacy",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("_testcapi") is None
            or not hasattr(importlib.import_module("_testcapi"), "run_in_subinterp"),
            reason="needs _testcapi.run_in_subinterp (a legacy subinterpreter)",
        ),
    ),
    pytest.param(
        "isolated",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("concurrent.interpreters") is None,
            reason="needs concurrent.interpreters (3.14+)",
        ),
    ),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("loop_name", ["asyncio", "zloopgo"])
@pytest.mark.parametrize("main_first", [True, False], ids=["main-first", "sub-first"])
def test_a_subinterpreter_runs_zloopgo_as_it_runs_asyncio(loop_name, kind, main_first):
    """Whether the main interpreter imported zloopgo (and ran a loop) first
    or not, the subinterpreter's loop runs the program (it used to be
    refused: "module zloopgo._engine does not support loading in
    subinterpreters"), and the main interpreter's zloopgo loop runs after
    it."""
    body = SUBINTERPRETER + (
        f"""
if {main_first}:
    print(zloopgo.new_event_loop().run_until_complete(in_main()))
outcome = in_subinterpreter({kind!r}, {LOOP_CODE[loop_name]!r})
print("sub: " + outcome)
loop = zloopgo.new_event_loop()
print(loop.run_until_complete(in_main()))
loop.close()
"""
    )
    proc = run_script("zloopgo", body, timeout=120)
    check(proc, "sub: ran 42", "main ran")


def test_the_module_imported_again_makes_a_working_loop_type():
    """Multi-phase init runs the module's exec again when it is imported
    again (deleted from sys.modules), making a second LoopCore and collector
    hook: loops of both modules work side by side (each with its module's
    asyncio objects and 3.14's _ThreadSafeHandle runner), with handles
    referenced from elsewhere and a collection."""
    body = """
import gc
first = zloopgo.new_event_loop()
for name in [n for n in sys.modules if n == "zloopgo" or n.startswith("zloopgo.")]:
    del sys.modules[name]
import zloopgo as again
second = again.new_event_loop()
async def work(tag):
    loop = asyncio.get_running_loop()
    kept = [loop.call_soon(lambda: None) for _ in range(3)]  # referenced from elsewhere
    gc.collect()
    fut = loop.create_future()
    loop.call_later(0.001, fut.set_result, tag)
    other = threading.Thread(target=loop.call_soon_threadsafe, args=(kept.append, None))
    other.start()
    other.join()
    await loop.create_task(asyncio.sleep(0.01))
    return await fut, len(kept), loop.time() > 0
for loop in (first, second):
    print(loop.run_until_complete(work(type(loop).__module__)))
    loop.close()
"""
    proc = run_script("zloopgo", body)
    check(proc, "('zloopgo._loop', 4, True)")
    assert proc.stdout.splitlines().count("('zloopgo._loop', 4, True)") == 2, proc.stdout


# The six classes that were static types before issue 41's step 1: the
# transports' native method bases and their state objects.
TRANSPORT_TYPES = (
    "StreamFastPaths",
    "TransportState",
    "DatagramFastPaths",
    "DatagramState",
    "TLSFastPaths",
    "TLSTransportFastPaths",
)


# Those of them on asyncio's transports._FlowControlMixin, mutable as it is.
ON_ASYNCIO_BASES = ("StreamFastPaths", "DatagramFastPaths", "TLSTransportFastPaths")


def test_each_module_object_has_its_own_transport_types_and_both_serve():
    """The transports' native bases and state objects are heap types made
    from the module (a static type would be one object shared by every
    interpreter): a second module object, imported again after its
    deletion from sys.modules, has classes of its own, immutable like
    the static ones were, but for the transports' native bases, which
    derive from asyncio's transports._FlowControlMixin (a class defined in
    Python: CPython 3.12+ makes no immutable type on a mutable base);
    TCP, UDP and TLS round trips run on loops of
    both modules, as on asyncio, both with their native paths (the TCP
    counters, which only the native path adds to, count their transports:
    the slot layouts are each module's own; a process-wide one recorded
    the module imported last's class, and the first module's transports
    took attribute lookups)."""
    body = f"""
import ssl, trustme
from zloopgo import _engine as first_engine
first = zloopgo.new_event_loop()
for name in [n for n in sys.modules if n == "zloopgo" or n.startswith("zloopgo.")]:
    del sys.modules[name]
import zloopgo as again
from zloopgo import _engine as second_engine
second = again.new_event_loop()
HEAP = 1 << 9
for name in {TRANSPORT_TYPES!r}:
    a, b = getattr(first_engine, name), getattr(second_engine, name)
    try:
        a.zl_probe = 1
        immutable = False
    except TypeError:
        immutable = True
    print(name, a is not b, bool(a.__flags__ & HEAP), a.__module__, immutable)

ca = trustme.CA()
cert = ca.issue_cert("localhost")
server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
cert.configure_cert(server_ctx)
client_ctx = ssl.create_default_context()
ca.configure_trust(client_ctx)

class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
    def data_received(self, data):
        self.transport.write(data)

class DatagramEcho(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport
    def datagram_received(self, data, addr):
        self.transport.sendto(data[::-1], addr)

class DatagramClient(asyncio.DatagramProtocol):
    def __init__(self):
        self.got = asyncio.get_running_loop().create_future()
    def datagram_received(self, data, addr):
        self.got.set_result(data)

async def stream_round_trip(ssl_server, ssl_client):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, "127.0.0.1", 0, ssl=ssl_server)
    port = server.sockets[0].getsockname()[1]
    kw = dict(ssl=ssl_client, server_hostname="localhost") if ssl_client else {{}}
    reader, writer = await asyncio.open_connection("127.0.0.1", port, **kw)
    writer.write(b"x" * 100000)
    got = await reader.readexactly(100000)
    writer.close()
    await writer.wait_closed()
    server.close()
    await server.wait_closed()
    return len(got)

async def datagram_round_trip():
    loop = asyncio.get_running_loop()
    server, _ = await loop.create_datagram_endpoint(DatagramEcho, local_addr=("127.0.0.1", 0))
    client, proto = await loop.create_datagram_endpoint(
        DatagramClient, remote_addr=server.get_extra_info("sockname"))
    client.sendto(b"abc")
    got = await proto.got
    client.close()
    server.close()
    return got

async def all_round_trips():
    return (await stream_round_trip(None, None), await datagram_round_trip(),
            await stream_round_trip(server_ctx, client_ctx))

reference = asyncio.SelectorEventLoop()
expected = reference.run_until_complete(all_round_trips())
reference.close()
for tag, loop, engine in (("first", first, first_engine), ("second", second, second_engine)):
    got = loop.run_until_complete(all_round_trips())
    native_reads = engine.stats(loop)["transports"]["tcp"]["reads"] > 0
    print(tag, got == expected)
    print(tag, "native", native_reads)
    loop.close()
"""
    proc = run_script("zloopgo", body)
    check(
        proc,
        *(
            f"{name} True True zloopgo._engine {name not in ON_ASYNCIO_BASES}"
            for name in TRANSPORT_TYPES
        ),
        "first True",
        "second True",
        "first native True",
        "second native True",
    )


def test_each_module_object_answers_with_its_own_socket_module():
    """What the native resolver and socket methods hand the program comes
    from the socket module the _engine module object was made with, as
    asyncio's comes from the one asyncio imported: with socket and zloopgo
    imported again (deleted from sys.modules), each zloopgo loop's lookups
    give members of its own module's AddressFamily and SocketKind (a
    process-wide cache gave the first module's to both), and its
    sock_sendall/sock_recv serve that module's sockets."""
    body = """
import importlib
first_socket = socket
first = zloopgo.new_event_loop()
for name in [n for n in sys.modules if n in ("socket", "zloopgo") or n.startswith("zloopgo.")]:
    del sys.modules[name]
second_socket = importlib.import_module("socket")
import zloopgo as again
second = again.new_event_loop()
assert second_socket.AddressFamily is not first_socket.AddressFamily

async def lookup_and_talk(sock_module):
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo("localhost", 80, type=sock_module.SOCK_STREAM)
    family, kind = infos[0][0], infos[0][1]
    a, b = sock_module.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    await loop.sock_sendall(a, b"ping")
    got = await loop.sock_recv(b, 4)
    a.close()
    b.close()
    return (type(family) is sock_module.AddressFamily, type(kind) is sock_module.SocketKind, got)

reference = asyncio.SelectorEventLoop()
print("asyncio", reference.run_until_complete(lookup_and_talk(first_socket)))
reference.close()
for tag, loop, sock_module in (("first", first, first_socket), ("second", second, second_socket)):
    print(tag, loop.run_until_complete(lookup_and_talk(sock_module)))
    loop.close()
"""
    proc = run_script("zloopgo", body)
    check(
        proc,
        "asyncio (True, True, b'ping')",
        "first (True, True, b'ping')",
        "second (True, True, b'ping')",
    )


@pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="interned strings are immortal from 3.12: a reference taken again leaks nothing",
)
def test_making_the_module_again_takes_no_reference_to_names_each_time():
    """Each module object made from the extension (multi-phase init runs
    its exec for every one) must not intern again, over the first
    references, the names the process keeps: 50 module objects leaked 50
    references to "done", "set_result" and "set_exception" (files.c)."""
    body = """
import gc, importlib.util
from zloopgo import _engine
names = [sys.intern(n) for n in ("done", "set_result", "set_exception")]
def fresh_module():
    spec = importlib.util.spec_from_file_location("zloopgo._engine", _engine.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return len(module.__dict__)
for _ in range(5):  # what the first ones cache is not a leak
    fresh_module()
gc.collect()
before = [sys.getrefcount(n) for n in names]
for _ in range(50):
    fresh_module()
gc.collect()
after = [sys.getrefcount(n) for n in names]
print("grew", [a - b for a, b in zip(after, before)])
"""
    proc = run_script("zloopgo", body)
    check(proc, "grew [0, 0, 0]")


def test_a_module_object_made_again_is_freed_with_what_it_holds():
    """Each module object made from the extension keeps its own state (the
    interned names, its types, its hook in gc.callbacks): once nothing
    holds it, it goes, with all of that. Its collector hook used to hold
    it strongly from gc.callbacks, so every module object made lived on
    until the process ended, and its hook stayed in the list; with 30 made
    and dropped, none was freed and 30 hooks more were there."""
    body = """
import gc, importlib.util, weakref
from zloopgo import _engine
hooks_before = len(gc.callbacks)
def fresh_module():
    spec = importlib.util.spec_from_file_location("zloopgo._engine", _engine.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loop = module.LoopCore  # a type made from it, referring to it
    return weakref.ref(module)
refs = [fresh_module() for _ in range(30)]
gc.collect()
print("alive", sum(r() is not None for r in refs))
print("hooks added", len(gc.callbacks) - hooks_before)
# the main module's hook still runs: a loop's callbacks survive collections
loop = factory()
got = []
for i in range(100):
    loop.call_soon(got.append, i)
gc.collect()
loop.run_until_complete(asyncio.sleep(0))
loop.close()
print("ran", len(got))
"""
    proc = run_script("zloopgo", body)
    check(proc, "alive 0", "hooks added 0", "ran 100")


def test_each_module_object_keeps_its_own_stream_fast_path_switch():
    """set_streams is a module object's own: with zloopgo imported again,
    the first module's switch turned off leaves the second module's loops
    feeding StreamReaders natively (no StreamReader.feed_data call in
    Python), while the first module's loops take asyncio's Python path (a
    process-wide switch turned both off); the bytes arrive either way."""
    body = """
from zloopgo import _engine as first_engine
first = zloopgo.new_event_loop()
for name in [n for n in sys.modules if n == "zloopgo" or n.startswith("zloopgo.")]:
    del sys.modules[name]
import zloopgo as again
second = again.new_event_loop()
first_engine.set_streams(None, None, False)

async def feed_data_calls():
    calls = []
    def profiler(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "feed_data":
            calls.append(1)
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=ours)
    sys.setprofile(profiler)
    try:
        for chunk in (b"a", b"b", b"c"):
            peer.sendall(chunk)
            for _ in range(5):
                await asyncio.sleep(0)
            await asyncio.sleep(0.01)
    finally:
        sys.setprofile(None)
    got = await reader.read(10)
    writer.close()
    peer.close()
    return got, len(calls) > 0

for tag, loop in (("first", first), ("second", second)):
    print(tag, loop.run_until_complete(feed_data_calls()))
    loop.close()
"""
    proc = run_script("zloopgo", body)
    check(proc, "first (b'abc', True)", "second (b'abc', False)")


def test_a_module_objects_threadsafe_handle_class_is_set_once():
    """set_threadsafe_handle sets a module object's _ThreadSafeHandle
    class once: asked again with the same class it gives the same runner
    (the handles queued are told by it), with another it refuses, so the
    class and slot offsets a running handle is read with never change
    under it (they were replaced, and run_threadsafe copied them for each
    call)."""
    body = """
import importlib.util
from zloopgo import _engine
SLOTS = ("_callback", "_args", "_cancelled", "_loop", "_source_traceback", "_repr",
         "_context", "_lock")
class First:
    __slots__ = SLOTS
class Second:
    __slots__ = SLOTS
spec = importlib.util.spec_from_file_location("zloopgo._engine", _engine.__file__)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
runner = module.set_threadsafe_handle(First)
print("same runner", module.set_threadsafe_handle(First) is runner)
try:
    module.set_threadsafe_handle(Second)
    print("another class: accepted")
except RuntimeError as exc:
    print("another class:", type(exc).__name__)
"""
    proc = run_script("zloopgo", body)
    check(proc, "same runner True", "another class: RuntimeError")
