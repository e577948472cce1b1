"""Name resolution: loop.getaddrinfo() and loop.getnameinfo() give exactly
what socket.getaddrinfo() and socket.getnameinfo() give — the same list,
the same exception with the same errno and message — for names from
/etc/hosts, names that do not resolve, numeric hosts the fast path
declines, every family, type and flag, and bad arguments. zloopgo looks
names up on its resolver threads (capi/resolver.c); these tests also pin
what that must not change: cancellation, a responsive loop while many
lookups are in flight, debug-mode logging, the default executor, closing
the loop early, and fork. Dual-run."""

import asyncio
import concurrent.futures
import functools
import itertools
import logging
import os
import socket
import threading
import time

import pytest
from helpers import check, run_script

# Served by /etc/hosts or numeric: the C library answers without a DNS
# server, so the whole matrix runs against them.
HOSTS = [
    "localhost",
    b"localhost",
    "LOCALHOST",
    "",
    None,
    "127.1",  # numeric for glibc, declined by the fast path
    "fe80::1%lo",
    bytearray(b"localhost"),
    42,
]
PORTS = [None, 0, 80, "80", "http", "nosuchservice", b"443", True, 80.0, 2**70]
FAMILIES = [socket.AF_UNSPEC, socket.AF_INET, socket.AF_INET6]
TYPES = [0, socket.SOCK_STREAM, socket.SOCK_DGRAM]
FLAGS = [0, socket.AI_CANONNAME, socket.AI_PASSIVE, socket.AI_NUMERICSERV, socket.AI_ADDRCONFIG]
# Names that go to the DNS server (slow, sometimes timing out, here): a
# few cases each.
DNS_CASES = [("nonexistent.invalid", 80, 0, 0, 0), ("ex\u00e4mple.invalid", "http", 0, 0, 0)]

# What the volume, cancellation, fork and debug tests look up: inet_aton's
# shorthand for 127.0.0.1, which the C library answers itself and zloopgo's
# numeric fast path leaves to the lookup workers. A name ("localhost")
# would ask /etc/hosts, or a DNS server where a machine's /etc/hosts lacks
# it, and take as long as the machine's name service does.
WORKER_HOST = "127.1"


def deterministic(cases, reference, within=None):
    """The cases whose reference answer does not depend on a DNS server's
    mood: names the C library sends to DNS (not in /etc/hosts) may get a
    temporary failure or time out here, so a case whose reference answer
    is a temporary failure, is slow, or changes between two calls is left
    out. With `within`, the reference calls are made at once on threads
    and those not answered within that many seconds are left out: a DNS
    server that never answers costs its timeout (5 s, twice) a call."""
    if within is not None:
        first = answered_within([functools.partial(reference, case) for case in cases], within)
        answered = [(cases[i], answer) for i, answer in first.items()]
        calls = [functools.partial(reference, case) for case, _ in answered]
        again = answered_within(calls, within)
        return [
            (case, answer)
            for j, (case, answer) in enumerate(answered)
            if again.get(j) == answer
            and not (answer[0] == "gaierror" and answer[1][0] == socket.EAI_AGAIN)
        ]
    kept = []
    for case in cases:
        t0 = time.monotonic()
        first = reference(case)
        slow = time.monotonic() - t0 > 0.5
        temporary = first[0] == "gaierror" and first[1][0] == socket.EAI_AGAIN
        if not slow and not temporary and reference(case) == first:
            kept.append((case, first))
    return kept


