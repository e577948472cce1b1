"""httpx's AsyncClient on the loop under test against servers on the same
kind of loop: uvicorn (HTTP/1.1: pooled keep-alive connections, concurrent
requests, a streamed upload and download checked by hash, a read timeout;
and over TLS, with a websocket over TLS too) and hypercorn (HTTP/2 without
TLS: many streams on one connection)."""

import asyncio
import hashlib
import ssl
import time

import httpx
import pytest
import trustme
from e2e_util import (
    EXPECTED_LOOP,
    MIB,
    ServerProcess,
    asgi_server_argv,
    payload,
    run_on,
    sha256,
    uvicorn_argv,
)
from websockets.asyncio.client import connect


@pytest.fixture(scope="module")
def uvicorn(loop_name, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"httpx-uvicorn-{loop_name}")
    srv = ServerProcess(asgi_server_argv("uvicorn-httptools", loop_name), tmp / "log").start()
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def tls_ca():
    return trustme.CA()


@pytest.fixture(scope="module")
def uvicorn_tls(loop_name, tls_ca, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"httpx-uvicorn-tls-{loop_name}")
    cert = tls_ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp / "cert.pem"))
    argv = uvicorn_argv(
        "asgi_app:app",
        loop_name,
        extra=["--ssl-keyfile", str(tmp / "key.pem"), "--ssl-certfile", str(tmp / "cert.pem")],
    )
    srv = ServerProcess(argv, tmp / "log").start()
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def hypercorn(loop_name, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"httpx-hypercorn-{loop_name}")
    srv = ServerProcess(asgi_server_argv("hypercorn", loop_name), tmp / "log").start()
    yield srv
    srv.kill()


def test_requests_and_connection_pool(uvicorn, loop, loop_name):
    async def main():
        limits = httpx.Limits(max_connections=3, max_keepalive_connections=3)
        base = f"http://127.0.0.1:{uvicorn.port}"
        async with httpx.AsyncClient(base_url=base, limits=limits) as client:
            response = await client.get("/loop")
            assert response.status_code == 200
            assert response.json()["loop"] == EXPECTED_LOOP[loop_name]
            assert response.http_version == "HTTP/1.1"
            # 30 concurrent requests share at most 3 connections.
            responses = await asyncio.gather(*(client.get("/client") for _ in range(30)))
            assert [r.status_code for r in responses] == [200] * 30
            ports = {r.json()["client"][1] for r in responses}
            assert 1 <= len(ports) <= 3, ports
            # Sequential requests reuse a kept-alive connection.
            again = {(await client.get("/client")).json()["client"][1] for _ in range(5)}
            assert len(again) == 1 and again <= ports
            missing = await client.get("/missing")
            assert missing.status_code == 404

    run_on(loop, loop_name, main())


def test_streamed_upload_and_download(uvicorn, loop, loop_name):
    data = payload(5, 4 * MIB)

    async def body():
        for start in range(0, len(data), 256 * 1024):
            yield data[start : start + 256 * 1024]
            await asyncio.sleep(0)

    async def main():
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{uvicorn.port}") as client:
            response = await client.post("/upload", content=body())
            got = response.json()
            # An async iterable without a length goes out chunked.
            assert got["transfer_encoding"] == "chunked"
            assert (got["size"], got["sha256"]) == (len(data), sha256(data))
            digest, pieces = hashlib.sha256(), 0
            path = f"/download?seed=6&size={10 * MIB}"
            async with client.stream("GET", path) as response:
                assert response.status_code == 200
                async for piece in response.aiter_bytes():
                    digest.update(piece)
                    pieces += 1
            assert digest.hexdigest() == sha256(payload(6, 10 * MIB))
            assert pieces > 1

    run_on(loop, loop_name, main())


