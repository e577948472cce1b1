"""A FastAPI (Starlette) application served by uvicorn on the loop under
test: routing and validation, JSON in and out, a background task that runs
after its response was sent, and a streaming response."""

import time

import pytest
from e2e_util import EXPECTED_LOOP, RawHTTP, ServerProcess, get, uvicorn_argv


@pytest.fixture(scope="module")
def server(loop_name, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"fastapi-{loop_name}")
    srv = ServerProcess(uvicorn_argv("fastapi_app:app", loop_name), tmp / "server.log").start()
    yield srv
    srv.kill()


def test_runs_on_loop_under_test(server, loop_name):
    assert get(server.port, "/loop").json() == {"loop": EXPECTED_LOOP[loop_name]}


def test_routing_and_validation(server):
    with RawHTTP(server.port) as conn:
        response = conn.request("GET", "/items/42?q=zl")
        assert (response.status, response.json()) == (200, {"item_id": 42, "q": "zl"})
        response = conn.request("GET", "/items/7")
        assert (response.status, response.json()) == (200, {"item_id": 7, "q": None})
        response = conn.request("GET", "/items/not-a-number")
        assert response.status == 422
        assert response.json()["detail"][0]["loc"] == ["path", "item_id"]
        assert conn.request("GET", "/nowhere").status == 404
        assert conn.request("DELETE", "/items/1").status == 405


def test_json_body(server):
    with RawHTTP(server.port) as conn:
        response = conn.request(
            "POST",
            "/orders",
            body=b'{"item": "widget", "quantity": 3, "unit_price": 2.5}',
            headers=[("Content-Type", "application/json")],
        )
        assert response.status == 201
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {"item": "widget", "quantity": 3, "unit_price": 2.5, "total": 7.5}
        response = conn.request(
            "POST",
            "/orders",
            body=b'{"item": "widget", "quantity": "many"}',
            headers=[("Content-Type", "application/json")],
        )
        assert response.status == 422
        assert {tuple(e["loc"]) for e in response.json()["detail"]} == {
            ("body", "quantity"),
            ("body", "unit_price"),
        }


def test_background_task(server, loop_name):
    name = f"task-{time.monotonic_ns()}"
    started = time.monotonic()
    with RawHTTP(server.port) as conn:
        response = conn.request("POST", f"/tasks/{name}")
    # The response left before the task (which sleeps 0.2 s) finished.
    assert response.status == 202
    assert response.json()["queued"] == name
    assert name not in response.json()["done_so_far"]
    deadline = started + 10
    while not (done := [d for d in get(server.port, "/tasks").json() if d["name"] == name]):
        assert time.monotonic() < deadline, "the background task never ran"
        time.sleep(0.05)
    assert time.monotonic() - started >= 0.2
    assert done == [{"name": name, "loop": EXPECTED_LOOP[loop_name]}]


def test_streaming_response(server):
    with RawHTTP(server.port) as conn:
        response = conn.request("GET", "/stream?lines=6")
    assert response.status == 200
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.headers["content-type"].startswith("text/plain")
    assert response.body == b"".join(f"line {i}\n".encode() for i in range(6))
    # Each yielded piece went out as its own chunk.
    assert response.chunks == [len(f"line {i}\n") for i in range(6)]


def test_server_logged_no_error(server):
    # Runs after the module's other cases on this server (pytest keeps file
    # order within a parameter): whatever they did, the server logged no
    # error and no traceback.
    assert server.proc.poll() is None, server.output()
    assert not server.problems(), server.output()
