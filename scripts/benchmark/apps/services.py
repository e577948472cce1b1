"""The services behind the application rows, started on loopback for one
run and stopped after it: PostgreSQL with TechEmpower's `World` (10,000
rows) and `Fortune` tables, and Redis holding every World as JSON under
`world:ID`. Both run from Debian's packages (postgresql, redis-server);
PostgreSQL's cluster lives in a temporary folder, owned by the `postgres`
user when we are root (initdb refuses root).

    with services.running(tmpdir, cpu_prefix) as svc:
        svc.pg_dsn, svc.redis_url

It knows how to start, fill and stop them; nothing of the servers that
query them or of the loops.
"""

import contextlib
import glob
import json
import os
import pwd
import random
import shutil
import subprocess
import time

from .. import samples

WORLD_ROWS = 10_000
# TechEmpower's Fortune table (its test data, as every implementation loads it)
FORTUNES = [
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. — Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "フレームワークのベンチマーク"),
]
DB_USER = "benchmarkdbuser"
DB_NAME = "hello_world"


def missing():
    """Why the services cannot run here ("" if they can)."""
    if not pg_bin("initdb"):
        return "PostgreSQL is not installed (Debian package `postgresql`)"
    if shutil.which("redis-server") is None:
        return "Redis is not installed (Debian package `redis-server`)"
    if os.geteuid() == 0 and not _has_user("postgres"):
        return "running as root with no `postgres` user to own the cluster"
    return ""


def _has_user(name):
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def pg_bin(name):
    """PostgreSQL's program `name` (Debian keeps them out of PATH)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


class Services:
    def __init__(self, tmpdir, cpu_prefix):
        self.dir = os.path.join(tmpdir, "services")
        self.prefix = cpu_prefix
        self.pg_port = samples.free_port()
        self.redis_port = samples.free_port()
        self.pg_dsn = f"postgresql://{DB_USER}@127.0.0.1:{self.pg_port}/{DB_NAME}"
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.redis = None
        # PostgreSQL's programs run as postgres when we are root
        self.as_postgres = {"user": "postgres", "group": "postgres"} if os.geteuid() == 0 else {}

    def _pg(self, *cmd, **kw):
        return subprocess.run(
            cmd, check=True, capture_output=True, text=True, **self.as_postgres, **kw
        )

    def start(self):
        os.makedirs(self.dir)
        data = os.path.join(self.dir, "pg")
        os.makedirs(data, mode=0o700)
        if self.as_postgres:
            # every folder above must let postgres through
            shutil.chown(data, "postgres", "postgres")
            for d in (self.dir, os.path.dirname(self.dir)):
                os.chmod(d, 0o755)
        self._pg(pg_bin("initdb"), "-D", data, "-U", DB_USER, "--auth=trust", "-E", "UTF8")
        # durability off, as TechEmpower's database images run it: the rows
        # measure the server's work, not the disk's
        conf = (
            f"-p {self.pg_port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._pg(
            *self.prefix,
            pg_bin("pg_ctl"),
            "-D",
            data,
            "-o",
            conf,
            "-l",
            os.path.join(data, "log"),
            "-w",
            "start",
        )
        self.pg_data = data
        self._run_sql(f"CREATE DATABASE {DB_NAME}", db="postgres")
        rows = ",".join(f"({i},{random.randint(1, WORLD_ROWS)})" for i in range(1, WORLD_ROWS + 1))
        fortunes = ",".join("({},'{}')".format(i, m.replace("'", "''")) for i, m in FORTUNES)
        self._run_sql(
            "CREATE TABLE world (id integer PRIMARY KEY, randomnumber integer NOT NULL);"
            f"INSERT INTO world VALUES {rows};"
            "CREATE TABLE fortune (id integer PRIMARY KEY, message varchar(2048) NOT NULL);"
            f"INSERT INTO fortune VALUES {fortunes};"
            "ANALYZE;"
        )
        self.redis = subprocess.Popen(
            [
                *self.prefix,
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._fill_redis()
        return self

    def _psql(self, *args, db=DB_NAME, **kw):
        """psql ARGS on the server as DB_USER, into db."""
        conn = ("-h", "127.0.0.1", "-p", str(self.pg_port), "-U", DB_USER, "-d", db)
        return self._pg(pg_bin("psql"), *conn, *args, **kw)

    def _run_sql(self, sql, db=DB_NAME):
        self._psql("-q", "-v", "ON_ERROR_STOP=1", db=db, input=sql)

    def _fill_redis(self):
        """Every World row under world:ID, as the cached row serves it."""
        out = self._psql("-At", "-F", " ", "-c", "SELECT id, randomnumber FROM world").stdout
        cmds = []
        pairs = out.split()
        for i in range(0, len(pairs), 2):
            doc = json.dumps({"id": int(pairs[i]), "randomNumber": int(pairs[i + 1])})
            cmds.append(_resp("SET", f"world:{pairs[i]}", doc))
        deadline = time.monotonic() + 10
        while True:
            proc = subprocess.run(
                ["redis-cli", "-p", str(self.redis_port), "--pipe"],
                input="".join(cmds).encode(),
                capture_output=True,
                check=False,
            )
            if proc.returncode == 0 and b"errors: 0" in proc.stdout:
                return
            if time.monotonic() > deadline or self.redis.poll() is not None:
                raise RuntimeError(f"Redis did not take the Worlds: {proc.stdout[-200:]!r}")
            time.sleep(0.1)

    def versions(self):
        """The servers' own version lines, for the report's provenance."""
        pg = subprocess.run([pg_bin("postgres"), "--version"], capture_output=True, text=True)
        redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
        return f"{pg.stdout.strip()}, {' '.join(redis.stdout.split()[:3])}"

    def stop(self):
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(10)
        if getattr(self, "pg_data", None):
            with contextlib.suppress(subprocess.CalledProcessError):
                self._pg(pg_bin("pg_ctl"), "-D", self.pg_data, "-m", "immediate", "-w", "stop")


def _resp(*words):
    """One command in Redis's wire protocol, for redis-cli --pipe."""
    parts = [f"*{len(words)}\r\n"]
    for w in words:
        parts.append(f"${len(w.encode())}\r\n{w}\r\n")
    return "".join(parts)


@contextlib.contextmanager
def running(tmpdir, cpu_prefix):
    svc = Services(tmpdir, cpu_prefix)
    try:
        yield svc.start()
    finally:
        svc.stop()
