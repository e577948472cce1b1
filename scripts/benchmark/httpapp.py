"""The ASGI app of the HTTP row (benchmark.http): a plaintext response and a
10 KiB JSON body, served by uvicorn on the loop under test.

    GET /plaintext  -> "Hello, World!" (text/plain)
    GET /json       -> a 10 KiB JSON document (application/json), the same bytes every time
    GET /ready      -> "ok", not counted (the runner's readiness probe)

It counts the requests it answered on each path and, when uvicorn shuts it
down (lifespan shutdown, after SIGTERM), prints them as one line
``HTTP-STATS {json}`` so the runner can check them against what wrk saw.
"""

import json
import sys

PLAINTEXT = b"Hello, World!"
# 10 KiB of JSON: a list of small records, padded to exactly 10,240 bytes.
_records = [
    {"id": i, "name": f"item-{i:04d}", "price": i * 1.25, "tags": ["a", "b"]} for i in range(120)
]
_doc = {"items": _records, "pad": ""}
_doc["pad"] = "x" * (10240 - len(json.dumps(_doc, separators=(",", ":")).encode()))
JSON_BODY = json.dumps(_doc, separators=(",", ":")).encode()
assert len(JSON_BODY) == 10240, len(JSON_BODY)

COUNTS = {"/plaintext": 0, "/json": 0}
ROUTES = {
    "/plaintext": (b"text/plain", PLAINTEXT),
    "/json": (b"application/json", JSON_BODY),
    "/ready": (b"text/plain", b"ok"),
}


async def app(scope, receive, send):
    kind = scope["type"]
    if kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                sys.stdout.write("HTTP-STATS " + json.dumps(COUNTS) + "\n")
                sys.stdout.flush()
                await send({"type": "lifespan.shutdown.complete"})
                return
    if kind != "http":
        return
    path = scope["path"]
    route = ROUTES.get(path)
    if route is None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if path in COUNTS:
        COUNTS[path] += 1
    content_type, body = route
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
