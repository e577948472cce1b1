"""The uvicorn server of the application rows: Starlette routes over
benchmark/apps/handlers.py, run by uvicorn (httptools) on the loop under
test:

    uvicorn benchmark.apps.starlette_app:app --http httptools --loop L

    GET /json  /db  /queries?queries=N  /fortunes  /updates?queries=N
        /cached?count=N  /ready  /exit (ends the process: probes/perrequest.py)
        /gc (the interpreter's collections: probes/ratethreads.py)

It knows Starlette's side of each row; the work is the handlers'.
"""

import contextlib

from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.routing import Route

from .handlers import Backend, count_of, exit_soon, gc_counts

MESSAGE = {"message": "Hello, World!"}


@contextlib.asynccontextmanager
async def lifespan(app):
    app.state.backend = await Backend.connect()
    yield
    await app.state.backend.close()


def backend(request):
    return request.app.state.backend


async def json_message(request):
    return JSONResponse(MESSAGE)


async def single_query(request):
    return JSONResponse(await backend(request).one_world())


async def queries(request):
    return JSONResponse(
        await backend(request).worlds(count_of(request.query_params.get("queries")))
    )


async def fortunes(request):
    return HTMLResponse(await backend(request).fortunes_page())


async def updates(request):
    n = count_of(request.query_params.get("queries"))
    return JSONResponse(await backend(request).updates(n))


async def cached(request):
    return JSONResponse(await backend(request).cached(count_of(request.query_params.get("count"))))


async def ready(request):
    return PlainTextResponse("ok")


async def collections(request):
    return JSONResponse(gc_counts())


async def exit_now(request):
    exit_soon()
    return PlainTextResponse("bye")


app = Starlette(
    routes=[
        Route("/json", json_message),
        Route("/db", single_query),
        Route("/queries", queries),
        Route("/fortunes", fortunes),
        Route("/updates", updates),
        Route("/cached", cached),
        Route("/ready", ready),
        Route("/exit", exit_now),
        Route("/gc", collections),
    ],
    lifespan=lifespan,
)
