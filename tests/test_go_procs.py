"""build_info() reports how many Ps the Go runtime runs the loop with
(GOMAXPROCS): two for a process confined to one CPU, where Go would pick one
(capi/procs.go; why in docs/architecture.md, "One iteration, and who does
what"), Go's own choice on more CPUs, and what the program set if it set the
GOMAXPROCS environment variable to a value the runtime honours, one
included. Each case runs in a fresh
interpreter pinned before zloopgo starts the runtime (more CPUs than one:
capi/procs_test.go)."""

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
    os.sched_setaffinity(0, set(cpus[: int(sys.argv[1])]))
    import zloopgo  # the runtime starts with the first loop, after the pinning
    loop = zloopgo.new_event_loop()
    loop.run_until_complete(loop.run_in_executor(None, len, "x"))
    loop.close()
    print(json.dumps(zloopgo.build_info()["gomaxprocs"]))
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


def test_one_cpu_gives_two_ps():
    assert gomaxprocs(1) == 2


def test_the_programs_gomaxprocs_is_reported():
    assert gomaxprocs(1, GOMAXPROCS="3") == 3


def test_the_program_may_choose_one_p():
    assert gomaxprocs(1, GOMAXPROCS="1") == 1


def test_an_empty_gomaxprocs_is_no_choice():
    # the Go runtime ignores it, and so does zloopgo
    assert gomaxprocs(1, GOMAXPROCS="") == 2
