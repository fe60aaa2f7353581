"""The PostgreSQL engine's own behaviour: two processes' writers that deadlock both commit;
several writer connections, a session's writes always on the same one."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from app.settings import PROJECT_ROOT
from app.storage import writer
from app.storage.postgres.database import PostgresDatabase
from app.storage.sessions import SessionStore


async def test_a_batch_that_deadlocks_with_another_process_is_run_again(pg_url: str) -> None:
    one, two = PostgresDatabase(pg_url), PostgresDatabase(pg_url)
    await one.open()
    await two.open()
    try:
        await one.write(lambda c: c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)"))
        await one.write(lambda c: c.execute("INSERT INTO t VALUES (1, 0), (2, 0)"))

        def crosswise(first: int, second: int) -> Any:
            def job(c: Any) -> None:  # locks one row, waits, then wants the other one's
                c.execute("UPDATE t SET v = v + 1 WHERE k = ?", (first,))
                time.sleep(0.3)
                c.execute("UPDATE t SET v = v + 1 WHERE k = ?", (second,))

            return job

        async with asyncio.timeout(30):
            await asyncio.gather(one.write(crosswise(1, 2)), two.write(crosswise(2, 1)))
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


async def test_each_session_writes_on_one_lane_in_order_and_sessions_spread(pg_url: str) -> None:
    async with PostgresDatabase(pg_url, write_connections=4) as db:
        await db.write(lambda c: c.execute("CREATE TABLE t (k TEXT, i INTEGER, lane TEXT)"))

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
                with writer.on_lane(key):
                    futures.append(
                        db.submit(
                            insert(key, i), lambda r: committed.setdefault(r[0], []).append(r[1])
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
            with writer.on_lane(session.id):
                token = await leases.acquire(session.id, "owner-a", ttl_s=30)
            assert token is not None
            held[session.id] = token
        assert len({db.lane_of(s) for s in held}) > 1
        assert await leases.renew("owner-a", held, ttl_s=60) == {}
        taken = next(iter(held))
        await db.write(
            lambda c: c.execute(
                "UPDATE session_leases SET owner = 'owner-b', token = token + 1"
                " WHERE session_id = ?",
                (taken,),
            )
        )
        assert await leases.renew("owner-a", held, ttl_s=60) == {taken: held[taken]}