def answered_within(calls, seconds):
    """{index: answer} of the calls that returned within `seconds`, all
    started at once, each on a daemon thread of its own: one still waiting
    for a DNS server then does not hold the process at its exit."""
    answers = {}

    def answer(i, call):
        answers[i] = call()

    threads = [
        threading.Thread(target=answer, args=(i, call), daemon=True) for i, call in enumerate(calls)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return dict(sorted(answers.items()))  # a copy: late answers land in the old one


def outcome(call):
    """What a call returned, or its exception as (type, args, str)."""
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome
        return (type(exc).__name__, exc.args, str(exc))


async def async_outcome(awaitable):
    try:
        return ("ok", await awaitable)
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome
        return (type(exc).__name__, exc.args, str(exc))


def _getaddrinfo_reference(case):
    host, port, family, kind, flags = case
    return outcome(lambda: socket.getaddrinfo(host, port, family, kind, 0, flags))


def served_without_dns(host, family):
    """Whether the C library answers (host, family) from /etc/hosts or as
    a number. A name it cannot answer there goes on to the DNS server,
    whose answer here flips between "not known" and "temporary failure"
    and can take seconds; those pairs are left to DNS_CASES."""
    try:
        socket.getaddrinfo(host, 0, family)
    except socket.gaierror:
        return False
    except Exception:  # noqa: BLE001 - a bad argument is answered locally
        return True
    return True


@pytest.fixture(scope="module")
def getaddrinfo_cases():
    pairs = list(itertools.product(HOSTS, FAMILIES))
    # a pair sent to a DNS server that does not answer is not served locally
    served = answered_within([functools.partial(served_without_dns, *pair) for pair in pairs], 1.0)
    local = {(repr(pairs[i][0]), pairs[i][1]) for i, yes in served.items() if yes}
    matrix = [
        case
        for case in itertools.product(HOSTS, PORTS, FAMILIES, TYPES, FLAGS)
        if (repr(case[0]), case[2]) in local
    ]
    return deterministic(matrix, _getaddrinfo_reference) + deterministic(
        DNS_CASES, _getaddrinfo_reference, within=1.0
    )


def test_getaddrinfo_matches_socket_getaddrinfo(loop, getaddrinfo_cases):
    assert len(getaddrinfo_cases) > 1500  # the matrix did not shrink away

    async def main():
        return await asyncio.gather(
            *(
                async_outcome(loop.getaddrinfo(host, port, family=family, type=kind, flags=flags))
                for (host, port, family, kind, flags), _ in getaddrinfo_cases
            )
        )

    got = loop.run_until_complete(main())
    for (case, expected), result in zip(getaddrinfo_cases, got, strict=True):
        if result != expected and _getaddrinfo_reference(case) != expected:
            continue  # the name service itself changed its answer meanwhile
        assert result == expected, case


def test_getaddrinfo_bad_numbers_as_socket_getaddrinfo(loop):
    cases = [
        {"family": "x"},
        {"type": 1.5},
        {"proto": 2**40},
        {"flags": -(2**40)},
        {"family": socket.AF_UNIX},
        {"proto": socket.IPPROTO_UDP, "type": socket.SOCK_STREAM},
    ]
    for kw in cases:
        got = loop.run_until_complete(async_outcome(loop.getaddrinfo(WORKER_HOST, 80, **kw)))
        args = [kw.get(k, 0) for k in ("family", "type", "proto", "flags")]
        assert got == outcome(functools.partial(socket.getaddrinfo, WORKER_HOST, 80, *args)), kw


SOCKADDRS = [
    ("127.0.0.1", 80),
    ("127.0.0.1", 0),
    ("127.0.0.1", 80, 0, 0),  # IPv4 with IPv6's four items
    ("::1", 443, 0, 0),
    ("::1", 443),
    ("::1", 80, 2**20, 0),  # flowinfo out of range
    ("localhost", 80),  # getnameinfo wants a numeric host
    ("1.2.3",),
    ("127.0.0.1", "80"),
    "127.0.0.1",
    (b"127.0.0.1", 80),
]
NI_FLAGS = [0, socket.NI_NUMERICHOST, socket.NI_NUMERICSERV, socket.NI_NAMEREQD, socket.NI_DGRAM]


def test_getnameinfo_matches_socket_getnameinfo(loop):
    cases = deterministic(
        list(itertools.product(SOCKADDRS, NI_FLAGS)),
        lambda case: outcome(lambda: socket.getnameinfo(*case)),
        within=1.0,
    )
    assert len(cases) > 30

    async def main():
        return await asyncio.gather(
            *(async_outcome(loop.getnameinfo(sa, flags)) for (sa, flags), _ in cases)
        )

    got = loop.run_until_complete(main())
    for (case, expected), result in zip(cases, got, strict=True):
        assert result == expected, case


def test_cancelled_lookups_leave_no_late_callback(loop):
    async def main():
        tasks = [asyncio.ensure_future(loop.getaddrinfo(WORKER_HOST, 80)) for _ in range(200)]
        await asyncio.sleep(0)
        for t in tasks[::2]:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0.05)  # any late completion would arrive now
        return results

    results = loop.run_until_complete(main())
    cancelled = [r for r in results if isinstance(r, asyncio.CancelledError)]
    answered = [r for r in results if isinstance(r, list)]
    assert len(cancelled) + len(answered) == 200
    assert len(answered) >= 100
    assert all(r == answered[0] for r in answered)
    if hasattr(loop, "_zl_lookups_in_flight"):
        assert loop._zl_lookups_in_flight() == 0  # every future was forgotten
    # (the loop fixture fails the test on any exception handler call)


