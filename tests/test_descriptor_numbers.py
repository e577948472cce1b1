"""Descriptor numbers beyond any open one: add_reader/add_writer give
asyncio's answer at once (the kernel refuses them) and grow nothing, and
remove_* answers as asyncio's selector does. zloopgo grew its descriptor
table before asking the kernel, and for 2**31 - 1 the growth overflowed
and the process hung with the GIL held (issue 19, row 2). Each run is a
fresh interpreter with a timeout, since the failure was a hang or a
multi-gigabyte allocation."""

import pytest
from helpers import run_script

NUMBERS = [2**31 - 1, 2**30, 2**29, 2**27, 100_000, 2**31, 2**40, 10**30, -1, -(2**31), -(2**40)]


def _answers(loop_name):
    proc = run_script(
        loop_name,
        f"""
        import resource

        def outcome(call):
            try:
                return repr(call())
            except BaseException as exc:
                return f"{{type(exc).__name__}}: {{exc}}"

        loop = factory()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for fd in {NUMBERS!r}:
            for which in ("reader", "writer"):
                add = outcome(lambda: getattr(loop, "add_" + which)(fd, print))
                remove = outcome(lambda: getattr(loop, "remove_" + which)(fd))
                print(fd, which, add, "|", remove)
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print("grown less than 16 MiB", grown_kib < 16 * 1024)
        r, w = os.pipe()
        loop.add_reader(r, print)
        print("still works", loop.remove_reader(r))
        loop.close()
        """,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.fixture(scope="module")
def asyncio_answers():
    return _answers("asyncio")


def test_descriptor_numbers_beyond_the_open_ones(asyncio_answers):
    assert "grown less than 16 MiB True" in asyncio_answers
    assert _answers("zloopgo") == asyncio_answers
