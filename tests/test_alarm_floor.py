"""The suite's alarm_floor option (tests/conftest.py): scripts/arm64 runs
under qemu-user with `-o alarm_floor=900`, and a test's own timeout mark,
sized for a native machine's speed, must not then fail a test that is
only slow. Checked here in a child pytest with this suite's conftest: a
test that outlasts its mark passes under a floor above its run time and
still fails without one (the mark stays the hang detector it was).
What it does not check: how long anything takes (no timing assertion);
which tests have marks."""

from pathlib import Path

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

SLOWER_THAN_ITS_MARK = """
import time

import pytest


@pytest.mark.timeout(1)
def test_slower_than_its_mark():
    time.sleep(3)
"""


def suite_in(pytester):
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makepyfile(helpers=(TESTS / "helpers.py").read_text())
    pytester.makepyfile(test_slow=SLOWER_THAN_ITS_MARK)


def test_a_floor_above_a_mark_replaces_it(pytester):
    suite_in(pytester)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "alarm_floor=120")
    result.assert_outcomes(passed=1)


def test_without_a_floor_the_mark_still_fails_a_slow_test(pytester):
    suite_in(pytester)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Timeout*1.0*s*"])
