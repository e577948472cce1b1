"""A plain ASGI application for the uvicorn, hypercorn and httpx end-to-end
tests: it reports the loop it runs on, echoes what it was sent (as a hash),
streams deterministic bodies, echoes websocket frames and closes with a
code it is told, and logs its lifespan events to $E2E_LIFESPAN_LOG."""

import asyncio
import hashlib
import json
import os
import random
from urllib.parse import parse_qs

# The close code of each websocket disconnect the app received, by the
# connection's ?tag= query parameter.
WS_CLOSES: dict[str, int | None] = {}
STREAM_CHUNK = 64 * 1024


def loop_name() -> str:
    cls = type(asyncio.get_running_loop())
    return f"{cls.__module__}.{cls.__qualname__}"


def log_lifespan(line: str) -> None:
    path = os.environ.get("E2E_LIFESPAN_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


async def send_json(send, obj, status=200):
    body = json.dumps(obj).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def read_body(receive):
    """(sha256, size, number of body messages) of the request body."""
    digest, size, messages = hashlib.sha256(), 0, 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionError("client went away")
        messages += 1
        chunk = message.get("body", b"")
        digest.update(chunk)
        size += len(chunk)
        if not message.get("more_body"):
            return digest.hexdigest(), size, messages


async def http(scope, receive, send):
    path = scope["path"]
    query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    if path == "/loop":
        return await send_json(send, {"loop": loop_name(), "pid": os.getpid()})
    if path == "/client":
        return await send_json(
            send, {"client": list(scope["client"]), "http_version": scope["http_version"]}
        )
    if path == "/upload" and scope["method"] == "POST":
        digest, size, messages = await read_body(receive)
        return await send_json(
            send,
            {
                "sha256": digest,
                "size": size,
                "messages": messages,
                "transfer_encoding": headers.get("transfer-encoding"),
            },
        )
    if path == "/download":
        size = int(query["size"])
        data = random.Random(int(query["seed"])).randbytes(size)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/octet-stream"),
                    (b"content-length", b"%d" % size),
                ],
            }
        )
        view = memoryview(data)
        for start in range(0, size, STREAM_CHUNK):
            await send(
                {
                    "type": "http.response.body",
                    "body": bytes(view[start : start + STREAM_CHUNK]),
                    "more_body": start + STREAM_CHUNK < size,
                }
            )
        return None
    if path == "/chunks":
        # One body message per size, no content-length: a chunked response.
        sizes = [int(s) for s in query["sizes"].split(",")]
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/octet-stream")],
            }
        )
        for i, size in enumerate(sizes):
            await send(
                {"type": "http.response.body", "body": bytes([65 + i]) * size, "more_body": True}
            )
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return None
    if path == "/sleep":
        await asyncio.sleep(float(query["seconds"]))
        return await send_json(send, {"slept": float(query["seconds"])})
    if path == "/ws-closes":
        return await send_json(send, WS_CLOSES)
    return await send_json(send, {"error": "not found"}, status=404)


async def websocket(scope, receive, send):
    message = await receive()
    assert message["type"] == "websocket.connect"
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            tag = parse_qs(scope["query_string"].decode()).get("tag", [""])[0]
            WS_CLOSES[tag] = message.get("code")
            return
        text = message.get("text")
        if text is not None and text.startswith("close:"):
            _, code, reason = text.split(":", 2)
            await send({"type": "websocket.close", "code": int(code), "reason": reason})
            return
        if text is not None:
            await send({"type": "websocket.send", "text": text})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


async def lifespan(scope, receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            log_lifespan(f"startup {loop_name()}")
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            log_lifespan("shutdown")
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope, receive, send):
    handler = {"http": http, "websocket": websocket, "lifespan": lifespan}[scope["type"]]
    await handler(scope, receive, send)
