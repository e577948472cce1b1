"""sock_recv, sock_recv_into and sock_sendall interrupted by a signal whose
handler closes the socket and puts another at its number (issue 39, row
13). The socket module retries an interrupted recv or send after the
handlers ran, on the descriptor the socket holds then: -1 for a closed
socket, so the retry fails with EBADF and nothing reaches the new socket.
zloopgo's native steps retried on the number read before the handler ran,
and received from (sent to) the socket that took it.

A non-blocking recv or send is never interrupted by itself, so the
interruption is injected: a small library preloaded into the script's
interpreter makes the next recv(2) or send(2) on a chosen descriptor
raise a signal in its thread and fail with EINTR, once. It is built here
with the C compiler that builds zloopgo's extension."""

import shlex
import subprocess
import sys
import sysconfig

import pytest
from helpers import SCRIPT_FACTORIES, check, run_script

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD, Linux")

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>

static volatile int armed_fd = -1, armed_signal;

/* The next recv or send on fd raises sig in the calling thread and fails
 * with EINTR, as one a signal interrupted. */
void arm(int fd, int sig) { armed_signal = sig; armed_fd = fd; }

static int interrupted(int fd)
{
    if (fd < 0 || fd != armed_fd)
        return 0;
    armed_fd = -1;
    raise(armed_signal);
    errno = EINTR;
    return 1;
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    static ssize_t (*real)(int, void *, size_t, int);
    if (real == NULL)
        real = (ssize_t (*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    return interrupted(fd) ? -1 : real(fd, buf, n, flags);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    static ssize_t (*real)(int, const void *, size_t, int);
    if (real == NULL)
        real = (ssize_t (*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
    return interrupted(fd) ? -1 : real(fd, buf, n, flags);
}
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    where = tmp_path_factory.mktemp("eintr")
    (where / "shim.c").write_text(SHIM)
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    subprocess.run(
        [*cc, "-shared", "-fPIC", "-o", str(where / "shim.so"), str(where / "shim.c"), "-ldl"],
        check=True,
        capture_output=True,
    )
    return str(where / "shim.so")


SCRIPT = """
import ctypes
shim = ctypes.CDLL({shim!r})
loop = factory()
a, b = socket.socketpair()
a.setblocking(False)
b.setblocking(False)
taken = []

def close_and_reuse(signum, frame):
    # the handler closes the socket the operation is on and puts another
    # at its number, with bytes waiting on it and a peer behind it
    number = a.fileno()
    a.close()
    taker, peer = socket.socketpair()
    if taker.fileno() != number:
        os.dup2(taker.fileno(), number)
        taker.close()
        taker = socket.socket(fileno=number)
    taker.setblocking(False)
    peer.setblocking(False)
    peer.sendall(b"secret")
    taken.extend([taker, peer])

signal.signal(signal.SIGUSR1, close_and_reuse)
b.sendall(b"hello")  # something to receive, so the receive is made at once

async def main():
    shim.arm(a.fileno(), signal.SIGUSR1)
    try:
        if {op!r} == "sock_recv":
            result = await loop.sock_recv(a, 1024)
        elif {op!r} == "sock_recv_into":
            buf = bytearray(1024)
            result = buf[:await loop.sock_recv_into(a, buf)]
        else:
            result = await loop.sock_sendall(a, b"leak")
    except OSError as exc:
        result = f"OSError {{errno.errorcode[exc.errno]}}"
    return result

print("result", loop.run_until_complete(main()))
taker, peer = taken

def waiting(sock):
    try:
        return sock.recv(1024)
    except BlockingIOError:
        return b""

print("still waiting on the new socket", waiting(taker))
print("its peer received", waiting(peer))
loop.close()
"""


@pytest.mark.parametrize("op", ["sock_recv", "sock_recv_into", "sock_sendall"])
@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_a_retry_after_a_signal_handler_closed_the_socket_reaches_no_other(shim, loop_name, op):
    proc = run_script(loop_name, SCRIPT.format(shim=shim, op=op), env={"LD_PRELOAD": shim})
    check(
        proc,
        "result OSError EBADF",
        "still waiting on the new socket b'secret'",
        "its peer received b''",
    )
