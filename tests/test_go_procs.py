"""How many Ps the Go runtime runs the loop with (capi/procs.go): at
least two, even when the process is confined to one CPU (where Go would
pick one, and then wake a thread of its own for every batch of callbacks
longer than 20 µs); a GOMAXPROCS the program sets is left alone. Each case
runs in a fresh interpreter pinned before zloopgo starts the runtime."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity"
)

CHILD = textwrap.dedent(
    """
    import json, os, sys
    cpus = sorted(os.sched_getaffinity(0))
    if sys.argv[1] != "all":
        os.sched_setaffinity(0, set(cpus[: int(sys.argv[1])]))
    import zloopgo  # the runtime starts with the first loop, after the pinning
    loop = zloopgo.new_event_loop()
    loop.run_until_complete(loop.run_in_executor(None, len, "x"))
    loop.close()
    info = zloopgo.build_info()
    print(json.dumps({"gomaxprocs": info["gomaxprocs"], "cpus": len(os.sched_getaffinity(0))}))
    """
)


def gomaxprocs(cpus, **env):
    child_env = {k: v for k, v in os.environ.items() if k != "GOMAXPROCS"}
    child_env.update(env)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(cpus)],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_one_cpu_still_gets_two_ps():
    got = gomaxprocs(1)
    assert got == {"gomaxprocs": 2, "cpus": 1}


def test_a_gomaxprocs_the_program_set_is_kept():
    assert gomaxprocs(1, GOMAXPROCS="1")["gomaxprocs"] == 1
    assert gomaxprocs(1, GOMAXPROCS="3")["gomaxprocs"] == 3


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_two_cpus_are_not_raised_further():
    # Go's own choice from two CPUs is two (or fewer under a container's CPU
    # limit, which is then raised to two); never more than it picked.
    assert gomaxprocs(2) == {"gomaxprocs": 2, "cpus": 2}
