"""sock_sendall's steps after a send that did not take every byte, in
asyncio's order, on asyncio and on zloopgo: the future, the descriptor
checked against the loop's transports, and only then memoryview(data)
(an argument of asyncio's _add_writer call). Data whose buffer comes from
a Python __buffer__ (CPython 3.12+) sees that order: a socket a transport
uses fails the check, and asyncio never asks the buffer again. Before 3.12
the data is a bytearray subclass, whose view runs no Python code; the
test then holds both loops to the calls the send and len() make.

It does not know how either loop waits for the socket to take the rest.
"""

import asyncio
import socket
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="proactor: no transport check")

SIZE = 1000
HAS_BUFFER_DUNDER = sys.version_info >= (3, 12)


def _data(calls):
    """SIZE bytes whose __len__ says 1 (so len(data) differs from what the
    send took) and which log the calls made on them."""
    if HAS_BUFFER_DUNDER:

        class Data:
            def __buffer__(self, flags):
                calls.append("__buffer__")
                return memoryview(b"d" * SIZE)

            def __len__(self):
                calls.append("__len__")
                return 1

        return Data()

    class Data(bytearray):
        def __len__(self):
            calls.append("__len__")
            return 1

    return Data(b"d" * SIZE)


def test_sendall_checks_the_transport_before_viewing_the_data(loop):
    calls = []
    mine, peer = socket.socketpair()
    with peer:

        async def main():
            transport, _ = await loop.create_connection(asyncio.Protocol, sock=mine)
            try:
                with pytest.raises(RuntimeError, match="is used by transport"):
                    await loop.sock_sendall(mine, _data(calls))
            finally:
                transport.close()
            await asyncio.sleep(0)

        loop.run_until_complete(main())
    sent_and_measured = ["__buffer__", "__len__"] if HAS_BUFFER_DUNDER else ["__len__"]
    assert calls == sent_and_measured
