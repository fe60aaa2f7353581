"""The PostgreSQL engine's own behaviour: two processes' writers that deadlock both commit."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from app.storage.postgres.database import PostgresDatabase


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
