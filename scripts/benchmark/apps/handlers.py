"""The TechEmpower test types the application rows serve, as plain
coroutines over an asyncpg pool and a redis-py asyncio client, so that the
Starlette and the aiohttp server answer with the same work and differ only
in their framework:

    one_world()      single query: one random World
    worlds(n)        n queries, one after another on one connection
    fortunes_page()  the Fortune table plus one row, sorted, in an escaped
                     HTML template (Jinja2)
    updates(n)       n Worlds read one by one, given new random numbers,
                     written back in one executemany (ids sorted, so that
                     concurrent requests never deadlock)
    cached(n)        n random Worlds from Redis in one MGET

The services' addresses come from ZL_APPS_PG and ZL_APPS_REDIS
(benchmark/apps/services.py starts them). It knows the queries and the
template, nothing of HTTP or of loops.
"""

import asyncio
import gc
import json
import os
import random

import asyncpg
import jinja2
import redis.asyncio as aioredis

WORLD_ROWS = 10_000
READ_WORLD = "SELECT id, randomnumber FROM world WHERE id = $1"
WRITE_WORLD = "UPDATE world SET randomnumber = $1 WHERE id = $2"
READ_FORTUNES = "SELECT id, message FROM fortune"
ADDED_FORTUNE = "Additional fortune added at request time."
POOL_SIZE = 16

TEMPLATE = jinja2.Environment(autoescape=True).from_string(
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>"
    "{% for id, message in fortunes %}<tr><td>{{ id }}</td><td>{{ message }}</td></tr>"
    "{% endfor %}</table></body></html>"
)


def exit_soon():
    """Ends the process just after the current answer went out, with
    os._exit: probes/perrequest.py stops servers under callgrind through
    GET /exit, since a signal to a process with the Go runtime's threads
    trips callgrind (an assertion in its signal handling)."""
    asyncio.get_running_loop().call_later(0.05, os._exit, 0)


def gc_counts():
    """The interpreter's collections so far, per generation (GET /gc):
    probes/ratethreads.py counts them per request on each loop."""
    return {"collections": [s["collections"] for s in gc.get_stats()]}


def count_of(text):
    """A query count as TechEmpower reads it: 1 to 500, 1 if not a number."""
    try:
        n = int(text)
    except (TypeError, ValueError):
        return 1
    return min(max(n, 1), 500)


def _random_id():
    return random.randint(1, WORLD_ROWS)


class Backend:
    def __init__(self, pool, cache):
        self.pool, self.cache = pool, cache

    @classmethod
    async def connect(cls):
        pool = await asyncpg.create_pool(
            os.environ["ZL_APPS_PG"], min_size=POOL_SIZE, max_size=POOL_SIZE
        )
        # a request waits for a free connection, as for the database pool
        # (the default pool raises once max_connections are in use)
        connections = aioredis.BlockingConnectionPool.from_url(
            os.environ["ZL_APPS_REDIS"], max_connections=POOL_SIZE
        )
        cache = aioredis.Redis(connection_pool=connections)
        return cls(pool, cache)

    async def close(self):
        await self.cache.aclose(close_connection_pool=True)
        await self.pool.close()

    async def one_world(self):
        row = await self.pool.fetchrow(READ_WORLD, _random_id())
        return {"id": row[0], "randomNumber": row[1]}

    async def worlds(self, n):
        async with self.pool.acquire() as con:
            rows = [await con.fetchrow(READ_WORLD, _random_id()) for _ in range(n)]
        return [{"id": r[0], "randomNumber": r[1]} for r in rows]

    async def fortunes_page(self):
        rows = [tuple(r) for r in await self.pool.fetch(READ_FORTUNES)]
        rows.append((0, ADDED_FORTUNE))
        rows.sort(key=lambda r: r[1])
        return TEMPLATE.render(fortunes=rows)

    async def updates(self, n):
        ids = random.sample(range(1, WORLD_ROWS + 1), n)
        async with self.pool.acquire() as con:
            worlds = []
            for i in ids:
                row = await con.fetchrow(READ_WORLD, i)
                worlds.append({"id": row[0], "randomNumber": _random_id()})
            # in id order: two requests that update the same rows in
            # different orders can deadlock in PostgreSQL (a 500)
            rows = sorted(((w["randomNumber"], w["id"]) for w in worlds), key=lambda r: r[1])
            await con.executemany(WRITE_WORLD, rows)
        return worlds

    async def cached(self, n):
        keys = [f"world:{_random_id()}" for _ in range(n)]
        return [json.loads(v) for v in await self.cache.mget(keys)]
