"""probes/interpmem.py with two interpreters per variant: every variant's
program runs in an interpreter and each figure comes back; the counts
themselves are the probe's to report, not this test's to judge.
Subinterpreters exist from CPython 3.14."""

import sys

import pytest

from .. import interpmem

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 14), reason="concurrent.interpreters is 3.14's"
)


@pytest.mark.parametrize("variant", ["empty", "asyncio", "run"])
def test_a_variant_runs_in_interpreters_and_reports_each_figure(variant):
    got = interpmem.measure(variant, 2, 1)
    assert set(got) == {"rss_kb", "anon_kb", "blocks", "objects", "threads", "maps"}
    assert got["threads"][0] >= 1


def test_a_program_that_raises_is_an_error_not_a_figure(monkeypatch):
    monkeypatch.setitem(interpmem.VARIANTS, "broken", "raise ValueError('no')")
    with pytest.raises(RuntimeError, match="broken: exit 1"):
        interpmem.measure("broken", 1, 0)