def unsettled_per_iteration(lp, count):
    """Starts `count` lookups of "127.1" in one loop iteration and runs a
    callback in that iteration, after they all started, and in each one
    after it until every lookup has settled; returns how many were still
    unsettled at each of those callbacks, and the lookups' answers.

    Why this tells a loop that resolves off its own thread from one that
    does not, without timing anything: a lookup is a task, and a task that
    awaits a future settled in a later iteration cannot finish in the
    iteration that started it (its wakeup is scheduled, at the earliest,
    when the future is settled, after this callback was already queued).
    A lookup performed on the loop thread finishes in its first step,
    before the callback runs. (Stock asyncio may also settle a lookup in
    its first step: when the executor's thread has finished it before
    run_in_executor's wrap_future looks, futures._chain_future copies the
    result at once; CPython 3.15 here does so for a few of a thousand.)"""

    async def main():
        lookups = [asyncio.ensure_future(lp.getaddrinfo(WORKER_HOST, 80)) for _ in range(count)]
        unsettled = []
        all_settled = lp.create_future()

        def count_unsettled():
            unsettled.append(sum(not lookup.done() for lookup in lookups))
            if unsettled[-1]:
                lp.call_soon(count_unsettled)
            else:
                all_settled.set_result(None)

        # queued after the lookups' first steps: it runs in the iteration
        # that starts them, right after they all started
        lp.call_soon(count_unsettled)
        await all_settled
        return unsettled, [lookup.result() for lookup in lookups]

    return lp.run_until_complete(main())


def test_the_loop_stays_responsive_with_a_thousand_lookups_in_flight(loop):
    unsettled, results = unsettled_per_iteration(loop, 1000)
    # the loop ran another callback with lookups in flight (zloopgo's are
    # all settled by the loop's dispatch of the resolver's answers, in a
    # later iteration), then kept running it, iteration after iteration,
    # until they settled
    assert unsettled[0] > 0, unsettled[:5]
    if type(loop).__module__.startswith("zloopgo"):
        assert unsettled[0] == 1000, unsettled[:5]
    assert unsettled[-1] == 0
    assert unsettled == sorted(unsettled, reverse=True)
    assert results == [socket.getaddrinfo(WORKER_HOST, 80)] * 1000


def test_the_responsiveness_check_catches_lookups_on_the_loop_thread(loop):
    # The check above on a loop that looks names up on its own thread (as
    # a blocking resolver would): every lookup is done before the loop
    # runs anything else, so the check fails.
    class ResolvingOnTheLoopThread(type(loop)):
        async def getaddrinfo(self, host, port, *, family=0, type=0, proto=0, flags=0):
            return socket.getaddrinfo(host, port, family, type, proto, flags)

    lp = ResolvingOnTheLoopThread()
    try:
        unsettled, results = unsettled_per_iteration(lp, 1000)
    finally:
        lp.close()
    assert unsettled == [0]
    assert results == [socket.getaddrinfo(WORKER_HOST, 80)] * 1000


def test_debug_mode_logs_the_lookup_as_asyncio(loop, caplog):
    loop.set_debug(True)
    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        loop.run_until_complete(loop.getaddrinfo(WORKER_HOST, 80))
    assert any("Getting address info" in r.getMessage() for r in caplog.records)


