"""The scaling part's server program: N servers (serve.py) of one loop on
one port shared through SO_REUSEPORT, each on a thread of its own, in one
of two arrangements:

- interp: each server in a concurrent.interpreters interpreter (its own
  GIL, PEP 684/734; Python 3.14+), the main interpreter only waiting;
- thread: the server in this process's main interpreter, on one thread
  (the runner starts one such process per server, so that "one loop per
  process" runs the loop on a thread exactly as an interpreter does).

    python -m benchmark.scaling.server --arrangement interp --servers 2 \\
        --loop asyncio --app echo --port 8080

SIGTERM or SIGINT stops every server (a pipe they poll), which then
prints what it counted; exit 0. A server that fails (e.g. a module that
refuses to load in a subinterpreter) prints `SCALING-FAILED i TYPE: MSG`,
the others are stopped and the exit status is 3. It knows nothing of how
it is measured.
"""

import argparse
import os
import signal
import sys
import threading
import time

from . import serve

# what a subinterpreter puts first on its sys.path to import serve.py
SCRIPTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def failed(index, text):
    serve.say(f"SCALING-FAILED {index} {text}")


def in_interpreter(index, args, stop_fd, failures):
    from concurrent import interpreters

    code = (
        "import sys\n"
        f"sys.path[:0] = {[SCRIPTS]!r}\n"
        "from benchmark.scaling import serve\n"
        f"serve.run({args.loop!r}, {args.app!r}, {args.port}, {index}, {stop_fd})\n"
    )
    try:
        interp = interpreters.create()
    except Exception as exc:  # noqa: BLE001 - the failure is the result
        failures.append(index)
        failed(index, f"{type(exc).__name__}: {exc}")
        return
    try:
        interp.exec(code)
    except interpreters.ExecutionFailed as exc:
        failures.append(index)
        failed(index, f"{exc.excinfo.type.__name__}: {exc.excinfo.msg}")
    finally:
        interp.close()


def in_thread(index, args, stop_fd, failures):
    try:
        serve.run(args.loop, args.app, args.port, index, stop_fd)
    except BaseException as exc:  # noqa: BLE001 - the failure is the result
        failures.append(index)
        failed(index, f"{type(exc).__name__}: {exc}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arrangement", choices=("interp", "thread"), required=True)
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--first-index", type=int, default=0, help="the first server's number")
    p.add_argument("--loop", default="asyncio")
    p.add_argument("--app", choices=sorted(serve.APPS), default="echo")
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args(argv)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    stop_r, stop_w = os.pipe()
    target = in_interpreter if args.arrangement == "interp" else in_thread
    failures = []
    threads = [
        threading.Thread(target=target, args=(args.first_index + i, args, stop_r, failures))
        for i in range(args.servers)
    ]
    for t in threads:
        t.start()
    # the main thread only waits: a signal handler runs here between sleeps
    while not stopping.is_set() and not failures and all(t.is_alive() for t in threads):
        time.sleep(0.05)
    os.write(stop_w, b"x")  # never read: readable for every server from now on
    for t in threads:
        t.join(10)
    if any(t.is_alive() for t in threads):
        serve.say("SCALING-FAILED - a server did not stop within 10 s")
        os._exit(4)
    return 3 if failures or not stopping.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
