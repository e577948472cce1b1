"""ASGI servers in a subprocess serving apps/asgi_app.py: uvicorn (`--loop
zloopgo:new_event_loop`, or `--loop asyncio`) with the httptools and with
the h11 HTTP implementation, and hypercorn (apps/hypercorn_server.py runs
`hypercorn.asyncio.serve` under `zloopgo.run` or `asyncio.run`). Each case:
the server's own report of its loop, keep-alive, chunked bodies both ways,
10 MiB up and down checked by hash, websocket echo and close codes (the
`websockets` client, on the loop under test), lifespan events, and SIGINT
shutdown within a second with exit status 0; a slow reader (flow control)
and a client that resets mid-download; uvicorn with two worker processes."""

import asyncio
import concurrent.futures
import socket
import struct
import time

import pytest
import websockets
from e2e_util import (
    ASGI_SERVERS,
    EXPECTED_LOOP,
    HOST,
    MIB,
    RawHTTP,
    ServerProcess,
    asgi_server_argv,
    get,
    payload,
    read_lines,
    run_on,
    sha256,
    uvicorn_argv,
)
from websockets.asyncio.client import connect


@pytest.fixture(scope="module", params=ASGI_SERVERS)
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def server(loop_name, kind, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"{kind}-{loop_name}")
    srv = ServerProcess(
        asgi_server_argv(kind, loop_name),
        tmp / "server.log",
        env={"E2E_LIFESPAN_LOG": str(tmp / "lifespan.log")},
    ).start()
    yield srv
    srv.kill()


def test_server_runs_on_loop_under_test(server, loop_name):
    response = get(server.port, "/loop")
    assert response.status == 200
    assert response.json()["loop"] == EXPECTED_LOOP[loop_name]
    assert response.json()["pid"] == server.proc.pid


def test_keep_alive(server):
    with RawHTTP(server.port) as conn:
        local_port = conn.sock.getsockname()[1]
        seen = []
        for _ in range(5):
            response = conn.request("GET", "/client")
            assert response.status == 200
            assert "close" not in response.headers.get("connection", "").lower()
            seen.append(response.json()["client"][1])
            assert response.json()["http_version"] == "1.1"
    # Every request arrived on the same connection: the one this socket opened.
    assert seen == [local_port] * 5


def test_chunked_request_body(server):
    parts = [b"a" * 1000, b"b" * 70_000, b"", b"c" * 5, payload(3, 200_000)]
    parts = [p for p in parts if p]  # an empty chunk would end the body
    with RawHTTP(server.port) as conn:
        response = conn.request("POST", "/upload", chunks=parts)
    assert response.status == 200
    got = response.json()
    assert got["transfer_encoding"] == "chunked"
    assert got["size"] == sum(map(len, parts))
    assert got["sha256"] == sha256(b"".join(parts))


def test_chunked_response_body(server):
    sizes = [1, 1000, 70_000, 3]
    with RawHTTP(server.port) as conn:
        response = conn.request("GET", "/chunks?sizes=" + ",".join(map(str, sizes)))
        assert response.status == 200
        assert response.headers["transfer-encoding"] == "chunked"
        assert "content-length" not in response.headers
        # One chunk on the wire per body message the app sent.
        assert response.chunks == sizes
        assert response.body == b"".join(bytes([65 + i]) * n for i, n in enumerate(sizes))
        # The connection stays usable after the terminating chunk.
        assert conn.request("GET", "/client").status == 200


def test_upload_10mib(server):
    data = payload(1, 10 * MIB)
    with RawHTTP(server.port) as conn:
        response = conn.request("POST", "/upload", body=data)
    assert response.status == 200
    got = response.json()
    assert got["size"] == len(data)
    assert got["sha256"] == sha256(data)
    assert got["transfer_encoding"] is None


def test_download_10mib(server):
    with RawHTTP(server.port) as conn:
        response = conn.request("GET", f"/download?seed=2&size={10 * MIB}")
    assert response.status == 200
    assert int(response.headers["content-length"]) == 10 * MIB
    assert sha256(response.body) == sha256(payload(2, 10 * MIB))


def test_download_slow_reader(server):
    # A reader with a small receive buffer that takes its time: the server's
    # writes fill the socket (the kernel holds about 3.5 MiB here), so its
    # transport must pause and resume the application (flow control)
    # without losing or reordering a byte.
    size = 8 * MIB
    with RawHTTP(server.port, pause=0.001, rcvbuf=16 * 1024) as conn:
        response = conn.request("GET", f"/download?seed=14&size={size}")
        assert response.status == 200
        assert sha256(response.body) == sha256(payload(14, size))
        # The connection is still in step for the next request.
        assert conn.request("GET", "/client").status == 200


def test_client_resets_mid_download(server):
    # The client goes away (RST) after the first 100 KiB of 10 MiB: the
    # server drops that response quietly and goes on serving.
    with RawHTTP(server.port) as conn:
        conn.sock.sendall(
            f"GET /download?seed=15&size={10 * MIB} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
        )
        assert conn.rfile.readline().startswith(b"HTTP/1.1 200")
        assert len(conn.rfile.read(100 * 1024)) == 100 * 1024
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    time.sleep(0.2)
    for _ in range(3):
        assert get(server.port, "/client").status == 200


