"""Whether the end-to-end packages are installed: skips (naming what is
missing) in a test environment without them, fails when scripts/e2e runs
the matrix (ZLOOPGO_E2E=1) and one is missing; there it also checks that
each version requirements.txt pins is the one installed."""

import importlib.metadata
from pathlib import Path

import pytest
from e2e_util import MISSING, REQUIRED

REQUIREMENTS = Path(__file__).with_name("requirements.txt")


def pins():
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            yield name.strip(), version.strip()


def test_e2e_packages_installed():
    if MISSING and not REQUIRED:
        pytest.skip(
            f"tests/e2e not collected: {', '.join(MISSING)} not installed "
            "(scripts/e2e makes a virtualenv with tests/e2e/requirements.txt)"
        )
    assert not MISSING, f"not installed: {MISSING}"
    if not REQUIRED:
        return
    wrong = {}
    for name, version in pins():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (version, installed)
    assert not wrong, f"pinned (wanted, installed): {wrong}"
