"""probes/interpcost.py without callgrind: the scaling part's HTTP server
started in each arrangement, every answer checked and the server's own
count of requests compared; and the client's refusal of a wrong answer.
Subinterpreters exist from CPython 3.14."""

import socket
import sys
import threading

import pytest

from .. import interpcost


@pytest.mark.parametrize(
    "arrangement",
    [
        "thread",
        pytest.param(
            "interp",
            marks=pytest.mark.skipif(
                sys.version_info < (3, 14), reason="concurrent.interpreters is 3.14's"
            ),
        ),
    ],
)
def test_a_server_answers_every_request_and_counts_them(arrangement, tmp_path):
    assert interpcost.run_once("asyncio", arrangement, 20, str(tmp_path), counter=False) is None


def test_the_client_refuses_an_answer_that_is_not_the_apps(tmp_path):
    left, right = socket.socketpair()

    def wrong_server():
        right.recv(1024)
        right.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno")

    t = threading.Thread(target=wrong_server)
    t.start()
    with pytest.raises(AssertionError, match="unexpected answer"):
        interpcost.ask(left, 1)
    t.join()
    left.close()
    right.close()
