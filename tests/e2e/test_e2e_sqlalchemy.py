"""SQLAlchemy's asyncio engine on the loop under test, with aiosqlite (a
driver that runs sqlite3 in a thread and hands results back with
call_soon_threadsafe) and with asyncpg against a private PostgreSQL server:
create a table, insert, select, roll transactions back, concurrent
sessions."""

import asyncio

import pytest
from e2e_util import run_on
from sqlalchemy import Integer, String, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Note(Base):
    __tablename__ = "notes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    text: Mapped[str] = mapped_column(String(200))


async def exercise(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.drop_all)
            await conn.run_sync(Base.metadata.create_all)
        sessions = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)

        async with sessions() as session, session.begin():
            session.add_all([Note(text=f"note {i}") for i in range(100)])
        async with sessions() as session:
            count = await session.scalar(select(func.count()).select_from(Note))
            assert count == 100
            rows = (await session.scalars(select(Note).where(Note.id <= 3).order_by(Note.id))).all()
            assert [(n.id, n.text) for n in rows] == [(1, "note 0"), (2, "note 1"), (3, "note 2")]

        # A transaction that raises is rolled back: neither change stays.
        with pytest.raises(RuntimeError, match="abandon"):
            async with sessions() as session, session.begin():
                session.add(Note(text="never stored"))
                (await session.get(Note, 1)).text = "changed"
                await session.flush()
                assert await session.scalar(select(func.count()).select_from(Note)) == 101
                raise RuntimeError("abandon")
        # An explicit rollback on a connection.
        async with engine.connect() as conn:
            trans = await conn.begin()
            await conn.execute(Note.__table__.delete())
            assert await conn.scalar(select(func.count()).select_from(Note)) == 0
            await trans.rollback()
        async with sessions() as session:
            assert await session.scalar(select(func.count()).select_from(Note)) == 100
            assert (await session.get(Note, 1)).text == "note 0"
            assert await session.scalar(select(Note.id).where(Note.text == "never stored")) is None

        # Concurrent sessions on one engine (one connection each).
        async def count_notes():
            async with sessions() as session:
                return await session.scalar(select(func.count()).select_from(Note))

        assert await asyncio.gather(*(count_notes() for _ in range(5))) == [100] * 5
    finally:
        await engine.dispose()


def test_aiosqlite(loop, loop_name, tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'e2e.db'}"
    run_on(loop, loop_name, exercise(url))


def test_asyncpg(loop, loop_name, postgres):
    run_on(loop, loop_name, exercise(postgres.sqlalchemy_url))