def test_lookups_do_not_use_the_default_executor(loop):
    submitted = []

    class Counting(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            submitted.append(fn)
            return super().submit(fn, *args, **kwargs)

    executor = Counting(max_workers=2)
    loop.set_default_executor(executor)
    try:
        infos = loop.run_until_complete(loop.getaddrinfo(WORKER_HOST, 80))
        assert infos == socket.getaddrinfo(WORKER_HOST, 80)
        name = loop.run_until_complete(loop.run_in_executor(None, socket.gethostname))
        assert name == socket.gethostname()
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
    # asyncio resolves in the executor; zloopgo does not, and leaves it to
    # run_in_executor's own users
    if type(loop).__module__.startswith("zloopgo"):
        assert submitted == [socket.gethostname]
    else:
        assert len(submitted) == 2


def test_closing_the_loop_with_lookups_in_flight(loop_factory):
    lp = loop_factory()
    futs = []

    async def start():
        for _ in range(100):
            futs.append(asyncio.ensure_future(lp.getaddrinfo(WORKER_HOST, 80)))
        await asyncio.sleep(0)

    lp.run_until_complete(start())
    for f in futs:
        f.cancel()
    lp.run_until_complete(asyncio.gather(*futs, return_exceptions=True))
    lp.close()
    time.sleep(0.1)  # lookups finishing now find the loop closed
    lookup = lp.getaddrinfo(WORKER_HOST, 80)
    with pytest.raises(RuntimeError, match="closed"):
        lp.run_until_complete(lookup)
    lookup.close()  # never started (asyncio's loop refuses it the same way)


ROUNDS_SCRIPT = """
loop = factory()
async def main():
    # No timer is pending: only the lookups' completions can end a wait.
    NUMERIC = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV  # no name service
    for _ in range(300):
        await asyncio.gather(
            *(loop.getaddrinfo("127.1", 80) for _ in range(8)),
            *(loop.getnameinfo(("127.0.0.1", 80), NUMERIC) for _ in range(8)),
        )
    print("done")
loop.run_until_complete(main())
loop.close()
"""


def test_every_completion_wakes_a_waiting_loop(loop_name):
    # Many short batches: each lookup finishing while the loop waits must
    # end the wait (a lost wake-up here hung the loop forever).
    check(run_script(loop_name, ROUNDS_SCRIPT, timeout=120), "done")


FORK_SCRIPT = """
import warnings
warnings.simplefilter("ignore")
loop = factory()
async def main():
    lookups = [asyncio.ensure_future(loop.getaddrinfo("127.1", 80)) for _ in range(200)]
    await asyncio.sleep(0)
    pid = os.fork()
    if pid == 0:
        # The child: the C library still resolves. zloopgo's fork waits
        # for the lookups inside the C library; asyncio's does not, and a
        # lookup its executor thread was in at fork time can leave one of
        # the C library's locks held here (the child then hangs), so only
        # zloopgo's child looks a name up.
        if isinstance(loop, zloopgo.Loop):
            socket.getaddrinfo("127.1", 80)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    results = await asyncio.gather(*lookups, return_exceptions=True)
    print("child", os.waitstatus_to_exitcode(status))
    print("parent", sum(isinstance(r, list) for r in results))
loop.run_until_complete(main())
loop.close()
"""


def test_fork_with_lookups_in_flight_hangs_neither_process(loop_name):
    proc = run_script(loop_name, FORK_SCRIPT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["child 0", "parent 200"], proc.stdout + proc.stderr


FORK_GIL_SCRIPT = """
import warnings
warnings.simplefilter("ignore")
loop = factory()

def lookup_waits_in_the_c_library():
    # the C library opens $HOSTALIASES, a FIFO nobody writes to: the
    # thread doing the lookup sleeps in the kernel's fifo_open
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/wchan") as f:
                if f.read() == "wait_for_partner":
                    return True
        except OSError:
            pass
    return False

async def main():
    # a dotless name that /etc/hosts lacks goes to the DNS resolver,
    # which reads $HOSTALIASES first
    lookup = asyncio.ensure_future(loop.getaddrinfo("zloopgo-fork-gate", 80))
    deadline = time.monotonic() + 10
    while not lookup_waits_in_the_c_library():
        if time.monotonic() > deadline:
            print("the lookup never reached the C library")
            sys.stdout.flush()
            os._exit(1)
        await asyncio.sleep(0.01)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    other = threading.Thread(target=tick)
    other.start()
    time.sleep(0.05)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    took = time.monotonic() - start
    time.sleep(0.05)
    stop.set()
    other.join()
    os.waitpid(pid, 0)
    # the longest the other thread went without the GIL around the fork
    held = max(b - a for a, b in zip(ticks, ticks[1:]) if b > start and a < start + took)
    print(f"fork took {took:.3f} s; the other thread waited {held:.3f} s at most")
    print("fork returned within 1 s:", took < 1.0)
    print("the GIL was free:", held < 0.5)
    sys.stdout.flush()
    # the lookup is still waiting for the FIFO: leave without letting it
    # go on to a DNS server
    os._exit(0)

loop.run_until_complete(main())
"""


def test_fork_with_a_lookup_stuck_in_the_c_library_keeps_the_gil_free(loop_name, tmp_path):
    # Issue 39, #15: fork() waited in pthread_atfork, up to 2 s and with the
    # GIL held, for a lookup inside the C library; every other thread of the
    # process stopped meanwhile. Now os.fork()'s before-hook waits at most
    # 0.25 s, with the GIL released.
    fifo = tmp_path / "hostaliases"
    os.mkfifo(fifo)
    env = {"HOSTALIASES": str(fifo), "RES_OPTIONS": "", "LOCALDOMAIN": ""}
    proc = run_script(loop_name, FORK_GIL_SCRIPT, timeout=60, env=env)
    check(proc, "fork returned within 1 s: True", "the GIL was free: True")
