"""aiohttp's server and client, both on the loop under test in one process:
JSON, keep-alive, bodies up (fixed-length and chunked) and down (streamed)
checked by hash, websocket echo and close codes, a client timeout, and
graceful cleanup."""

import asyncio
import contextlib
import hashlib

import aiohttp
import pytest
from aiohttp import web
from e2e_util import EXPECTED_LOOP, MIB, payload, run_on, sha256

WS_CLOSES = web.AppKey("ws_closes", list)


def loop_name_of_running():
    cls = type(asyncio.get_running_loop())
    return f"{cls.__module__}.{cls.__qualname__}"


async def handle_loop(request):
    return web.json_response({"loop": loop_name_of_running()})


async def handle_peer(request):
    return web.json_response({"peer": list(request.transport.get_extra_info("peername"))})


async def handle_upload(request):
    digest, size = hashlib.sha256(), 0
    async for piece in request.content.iter_any():
        digest.update(piece)
        size += len(piece)
    return web.json_response(
        {
            "sha256": digest.hexdigest(),
            "size": size,
            "transfer_encoding": request.headers.get("Transfer-Encoding"),
        }
    )


async def handle_stream(request):
    seed, size = int(request.query["seed"]), int(request.query["size"])
    data = payload(seed, size)
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    for start in range(0, size, 100_000):
        await response.write(data[start : start + 100_000])
    await response.write_eof()
    return response


async def handle_sleep(request):
    await asyncio.sleep(float(request.query["seconds"]))
    return web.json_response({"slept": True})


async def handle_ws(request):
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for msg in ws:
        if msg.type == aiohttp.WSMsgType.TEXT:
            if msg.data.startswith("close:"):
                _, code, reason = msg.data.split(":", 2)
                await ws.close(code=int(code), message=reason.encode())
            else:
                await ws.send_str(msg.data)
        elif msg.type == aiohttp.WSMsgType.BINARY:
            await ws.send_bytes(msg.data)
    request.app[WS_CLOSES].append(ws.close_code)
    return ws


@contextlib.asynccontextmanager
async def serve_and_connect(**session_kwargs):
    app = web.Application(client_max_size=16 * MIB)
    app[WS_CLOSES] = []
    app.router.add_get("/loop", handle_loop)
    app.router.add_get("/peer", handle_peer)
    app.router.add_post("/upload", handle_upload)
    app.router.add_get("/stream", handle_stream)
    app.router.add_get("/sleep", handle_sleep)
    app.router.add_get("/ws", handle_ws)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", **session_kwargs) as session:
            yield app, session
    finally:
        await runner.cleanup()


def test_json_and_keep_alive(loop, loop_name):
    async def main():
        connector = aiohttp.TCPConnector(limit=1)
        async with serve_and_connect(connector=connector) as (_app, session):
            async with session.get("/loop") as response:
                assert response.status == 200
                assert await response.json() == {"loop": EXPECTED_LOOP[loop_name]}
            # The client's loop is the loop under test as well.
            assert loop_name_of_running() == EXPECTED_LOOP[loop_name]
            peers = []
            for _ in range(5):
                async with session.get("/peer") as response:
                    peers.append(tuple((await response.json())["peer"]))
            assert len(set(peers)) == 1, peers
            async with session.get("/nowhere") as response:
                assert response.status == 404

    run_on(loop, loop_name, main())


def test_bodies_up_and_down(loop, loop_name):
    data = payload(7, 5 * MIB)

    async def chunks():
        for start in range(0, len(data), 300_000):
            yield data[start : start + 300_000]

    async def main():
        async with serve_and_connect() as (_app, session):
            async with session.post("/upload", data=data) as response:
                got = await response.json()
            assert (got["size"], got["sha256"], got["transfer_encoding"]) == (
                len(data),
                sha256(data),
                None,
            )
            async with session.post("/upload", data=chunks()) as response:
                got = await response.json()
            assert (got["size"], got["sha256"], got["transfer_encoding"]) == (
                len(data),
                sha256(data),
                "chunked",
            )
            async with session.get(f"/stream?seed=8&size={10 * MIB}") as response:
                assert response.headers["Transfer-Encoding"] == "chunked"
                digest = hashlib.sha256()
                async for piece in response.content.iter_chunked(64 * 1024):
                    digest.update(piece)
            assert digest.hexdigest() == sha256(payload(8, 10 * MIB))

    run_on(loop, loop_name, main())


def test_websocket(loop, loop_name):
    async def main():
        async with serve_and_connect() as (app, session):
            async with session.ws_connect("/ws") as ws:
                await ws.send_str("héllo")
                assert await ws.receive_str(timeout=10) == "héllo"
                big = payload(9, 2 * MIB)
                await ws.send_bytes(big)
                assert await ws.receive_bytes(timeout=10) == big
                await ws.send_str("close:4001:bye")
                msg = await ws.receive(timeout=10)
                assert msg.type == aiohttp.WSMsgType.CLOSE
                assert (msg.data, msg.extra) == (4001, "bye")
            assert ws.close_code == 4001
            async with session.ws_connect("/ws") as ws:
                await ws.send_bytes(b"\x00\x01")
                assert await ws.receive_bytes(timeout=10) == b"\x00\x01"
                await ws.close(code=4002, message=b"client done")
            # aiohttp's server answers a close with 1000, whatever the code.
            assert ws.close_code == 1000
            for _ in range(100):
                if len(app[WS_CLOSES]) == 2:
                    break
                await asyncio.sleep(0.02)
            # A close code is the one the peer sent: the client answered the
            # server's 4001 with 1000, and started its own close with 4002.
            assert app[WS_CLOSES] == [1000, 4002]

    run_on(loop, loop_name, main())


def test_client_timeout(loop, loop_name):
    async def main():
        async with serve_and_connect() as (_app, session):
            started = loop.time()
            with pytest.raises(asyncio.TimeoutError):
                async with session.get(
                    "/sleep?seconds=1", timeout=aiohttp.ClientTimeout(total=0.3)
                ) as response:
                    await response.read()
            assert 0.25 <= loop.time() - started < 0.9
            async with session.get("/sleep?seconds=0.01") as response:
                assert await response.json() == {"slept": True}

    run_on(loop, loop_name, main())
