"""Sanic on the loop under test, through its low-level API
(apps/sanic_server.py: `app.create_server()` under `zloopgo.run` or
`asyncio.run`, since `Sanic.run` makes its own loop): routing, JSON,
keep-alive, a streamed request body checked by hash, a streamed response,
websocket echo and close codes, server listeners and SIGINT shutdown."""

import asyncio

import pytest
import websockets
from e2e_util import (
    APPS,
    EXPECTED_LOOP,
    MIB,
    RawHTTP,
    ServerProcess,
    get,
    payload,
    python_argv,
    read_lines,
    run_on,
    sha256,
)
from websockets.asyncio.client import connect


def sanic_argv(loop_name):
    return lambda port: python_argv(str(APPS / "sanic_server.py"), loop_name, str(port))


@pytest.fixture(scope="module")
def server(loop_name, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"sanic-{loop_name}")
    srv = ServerProcess(sanic_argv(loop_name), tmp / "server.log").start()
    yield srv
    srv.kill()


def test_runs_on_loop_under_test(server, loop_name):
    response = get(server.port, "/loop")
    assert response.json() == {"loop": EXPECTED_LOOP[loop_name], "pid": server.proc.pid}


def test_routing_json_and_keep_alive(server):
    with RawHTTP(server.port) as conn:
        response = conn.request("GET", "/items/5?q=x")
        assert (response.status, response.json()) == (200, {"item_id": 5, "q": "x"})
        assert conn.request("GET", "/items/five").status == 404
        assert conn.request("GET", "/nowhere").status == 404
        response = conn.request(
            "POST",
            "/orders",
            body=b'{"item": "w", "quantity": 4, "unit_price": 0.5}',
            headers=[("Content-Type", "application/json")],
        )
        assert response.status == 201
        assert response.json() == {"item": "w", "quantity": 4, "unit_price": 0.5, "total": 2.0}


def test_streamed_request_bodies(server):
    data = payload(10, 10 * MIB)
    with RawHTTP(server.port) as conn:
        got = conn.request("POST", "/upload", body=data).json()
        assert (got["size"], got["sha256"], got["transfer_encoding"]) == (
            len(data),
            sha256(data),
            None,
        )
        head = data[: 2 * MIB]
        parts = [head[i : i + 123_457] for i in range(0, len(head), 123_457)]
        got = conn.request("POST", "/upload", chunks=parts).json()
        assert (got["size"], got["sha256"], got["transfer_encoding"]) == (
            len(head),
            sha256(head),
            "chunked",
        )


def test_streamed_response(server):
    with RawHTTP(server.port) as conn:
        response = conn.request("GET", "/stream?lines=4")
    assert response.status == 200
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.body == b"".join(f"line {i}\n".encode() for i in range(4))
    assert response.chunks == [len(f"line {i}\n") for i in range(4)]


def test_websocket(server, loop, loop_name):
    async def main():
        async with connect(f"ws://127.0.0.1:{server.port}/ws", max_size=4 * MIB) as ws:
            await ws.send("héllo")
            assert await asyncio.wait_for(ws.recv(), 10) == "héllo"
            big = payload(11, 1 * MIB)
            await ws.send(big)
            assert await asyncio.wait_for(ws.recv(), 10) == big
            await ws.send("close:4003:sanic says bye")
            with pytest.raises(websockets.ConnectionClosed) as info:
                await asyncio.wait_for(ws.recv(), 10)
            assert (info.value.rcvd.code, info.value.rcvd.reason) == (4003, "sanic says bye")
        async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
            await ws.send(b"\x01")
            assert await asyncio.wait_for(ws.recv(), 10) == b"\x01"
            await ws.close(code=4004)
            assert ws.close_code == 4004

    run_on(loop, loop_name, main())


def test_listeners_and_sigint_shutdown(loop_name, tmp_path):
    log = tmp_path / "listeners.log"
    srv = ServerProcess(
        sanic_argv(loop_name), tmp_path / "server.log", env={"E2E_LIFESPAN_LOG": str(log)}
    ).start()
    try:
        status, seconds = srv.interrupt_with_idle_connection(EXPECTED_LOOP[loop_name])
    finally:
        srv.kill()
    assert status == 0, srv.output()
    assert seconds < 1.0, f"SIGINT to exit took {seconds:.2f} s\n{srv.output()}"
    assert read_lines(log) == [
        f"before_server_start {EXPECTED_LOOP[loop_name]}",
        "after_server_stop",
    ]
    assert not srv.problems(), srv.output()


def test_server_logged_no_error(server):
    # Runs after the module's other cases on this server (pytest keeps file
    # order within a parameter): whatever they did, the server logged no
    # error and no traceback.
    assert server.proc.poll() is None, server.output()
    assert not server.problems(), server.output()
