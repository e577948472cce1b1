"""The WebSocket row's server: a raw ASGI app that echoes every message,
run by uvicorn with the websockets library's protocol on the loop under
test:

    uvicorn benchmark.apps.ws_app:app --ws websockets --loop L

    WS /ws  echoes each message (binary or text) as it came
    GET /ready, GET /exit (ends the process: probes/perrequest.py)

It knows the ASGI WebSocket messages; nothing of the loops.
"""

import asyncio
import os


async def app(scope, receive, send):
    kind = scope["type"]
    if kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif kind == "http":
        if scope["path"] == "/exit":
            asyncio.get_running_loop().call_later(0.05, os._exit, 0)  # as handlers.exit_soon
        await send(
            {
                "type": "http.response.start",
                "status": 200 if scope["path"] == "/ready" else 404,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")],
            }
        )
        await send({"type": "http.response.body", "body": b"ok"})
    elif kind == "websocket":
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes") is not None:
                await send({"type": "websocket.send", "bytes": message["bytes"]})
            else:
                await send({"type": "websocket.send", "text": message["text"]})
