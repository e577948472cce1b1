"""asyncpg on the loop under test against a private PostgreSQL server
(conftest.py starts it): queries over TCP and over the Unix socket,
prepared statements, a cursor, transactions and their rollback, COPY,
LISTEN/NOTIFY, and a pool running queries concurrently."""

import asyncio
import time

import asyncpg
import pytest
from e2e_util import run_on


async def connect(pg, **kwargs):
    return await asyncpg.connect(
        host=pg.host, port=pg.port, user=pg.user, database=pg.database, **kwargs
    )


def test_queries_and_types(loop, loop_name, postgres):
    async def main():
        conn = await connect(postgres)
        try:
            assert await conn.fetchval("SELECT 1 + 1") == 2
            row = await conn.fetchrow(
                "SELECT $1::int AS n, $2::text AS s, $3::bytea AS b, $4::jsonb::text AS j",
                7,
                "é",
                b"\x00\xff",
                '{"a": [1, 2]}',
            )
            assert dict(row) == {"n": 7, "s": "é", "b": b"\x00\xff", "j": '{"a": [1, 2]}'}
            with pytest.raises(asyncpg.UndefinedTableError):
                await conn.fetch("SELECT * FROM no_such_table")
            # The connection survives the error.
            assert await conn.fetchval("SELECT 'still here'") == "still here"
        finally:
            await conn.close()

    run_on(loop, loop_name, main())


def test_unix_socket(loop, loop_name, postgres):
    async def main():
        conn = await asyncpg.connect(
            host=postgres.socket_dir, port=postgres.port, user=postgres.user, database="postgres"
        )
        try:
            # An empty client address means a Unix-socket connection.
            assert await conn.fetchval("SELECT inet_client_addr()") is None
            assert await conn.fetchval("SELECT 40 + 2") == 42
        finally:
            await conn.close()

    run_on(loop, loop_name, main())


def test_table_transactions_copy_cursor(loop, postgres, loop_name):
    table = f"e2e_items_{loop_name}"

    async def main():
        conn = await connect(postgres)
        try:
            await conn.execute(f"DROP TABLE IF EXISTS {table}")
            await conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text NOT NULL)")
            insert = await conn.prepare(f"INSERT INTO {table} VALUES ($1, $2)")
            await insert.executemany([(i, f"item {i}") for i in range(1, 501)])
            assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 500
            # A transaction that raises is rolled back.
            with pytest.raises(ZeroDivisionError):
                async with conn.transaction():
                    await conn.execute(f"DELETE FROM {table} WHERE id > 100")
                    assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 100
                    1 / 0  # noqa: B018
            assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 500
            # A constraint violation inside a savepoint rolls back only it.
            async with conn.transaction():
                await conn.execute(f"UPDATE {table} SET name = 'kept' WHERE id = 1")
                with pytest.raises(asyncpg.UniqueViolationError):
                    async with conn.transaction():
                        await insert.fetch(2, "duplicate")
            assert await conn.fetchval(f"SELECT name FROM {table} WHERE id = 1") == "kept"
            # COPY in and out.
            copied = await conn.copy_records_to_table(
                table, records=[(i, f"copied {i}") for i in range(1001, 2001)]
            )
            assert copied == "COPY 1000"
            assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 1500
            # A server-side cursor, fetched in pieces.
            seen = []
            async with conn.transaction():
                async for record in conn.cursor(f"SELECT id FROM {table} ORDER BY id", prefetch=64):
                    seen.append(record["id"])
            assert seen == list(range(1, 501)) + list(range(1001, 2001))
            await conn.execute(f"DROP TABLE {table}")
        finally:
            await conn.close()

    run_on(loop, loop_name, main())


def test_listen_notify(loop, postgres, loop_name):
    channel = f"e2e_{loop_name}"

    async def main():
        listener, sender = await connect(postgres), await connect(postgres)
        received = asyncio.Queue()
        try:
            await listener.add_listener(channel, lambda *args: received.put_nowait(args[2:]))
            for i in range(3):
                await sender.execute(f"NOTIFY {channel}, 'message {i}'")
            got = [await asyncio.wait_for(received.get(), 10) for _ in range(3)]
            assert got == [(channel, f"message {i}") for i in range(3)]
        finally:
            await listener.close()
            await sender.close()

    run_on(loop, loop_name, main())


def test_pool_concurrency(loop, loop_name, postgres):
    async def main():
        async with asyncpg.create_pool(
            host=postgres.host,
            port=postgres.port,
            user=postgres.user,
            database=postgres.database,
            min_size=5,
            max_size=5,
        ) as pool:
            started = time.monotonic()
            pids = await asyncio.gather(
                *(pool.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.3)") for _ in range(5))
            )
            elapsed = time.monotonic() - started
            # Five sleeps of 0.3 s on five connections ran side by side.
            assert len(set(pids)) == 5
            assert elapsed < 1.2, elapsed
            # A query that outlives its timeout is cancelled server-side.
            with pytest.raises(asyncio.TimeoutError):
                await pool.fetchval("SELECT pg_sleep(5)", timeout=0.3)
            assert await pool.fetchval("SELECT 'pool ok'") == "pool ok"

    run_on(loop, loop_name, main())
