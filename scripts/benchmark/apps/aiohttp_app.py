"""The aiohttp server of the application rows: aiohttp.web routes over
benchmark/apps/handlers.py, the same paths as the Starlette app (and
/exit, /gc), on the loop named on the command line:

    python -m benchmark.apps.aiohttp_app --port 8080 --loop zloopgo

It knows aiohttp's side of each row; the work is the handlers'.
"""

import argparse
import asyncio
import importlib

from aiohttp import web

from .handlers import Backend, count_of, exit_soon, gc_counts

MESSAGE = {"message": "Hello, World!"}
BACKEND = web.AppKey("backend", Backend)


async def json_message(request):
    return web.json_response(MESSAGE)


async def single_query(request):
    return web.json_response(await request.app[BACKEND].one_world())


async def queries(request):
    n = count_of(request.query.get("queries"))
    return web.json_response(await request.app[BACKEND].worlds(n))


async def fortunes(request):
    page = await request.app[BACKEND].fortunes_page()
    return web.Response(text=page, content_type="text/html")


async def updates(request):
    n = count_of(request.query.get("queries"))
    return web.json_response(await request.app[BACKEND].updates(n))


async def cached(request):
    return web.json_response(
        await request.app[BACKEND].cached(count_of(request.query.get("count")))
    )


async def ready(request):
    return web.Response(text="ok")


async def collections(request):
    return web.json_response(gc_counts())


async def exit_now(request):
    exit_soon()
    return web.Response(text="bye")


async def connect(app):
    app[BACKEND] = await Backend.connect()
    yield
    await app[BACKEND].close()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--loop", default="asyncio")
    a = p.parse_args(argv)
    module = asyncio if a.loop == "asyncio" else importlib.import_module(a.loop)
    loop = module.new_event_loop()
    asyncio.set_event_loop(loop)
    app = web.Application()
    app.cleanup_ctx.append(connect)
    app.add_routes(
        [
            web.get("/json", json_message),
            web.get("/db", single_query),
            web.get("/queries", queries),
            web.get("/fortunes", fortunes),
            web.get("/updates", updates),
            web.get("/cached", cached),
            web.get("/ready", ready),
            web.get("/exit", exit_now),
            web.get("/gc", collections),
        ]
    )
    web.run_app(app, host="127.0.0.1", port=a.port, loop=loop, print=None, access_log=None)


if __name__ == "__main__":
    main()
