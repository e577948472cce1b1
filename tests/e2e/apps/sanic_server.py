"""Serves a Sanic application on the loop named on the command line.

`Sanic.run` and `sanic app:app` manage their own processes and loops (and
switch asyncio's policy to uvloop's when they may), so they cannot be
handed a loop. Sanic's low-level API can: `app.create_server()` builds the
server on the running loop, and the caller drives the listeners and the
shutdown. This launcher runs that under `zloopgo.run` (or `asyncio.run`)
and stops gracefully on SIGINT or SIGTERM.

usage: python sanic_server.py {asyncio,zloopgo} PORT"""

import asyncio
import hashlib
import os
import signal
import sys

from sanic import Sanic
from sanic.response import json

import zloopgo

app = Sanic("zloopgo_e2e")
LOG = os.environ.get("E2E_LIFESPAN_LOG")


def loop_name() -> str:
    cls = type(asyncio.get_running_loop())
    return f"{cls.__module__}.{cls.__qualname__}"


def log(line: str) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


@app.before_server_start
async def before_start(app):
    log(f"before_server_start {loop_name()}")


@app.after_server_stop
async def after_stop(app):
    log("after_server_stop")


@app.get("/loop")
async def report_loop(request):
    return json({"loop": loop_name(), "pid": os.getpid()})


@app.get("/items/<item_id:int>")
async def item(request, item_id: int):
    return json({"item_id": item_id, "q": request.args.get("q")})


@app.post("/orders")
async def order(request):
    body = request.json
    return json({**body, "total": body["quantity"] * body["unit_price"]}, status=201)


@app.post("/upload", stream=True)
async def upload(request):
    digest, size = hashlib.sha256(), 0
    while (piece := await request.stream.read()) is not None:
        digest.update(piece)
        size += len(piece)
    return json(
        {
            "sha256": digest.hexdigest(),
            "size": size,
            "transfer_encoding": request.headers.get("transfer-encoding"),
        }
    )


@app.get("/stream")
async def stream(request):
    response = await request.respond(content_type="text/plain")
    for i in range(int(request.args.get("lines", "5"))):
        await response.send(f"line {i}\n")
        await asyncio.sleep(0.01)
    await response.eof()


@app.websocket("/ws")
async def echo(request, ws):
    async for message in ws:
        if isinstance(message, str) and message.startswith("close:"):
            _, code, reason = message.split(":", 2)
            await ws.close(code=int(code), reason=reason)
            return
        await ws.send(message)


async def serve(port: int) -> None:
    server = await app.create_server(host="127.0.0.1", port=port, access_log=False)
    assert server is not None
    await server.startup()
    await server.before_start()
    await server.after_start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.before_stop()
    # Stop listening, close the idle keep-alive connections, then wait for
    # the rest (since Python 3.12.1 wait_closed waits for every connection,
    # so closing the idle ones after it would never return).
    closed = server.close()
    for connection in list(server.connections):
        connection.close_if_idle()
    try:
        await asyncio.wait_for(closed, app.config.GRACEFUL_SHUTDOWN_TIMEOUT)
    except asyncio.TimeoutError:
        for connection in list(server.connections):
            connection.abort()
    await server.after_stop()


def main() -> None:
    loop_kind, port = sys.argv[1], int(sys.argv[2])
    run = {"asyncio": asyncio.run, "zloopgo": zloopgo.run}[loop_kind]
    run(serve(port))


if __name__ == "__main__":
    main()