def test_read_timeout(uvicorn, loop, loop_name):
    async def main():
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{uvicorn.port}") as client:
            started = time.monotonic()
            with pytest.raises(httpx.ReadTimeout):
                await client.get("/sleep?seconds=5", timeout=httpx.Timeout(5, read=0.3))
            elapsed = time.monotonic() - started
            assert 0.25 <= elapsed < 3, elapsed
            # The client is still usable afterwards.
            assert (await client.get("/sleep?seconds=0.01")).json() == {"slept": 0.01}

    run_on(loop, loop_name, main())


def test_tls(uvicorn_tls, tls_ca, loop, loop_name):
    context = ssl.create_default_context()
    tls_ca.configure_trust(context)
    upload = payload(12, 4 * MIB)

    async def main():
        base = f"https://127.0.0.1:{uvicorn_tls.port}"
        async with httpx.AsyncClient(base_url=base, verify=context) as client:
            response = await client.get("/loop")
            assert response.json()["loop"] == EXPECTED_LOOP[loop_name]
            got = (await client.post("/upload", content=upload)).json()
            assert (got["size"], got["sha256"]) == (len(upload), sha256(upload))
            response = await client.get(f"/download?seed=13&size={10 * MIB}")
            assert sha256(response.content) == sha256(payload(13, 10 * MIB))
            # Keep-alive over TLS: one connection for these requests.
            ports = {(await client.get("/client")).json()["client"][1] for _ in range(5)}
            assert len(ports) == 1
        # A certificate the client does not trust is refused.
        async with httpx.AsyncClient(base_url=base) as untrusting:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await untrusting.get("/loop")
        url = f"wss://127.0.0.1:{uvicorn_tls.port}/ws"
        async with connect(url, ssl=context, max_size=4 * MIB) as ws:
            await ws.send(upload[: 2 * MIB])
            assert await asyncio.wait_for(ws.recv(), 10) == upload[: 2 * MIB]
            await ws.send("over tls")
            assert await asyncio.wait_for(ws.recv(), 10) == "over tls"

    run_on(loop, loop_name, main())


def test_http2_streams_on_one_connection(hypercorn, loop, loop_name):
    async def main():
        # HTTP/2 over cleartext with prior knowledge (h2c): no HTTP/1.1 at all.
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{hypercorn.port}", http1=False, http2=True
        ) as client:
            response = await client.get("/loop")
            assert response.http_version == "HTTP/2"
            assert response.json()["loop"] == EXPECTED_LOOP[loop_name]
            responses = await asyncio.gather(
                *(client.get(f"/download?seed={i}&size={64 * 1024 + i}") for i in range(20))
            )
            for i, r in enumerate(responses):
                assert r.http_version == "HTTP/2"
                assert sha256(r.content) == sha256(payload(i, 64 * 1024 + i))
            clients = await asyncio.gather(*(client.get("/client") for _ in range(10)))
            assert {r.json()["http_version"] for r in clients} == {"2"}
            # Every stream travelled on one connection.
            assert len({tuple(r.json()["client"]) for r in clients}) == 1

    run_on(loop, loop_name, main())


def test_uvicorn_logged_no_error(uvicorn):
    # Runs after the module's other cases on this server (pytest keeps file
    # order within a parameter): whatever they did, the server logged no
    # error and no traceback.
    assert uvicorn.proc.poll() is None, uvicorn.output()
    assert not uvicorn.problems(), uvicorn.output()


def test_hypercorn_logged_no_error(hypercorn):
    # Runs after the module's other cases on this server (pytest keeps file
    # order within a parameter): whatever they did, the server logged no
    # error and no traceback.
    assert hypercorn.proc.poll() is None, hypercorn.output()
    assert not hypercorn.problems(), hypercorn.output()


def test_uvicorn_tls_logged_no_error(uvicorn_tls):
    # The untrusting client's refused handshake is not a server error.
    assert uvicorn_tls.proc.poll() is None, uvicorn_tls.output()
    assert not uvicorn_tls.problems(), uvicorn_tls.output()
