"""Fixtures for the end-to-end matrix (scripts/e2e): each case runs once on
stock asyncio and once on zloopgo, against real servers and clients from
PyPI, with a time limit on every test; a private PostgreSQL server for the
asyncpg cases.

The packages come from tests/e2e/requirements.txt (scripts/e2e installs
them). Where they are missing and ZLOOPGO_E2E is not set (the main test
run, scripts/test), only test_requirements_e2e.py is collected, and it skips
saying so; with ZLOOPGO_E2E=1 a missing package fails."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_util import MISSING, REQUIRED
from helpers import free_port

if MISSING and not REQUIRED:
    collect_ignore_glob = ["test_e2e_*.py", "apps"]

# Every end-to-end test gets this limit (setup and teardown included) unless
# it sets its own: a hang is a failure, not a stall.
TEST_TIMEOUT = 60


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(item.path).parent == Path(__file__).parent and not item.get_closest_marker(
            "timeout"
        ):
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))


@pytest.fixture(scope="module", params=["asyncio", "zloopgo"])
def loop_name(request):
    """The loop under test, module-scoped here so that a server started for
    a module serves all its cases on one loop."""
    return request.param


# ---- PostgreSQL ----------------------------------------------------------------


@dataclass
class Postgres:
    host: str  # 127.0.0.1
    port: int
    socket_dir: str
    user: str = "postgres"
    database: str = "postgres"

    @property
    def sqlalchemy_url(self) -> str:
        return f"postgresql+asyncpg://{self.user}@{self.host}:{self.port}/{self.database}"


def find_pg_bindir() -> Path | None:
    """The directory of initdb/pg_ctl: $ZLOOPGO_E2E_PG_BINDIR, the newest
    /usr/lib/postgresql/N/bin (Debian, Ubuntu), else initdb on PATH."""
    override = os.environ.get("ZLOOPGO_E2E_PG_BINDIR")
    if override:
        return Path(override)
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


@pytest.fixture(scope="session")
def postgres():
    """A private PostgreSQL server: initdb into a temporary directory, then
    pg_ctl start on a free port of 127.0.0.1 with its Unix socket in that
    directory (trust authentication, fsync off); stopped and deleted at the
    end. initdb refuses root, so as root the server runs as the `postgres`
    user (runuser). Skips, saying why, only if no server can be started."""
    bindir = find_pg_bindir()
    if bindir is None or not (bindir / "initdb").exists():
        pytest.skip(
            "PostgreSQL server not installed: no initdb (install Debian's `postgresql` "
            "package, or set ZLOOPGO_E2E_PG_BINDIR)"
        )
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            pg_user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root, initdb refuses root, and there is no `postgres` user")
        # runuser lives in /usr/sbin, which a root shell's PATH may leave out
        # (the scripts/newpy root's does): look there too
        search = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
        runuser = shutil.which("runuser", path=search)
        if runuser is None:
            pytest.skip("running as root, initdb refuses root, and runuser is missing")
        as_user = [runuser, "-u", "postgres", "--"]
    workdir = tempfile.mkdtemp(prefix="zl-e2e-pg-")
    if as_user:
        os.chown(workdir, pg_user.pw_uid, pg_user.pw_gid)
    data, log = f"{workdir}/data", f"{workdir}/server.log"
    started = False
    try:
        init = subprocess.run(
            [*as_user, str(bindir / "initdb"), "-D", data, "-U", "postgres", "-A", "trust"]
            + ["-E", "UTF8", "--no-sync", "--no-instructions"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if init.returncode != 0:
            pytest.skip(f"initdb failed (exit {init.returncode}): {init.stderr.strip()[-500:]}")
        for _attempt in range(3):
            port = free_port()
            options = (
                f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off"
            )
            start = subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", data, "-l", log, "-w", "-t", "60"]
                + ["-o", options, "start"],
                capture_output=True,
                text=True,
                timeout=90,
                check=False,
            )
            if start.returncode == 0:
                started = True
                break
            server_log = Path(log).read_text(errors="replace") if Path(log).exists() else ""
            if "already in use" not in server_log:
                break
        if not started:
            server_log = Path(log).read_text(errors="replace") if Path(log).exists() else ""
            pytest.skip(
                f"pg_ctl start failed (exit {start.returncode}): "
                f"{(start.stderr + server_log).strip()[-800:]}"
            )
        yield Postgres(host="127.0.0.1", port=port, socket_dir=workdir)
    finally:
        if started:
            subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"],
                capture_output=True,
                timeout=60,
                check=False,
            )
        # The postmaster's files may linger a moment after it stops.
        for _attempt in range(10):
            shutil.rmtree(workdir, ignore_errors=True)
            if not os.path.exists(workdir):
                break
            time.sleep(0.1)
