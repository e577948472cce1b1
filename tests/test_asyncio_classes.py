"""What a loop's methods return is an instance of the same asyncio classes
on zloopgo as on asyncio, dual-run: the loop, handles, servers, their
sockets, TCP, Unix, TLS, datagram, pipe and subprocess transports,
streams, futures and tasks. A program's `isinstance(x, asyncio.Y)` then
decides as on asyncio (zloopgo's handles were no asyncio.Handle until
2026-12-05, and a program cancelling a kept timer behind that check let
it fire). Each loop runs in a fresh interpreter; every asyncio class of
the modules below is asked about every object."""

import json

from helpers import run_script

BODY = r"""
import inspect, json, ssl
import asyncio.base_events, asyncio.base_subprocess, asyncio.events, asyncio.futures
import asyncio.selector_events, asyncio.sslproto, asyncio.streams, asyncio.subprocess
import asyncio.tasks, asyncio.transports, asyncio.trsock, asyncio.unix_events
import trustme

MODULES = [
    asyncio, asyncio.base_events, asyncio.base_subprocess, asyncio.events, asyncio.futures,
    asyncio.selector_events, asyncio.sslproto, asyncio.streams, asyncio.subprocess,
    asyncio.tasks, asyncio.transports, asyncio.trsock, asyncio.unix_events,
]
CLASSES = {
    f"{c.__module__}.{c.__qualname__}": c
    for m in MODULES
    for c in vars(m).values()
    if inspect.isclass(c) and c.__module__.startswith("asyncio")
}


def kinds(obj):
    return sorted(name for name, c in CLASSES.items() if isinstance(obj, c))


loop = factory()
asyncio.set_event_loop(loop)
seen = {"loop": kinds(loop)}
for name, h in [
    ("call_soon", loop.call_soon(print)),
    ("call_soon_threadsafe", loop.call_soon_threadsafe(print)),
    ("call_later", loop.call_later(10, print)),
    ("call_at", loop.call_at(loop.time() + 10, print)),
]:
    seen[name] = kinds(h)
    h.cancel()

ca = trustme.CA()
server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ca.issue_cert("localhost").configure_cert(server_ctx)
client_ctx = ssl.create_default_context()
ca.configure_trust(client_ctx)


async def main():
    srv = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    seen["server"] = kinds(srv)
    seen["server socket"] = kinds(srv.sockets[0])
    t, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
    seen["tcp transport"] = kinds(t)
    seen["its socket"] = kinds(t.get_extra_info("socket"))
    t.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    seen["stream reader"] = kinds(reader)
    seen["stream writer"] = kinds(writer)
    seen["stream transport"] = kinds(writer.transport)
    writer.close()
    srv.close()
    await srv.wait_closed()

    tls = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0, ssl=server_ctx)
    t, _ = await loop.create_connection(
        asyncio.Protocol, "127.0.0.1", tls.sockets[0].getsockname()[1],
        ssl=client_ctx, server_hostname="localhost",
    )
    seen["tls transport"] = kinds(t)
    t.close()
    tls.close()
    await tls.wait_closed()

    a, b = socket.socketpair()
    t, _ = await loop.create_unix_connection(asyncio.Protocol, sock=a)
    seen["unix transport"] = kinds(t)
    t.close()
    b.close()

    t, _ = await loop.create_datagram_endpoint(
        asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0)
    )
    seen["datagram transport"] = kinds(t)
    seen["datagram socket"] = kinds(t.get_extra_info("socket"))
    t.close()

    r, w = os.pipe()
    rt, _ = await loop.connect_read_pipe(asyncio.Protocol, os.fdopen(r, "rb"))
    wt, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(w, "wb"))
    seen["read pipe transport"] = kinds(rt)
    seen["write pipe transport"] = kinds(wt)
    rt.close()
    wt.close()

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "pass", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    seen["process"] = kinds(proc)
    seen["process stdout"] = kinds(proc.stdout)
    seen["subprocess transport"] = kinds(proc._transport)
    seen["subprocess stdin transport"] = kinds(proc._transport.get_pipe_transport(0))
    await proc.communicate()

    fut = loop.run_in_executor(None, int)
    seen["run_in_executor"] = kinds(fut)
    await fut
    seen["create_future"] = kinds(loop.create_future())
    task = loop.create_task(asyncio.sleep(0))
    seen["create_task"] = kinds(task)
    await task
    seen["current_task"] = kinds(asyncio.current_task())


loop.run_until_complete(main())
loop.close()
print(json.dumps(seen))
"""


def _classes_seen(loop_name):
    proc = run_script(loop_name, BODY, timeout=120)
    assert proc.returncode == 0, f"{loop_name}: exit {proc.returncode}\n{proc.stderr}"
    return json.loads(proc.stdout.splitlines()[-1])


def test_what_the_loop_returns_is_an_instance_of_the_same_asyncio_classes():
    theirs = _classes_seen("asyncio")
    ours = _classes_seen("zloopgo")
    assert "asyncio.events.TimerHandle" in theirs["call_later"]  # the check can tell
    assert ours.keys() == theirs.keys()
    differ = {k: {"asyncio": theirs[k], "zloopgo": ours[k]} for k in theirs if ours[k] != theirs[k]}
    assert not differ, json.dumps(differ, indent=1)
