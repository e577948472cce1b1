"""Python code run from inside the adapter's loops over loop state: a
finalizer that writes to one transport, closes another, watches a new
descriptor (numbered high enough to make the descriptor table grow),
unwatches it and schedules a callback, run where the adapter drops a
reference mid-loop:

- the batch of ready callbacks (a handle released after it ran);
- the descriptor events (a cancelled reader unregistered when its
  descriptor is ready, dropping the file object it was registered by);
- a timer's handle, released after it ran;
- closing the loop (every queued handle, timer and watched descriptor
  released; on asyncio _closed is already True then, so the finalizer's
  calls fail with "Event loop is closed", as they must on zloopgo);
- settling a name lookup whose future runs Python code (zloopgo only:
  asyncio's lookups settle through the executor's future).

Each scenario runs in a fresh interpreter with a timeout; the finalizer's
log of outcomes and what the transports' peers received must be
asyncio's."""

import pytest
from helpers import check, run_script

# The scenario prelude: two transports over socketpairs, and Meddler, whose
# finalizer does the meddling and logs what each step did.
PRELUDE = """
import gc

log = []

def outcome(step, call):
    try:
        call()
        log.append((step, "ok"))
    except Exception as exc:
        log.append((step, type(exc).__name__, str(exc)))

class Meddler:
    count = 0

    def __init__(self, fd=None):
        self.fd = fd

    def fileno(self):
        return self.fd

    def __del__(self):
        Meddler.count += 1
        n = Meddler.count
        outcome("write", lambda: t_write.write(b"m%d," % n))
        if n == 1:
            outcome("close", t_close.close)
        r, w = os.pipe()
        high = os.dup2(r, 900 + n)
        outcome("add_reader", lambda: loop.add_reader(high, print))
        outcome("remove_reader", lambda: loop.remove_reader(high))
        outcome("call_soon", lambda: loop.call_soon(log.append, ("marker", n)))
        for fd in (r, w, high):
            os.close(fd)

class Recorder(asyncio.Protocol):
    def __init__(self):
        self.got = []

    def data_received(self, data):
        self.got.append(data)

    def connection_lost(self, exc):
        self.got.append("lost")

loop = factory()
a, peer_write = socket.socketpair()
b, peer_close = socket.socketpair()
t_write, _ = loop.run_until_complete(loop.connect_accepted_socket(asyncio.Protocol, a))
t_close, closed_recorder = loop.run_until_complete(loop.connect_accepted_socket(Recorder, b))

def noop(*args):
    pass

def settle():
    for _ in range(5):
        loop.run_until_complete(asyncio.sleep(0))

def report():
    peer_write.settimeout(1)
    try:
        got = peer_write.recv(1000)
    except (TimeoutError, OSError):
        got = b""
    print("log", log)
    print("peer got", got)
    print("closed transport saw", closed_recorder.got)
"""


def _scenario(loop_name, body):
    proc = run_script(loop_name, PRELUDE + body, timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.splitlines()


SCENARIOS = {
    "ready batch": """
for _ in range(3):
    loop.call_soon(noop, Meddler())
settle()
report()
loop.close()
""",
    "descriptor event of a cancelled reader": """
r, w = os.pipe()
os.write(w, b"x")
handle = loop._add_reader(Meddler(r), noop)
handle.cancel()
settle()
report()
os.close(r)
os.close(w)
loop.close()
""",
    "timer": """
loop.call_later(0, noop, Meddler())
loop.call_at(loop.time(), noop, Meddler())
settle()
report()
loop.close()
""",
    "closing the loop": """
r, w = os.pipe()
loop.call_soon(noop, Meddler())
loop.call_later(100, noop, Meddler())
loop.add_reader(r, noop, Meddler())
t_write.write(b"before,")
loop.close()
report()
os.close(r)
os.close(w)
""",
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_python_code_run_inside_the_adapters_loops(scenario):
    expected = _scenario("asyncio", SCENARIOS[scenario])
    assert any(line.startswith("log [(") for line in expected), expected
    assert _scenario("zloopgo", SCENARIOS[scenario]) == expected


def test_python_code_run_while_settling_a_lookup():
    # zloopgo settles name lookups in zl_dispatch: a future that runs
    # Python code from set_result may write, close, watch and look up again.
    proc = run_script(
        "zloopgo",
        PRELUDE
        + """
class MeddlingFuture(asyncio.Future):
    def set_result(self, result):
        if not again:
            Meddler()  # dropped at once: its finalizer meddles
            again.append(asyncio.ensure_future(loop.getaddrinfo("127.1", 80)))
        super().set_result(result)

again = []
loop.create_future = lambda: MeddlingFuture(loop=loop)
first = loop.run_until_complete(loop.getaddrinfo("127.1", 80))
second = loop.run_until_complete(again[0])
print("lookups", first == second, len(first) > 0)
settle()
report()
loop.close()
""",
    )
    check(
        proc,
        "lookups True True",
        "log [('write', 'ok'), ('close', 'ok'), ('add_reader', 'ok'), ('remove_reader', 'ok'),"
        " ('call_soon', 'ok'), ('marker', 1)]",
        "peer got b'm1,'",
        "closed transport saw ['lost']",
    )