def test_websocket_echo(server, loop, loop_name):
    async def main():
        async with connect(f"ws://127.0.0.1:{server.port}/ws", max_size=4 * MIB) as ws:
            for text in ["hello", "", "é" * 5000]:
                await ws.send(text)
                assert await asyncio.wait_for(ws.recv(), 10) == text
            for data in [b"\x00\xff", payload(4, 1 * MIB)]:
                await ws.send(data)
                echoed = await asyncio.wait_for(ws.recv(), 10)
                assert isinstance(echoed, bytes)
                assert echoed == data
            # The type of a frame is kept: text stays str, binary stays bytes.
            await ws.send(b"text?")
            assert await asyncio.wait_for(ws.recv(), 10) == b"text?"

    run_on(loop, loop_name, main())


def test_websocket_close_codes(server, kind, loop, loop_name):
    tag = f"{kind}-{loop_name}-{time.monotonic_ns()}"

    async def main():
        # The server closes with the code and reason it is told.
        async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
            await ws.send("close:4001:bye now")
            with pytest.raises(websockets.ConnectionClosed) as info:
                await asyncio.wait_for(ws.recv(), 10)
            assert info.value.rcvd is not None
            assert (info.value.rcvd.code, info.value.rcvd.reason) == (4001, "bye now")
        # The client closes with its own code; the server answers with it.
        async with connect(f"ws://127.0.0.1:{server.port}/ws?tag={tag}") as ws:
            await ws.send("ping")
            assert await asyncio.wait_for(ws.recv(), 10) == "ping"
            await ws.close(code=4002, reason="client done")
            assert ws.close_code == 4002

    run_on(loop, loop_name, main())
    # The app receives websocket.disconnect with the client's code.
    # hypercorn 0.18 hands the app 1006 for any close the client starts (its
    # ws_stream does not pass the peer's code on), on asyncio as well.
    expected = 1006 if kind == "hypercorn" else 4002
    deadline = time.monotonic() + 5
    while tag not in (closes := get(server.port, "/ws-closes").json()):
        assert time.monotonic() < deadline, "the app never received websocket.disconnect"
        time.sleep(0.05)
    assert closes[tag] == expected


def test_lifespan_and_sigint_shutdown(loop_name, kind, tmp_path):
    lifespan_log = tmp_path / "lifespan.log"
    srv = ServerProcess(
        asgi_server_argv(kind, loop_name),
        tmp_path / "server.log",
        env={"E2E_LIFESPAN_LOG": str(lifespan_log)},
    ).start()
    try:
        assert read_lines(lifespan_log) == [f"startup {EXPECTED_LOOP[loop_name]}"]
        status, seconds = srv.interrupt_with_idle_connection(EXPECTED_LOOP[loop_name])
    finally:
        srv.kill()
    output = srv.output()
    assert status == 0, output
    assert seconds < 1.0, f"SIGINT to exit took {seconds:.2f} s\n{output}"
    assert read_lines(lifespan_log) == [f"startup {EXPECTED_LOOP[loop_name]}", "shutdown"]
    if kind.startswith("uvicorn"):
        assert "Application shutdown complete." in output
    assert not srv.problems(), output


def test_uvicorn_two_workers(loop_name, tmp_path):
    # `--workers 2`: uvicorn's parent binds the socket and spawns two
    # workers (multiprocessing's spawn), each building its own loop from
    # the factory; SIGINT to the parent stops both, each running its
    # lifespan shutdown.
    lifespan_log = tmp_path / "lifespan.log"
    srv = ServerProcess(
        uvicorn_argv("asgi_app:app", loop_name, extra=["--workers", "2"]),
        tmp_path / "server.log",
        env={"E2E_LIFESPAN_LOG": str(lifespan_log)},
    ).start()
    started = f"startup {EXPECTED_LOOP[loop_name]}"
    try:
        deadline = time.monotonic() + 30
        while read_lines(lifespan_log) != [started, started]:
            assert time.monotonic() < deadline, f"{read_lines(lifespan_log)}\n{srv.output()}"
            time.sleep(0.05)
        # Which worker accepts is the kernel's choice, and on a busy
        # machine one worker can win every race for requests made one at
        # a time: ask in concurrent bursts until both answered (or 20 s).
        pids = set()
        deadline = time.monotonic() + 20
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            while len(pids) < 2 and time.monotonic() < deadline:
                for report in pool.map(lambda _: get(srv.port, "/loop").json(), range(64)):
                    assert report["loop"] == EXPECTED_LOOP[loop_name]
                    pids.add(report["pid"])
        assert len(pids) == 2 and srv.proc.pid not in pids, pids
        status, seconds = srv.interrupt()
    finally:
        srv.kill()
    assert status == 0, srv.output()
    assert seconds < 5, f"SIGINT to exit took {seconds:.2f} s\n{srv.output()}"
    assert read_lines(lifespan_log) == [started, started, "shutdown", "shutdown"]
    assert not srv.problems(), srv.output()


def test_server_logged_no_error(server):
    # Runs after the module's other cases on this server (pytest keeps file
    # order within a parameter): whatever they did, the server logged no
    # error and no traceback.
    assert server.proc.poll() is None, server.output()
    assert not server.problems(), server.output()
