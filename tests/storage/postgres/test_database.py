"""The PostgreSQL engine's own behaviour: two processes' writers that deadlock both commit;
several writer connections, a session's writes always on the same one."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import psycopg
import pytest

from app.errors import DatabaseUnavailable
from app.settings import PROJECT_ROOT
from app.storage.fence import Fence
from app.storage.postgres.database import PostgresDatabase
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.sessions import SessionStore


async def test_a_batch_that_deadlocks_with_another_process_is_run_again(pg_url: str) -> None:
    one, two = PostgresDatabase(pg_url), PostgresDatabase(pg_url)
    await one.open()
    await two.open()
    try:
        await one.write(
            NO_SESSION,
            lambda c: c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)"),
        )
        await one.write(NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES (1, 0), (2, 0)"))

        def crosswise(first: int, second: int) -> Any:
            def job(c: Any) -> None:  # locks one row, waits, then wants the other one's
                c.execute("UPDATE t SET v = v + 1 WHERE k = ?", (first,))
                time.sleep(0.3)
                c.execute("UPDATE t SET v = v + 1 WHERE k = ?", (second,))

            return job

        async with asyncio.timeout(30):
            await asyncio.gather(
                one.write(NO_SESSION, crosswise(1, 2)), two.write(NO_SESSION, crosswise(2, 1))
            )
        rows = await one.fetchall("SELECT k, v FROM t ORDER BY k")
        assert [tuple(r) for r in rows] == [(1, 2), (2, 2)]  # both jobs, each exactly once
        assert one.counts().retries + two.counts().retries >= 1
    finally:
        await one.close()
        await two.close()


async def test_rows_answer_by_name_and_position_and_json_comes_back_as_text(pg_url: str) -> None:
    async with PostgresDatabase(pg_url) as db:
        row = await db.fetchone("SELECT 1 AS one, '{\"b\": 1}'::jsonb AS doc, ? AS said", ("x",))
        assert row is not None
        assert (row[0], row["one"], row["said"]) == (1, 1, "x")
        assert row["doc"] == '{"b": 1}' and dict(zip(row.keys(), row, strict=True))["one"] == 1


async def test_readers_plan_without_parallel_workers(pg_url: str) -> None:
    # A reader's statements take milliseconds; starting workers for them cost more than they
    # saved (the knowledge search's p95 at 10,000 chunks: 12.3 ms with them, 4.6 without).
    async with PostgresDatabase(pg_url) as db:
        row = await db.fetchone("SHOW max_parallel_workers_per_gather")
        assert row is not None and row[0] == "0"


async def test_each_session_writes_on_one_lane_in_order_and_sessions_spread(pg_url: str) -> None:
    async with PostgresDatabase(pg_url, write_connections=4) as db:
        await db.write(
            NO_SESSION,
            lambda c: c.execute("CREATE TABLE t (k TEXT, i INTEGER, lane TEXT)"),
        )

        def insert(key: str, i: int) -> Any:
            def job(c: Any) -> tuple[str, int]:
                c.execute(
                    "INSERT INTO t VALUES (?, ?, ?)", (key, i, threading.current_thread().name)
                )
                return key, i

            return job

        committed: dict[str, list[int]] = {}
        keys = [f"sess_{n}" for n in range(12)]
        futures = []
        for i in range(40):
            for key in keys:
                futures.append(
                    db.submit(
                        SessionWriter(key),
                        insert(key, i),
                        lambda r: committed.setdefault(r[0], []).append(r[1]),
                    )
                )
        await asyncio.gather(*futures)

        assert all(committed[key] == list(range(40)) for key in keys)  # submission order kept
        rows = await db.fetchall("SELECT k, COUNT(DISTINCT lane) AS n FROM t GROUP BY k")
        assert all(r["n"] == 1 for r in rows)  # a session never changes lanes
        lanes = await db.fetchall("SELECT DISTINCT lane FROM t")
        assert len(lanes) > 1  # twelve sessions do not all share one connection
        assert {db.lane_of(key) for key in keys} == set(range(4))
        assert db.counts().jobs == 1 + 12 * 40 and db.lanes == 4


async def test_the_handle_a_write_names_decides_its_lane(pg_url: str) -> None:
    """Every write of a session runs on the session's lane, whoever makes it and however: its
    worker's (fenced by its lease), a request's (no lease), through a store or the writer
    itself; a write of no session runs on the first lane. Nothing else picks a lane."""
    from app.storage.event_log import EventStore
    from app.storage.leases import LeaseStore

    async with PostgresDatabase(
        pg_url, migrations_dir=PROJECT_ROOT / "migrations/postgres", write_connections=4
    ) as db:

        def thread(index: int) -> str:
            return db.thread_name if index == 0 else f"{db.thread_name}-{index}"

        def lane_name(c: Any) -> str:
            return threading.current_thread().name

        sessions, leases, store = SessionStore(db), LeaseStore(db), EventStore(db)
        ids = [(await sessions.create("t1", "u1", {})).id for _ in range(8)]
        assert len({db.lane_of(s) for s in ids}) > 1
        for session_id in ids:
            token = await leases.acquire(session_id, "owner-a", ttl_s=30)
            assert token is not None
            owner = SessionWriter(session_id, Fence(session_id, "owner-a", token))
            request = SessionWriter(session_id)
            ran = [
                await db.write(owner, lane_name),
                await db.write(request, lane_name),
                await store.transact(owner, lambda tx: lane_name(tx.conn)),
                await store.transact(request, lambda tx: lane_name(tx.conn)),
            ]
            assert ran == [thread(db.lane_of(session_id))] * 4
        assert await db.write(NO_SESSION, lane_name) == thread(0)


async def test_renewing_leases_on_every_lane_keeps_them_all(pg_url: str) -> None:
    from app.storage.leases import LeaseStore

    async with PostgresDatabase(
        pg_url, migrations_dir=PROJECT_ROOT / "migrations/postgres", write_connections=4
    ) as db:
        sessions = SessionStore(db)
        leases = LeaseStore(db)
        held: dict[str, int] = {}
        for n in range(12):
            session = await sessions.create("t1", f"u{n}", {})
            token = await leases.acquire(session.id, "owner-a", ttl_s=30)
            assert token is not None
            held[session.id] = token
        assert len({db.lane_of(s) for s in held}) > 1
        assert await leases.renew("owner-a", held, ttl_s=60) == {}
        taken = next(iter(held))
        await db.write(
            SessionWriter(taken),
            lambda c: c.execute(
                "UPDATE session_leases SET owner = 'owner-b', token = token + 1"
                " WHERE session_id = ?",
                (taken,),
            ),
        )
        assert await leases.renew("owner-a", held, ttl_s=60) == {taken: held[taken]}


def _end_other_connections(url: str) -> int:
    """`pg_terminate_backend` on every other connection to this test's own database, and wait
    until they are gone (their goodbye has then reached the clients)."""
    name = url.rsplit("/", 1)[-1]
    others = "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(f"SELECT pg_terminate_backend(pid) {others}", (name,)).fetchall()
        deadline = time.monotonic() + 10
        while admin.execute(f"SELECT 1 {others}", (name,)).fetchone() is not None:
            assert time.monotonic() < deadline, "the ended connections are still there"
            time.sleep(0.01)
    return len(rows)


async def test_connections_the_server_ended_while_idle_are_replaced_unseen(pg_url: str) -> None:
    async with PostgresDatabase(pg_url, read_connections=3, write_connections=2) as db:
        await db.write(NO_SESSION, lambda c: c.execute("CREATE TABLE t (v TEXT)"))
        assert await db.fetchall("SELECT 1")  # the pool's connections are open
        assert await asyncio.to_thread(_end_other_connections, pg_url) >= 3

        await db.write(NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES ('after')"))
        # Every pooled reader is a broken one now: each is replaced, the read still answers.
        rows = await db.fetchall("SELECT v FROM t")
        assert [r["v"] for r in rows] == ["after"]


async def test_a_batch_whose_connection_breaks_before_its_commit_runs_again_once(
    pg_url: str,
) -> None:
    async with PostgresDatabase(pg_url, write_connections=1) as db:
        await db.write(NO_SESSION, lambda c: c.execute("CREATE TABLE t (v TEXT)"))
        ended: list[int] = []

        def job(c: Any) -> str:
            c.execute("INSERT INTO t VALUES ('once')")
            if not ended:  # the server ends this very connection mid-batch, the first time
                (pid,) = c.execute("SELECT pg_backend_pid()").fetchone()
                with psycopg.connect(pg_url, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                ended.append(pid)
            return str(c.execute("SELECT COUNT(*) FROM t").fetchone()[0])

        assert await db.write(NO_SESSION, job) == "1"  # run again, on a new connection: no error
        assert ended and db.reconnects == 1
        assert [tuple(r) for r in await db.fetchall("SELECT v FROM t")] == [("once",)]


async def test_a_database_that_stays_away_fails_writes_and_reads_as_unavailable(
    pg_url: str,
) -> None:
    async with PostgresDatabase(pg_url, write_connections=1, connect_timeout_s=1) as db:
        await db.write(NO_SESSION, lambda c: c.execute("CREATE TABLE t (v TEXT)"))
        db.url = "postgresql://postgres@127.0.0.1:1/nowhere"  # every new connection is refused
        await asyncio.to_thread(_end_other_connections, pg_url)
        with pytest.raises(DatabaseUnavailable) as lost:
            await db.write(NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES ('never')"))
        assert lost.value.stored is False  # lost before its commit: nothing of it was stored
        db.url = pg_url
        await db.write(NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES ('back')"))
        assert [tuple(r) for r in await db.fetchall("SELECT v FROM t")] == [("back",)]
