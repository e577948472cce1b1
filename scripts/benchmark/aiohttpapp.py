"""The aiohttp server of the HTTP row (benchmark.httpbench): the same two
responses as benchmark.httpapp, served by aiohttp's web server on the loop
named on the command line.

    python -m benchmark.aiohttpapp --port 8080 --loop zloopgo

Prints ``HTTP-STATS {json}`` (requests answered per path) when SIGTERM
stops it, as the uvicorn app does at lifespan shutdown.
"""

import argparse
import asyncio
import importlib
import json
import sys

from aiohttp import web

from .httpapp import JSON_BODY, PLAINTEXT

COUNTS = {"/plaintext": 0, "/json": 0}


async def plaintext(request):
    COUNTS["/plaintext"] += 1
    return web.Response(body=PLAINTEXT, content_type="text/plain")


async def json_doc(request):
    COUNTS["/json"] += 1
    return web.Response(body=JSON_BODY, content_type="application/json")


async def ready(request):
    return web.Response(body=b"ok", content_type="text/plain")


async def report(app):
    sys.stdout.write("HTTP-STATS " + json.dumps(COUNTS) + "\n")
    sys.stdout.flush()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--loop", default="asyncio")
    a = p.parse_args(argv)
    if a.loop == "asyncio":
        loop = asyncio.new_event_loop()
    else:
        loop = importlib.import_module(a.loop).new_event_loop()
    asyncio.set_event_loop(loop)
    app = web.Application()
    app.add_routes(
        [web.get("/plaintext", plaintext), web.get("/json", json_doc), web.get("/ready", ready)]
    )
    app.on_cleanup.append(report)
    web.run_app(app, host="127.0.0.1", port=a.port, loop=loop, print=None, access_log=None)


if __name__ == "__main__":
    main()
