"""The writer thread: group commit, per-job isolation, commit-ordered callbacks, WAL settings."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.errors import DatabaseClosed
from app.storage.port import Database
from app.storage.session_writer import NO_SESSION
from app.storage.sqlite import SqliteDatabase


@pytest.fixture
async def db(open_db: Any) -> Database:
    database: Database = await open_db()
    await database.write(
        NO_SESSION, lambda c: c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    )
    return database


@pytest.fixture
def sqlite_only(backend: str) -> None:
    if backend != "sqlite":
        pytest.skip("about SQLite's own settings")


@pytest.mark.usefixtures("sqlite_only")
async def test_wal_and_pragmas(db: Database) -> None:
    row = await db.fetchone("PRAGMA journal_mode")
    assert row is not None and row[0] == "wal"


async def test_queued_jobs_commit_together_in_order(db: Database) -> None:
    commits_before = db.commits
    seen: list[int] = []

    def insert(k: int):
        return lambda c: (c.execute("INSERT INTO t VALUES (?, ?)", (k, str(k))), k)[1]

    futures = [db.submit(NO_SESSION, insert(k), on_commit=seen.append) for k in range(200)]
    results = await asyncio.gather(*futures)
    assert results == list(range(200))
    assert seen == list(range(200))  # callbacks run in commit order
    # 200 jobs queued at once go through in far fewer transactions than jobs.
    assert db.commits - commits_before < 50
    rows = await db.fetchall("SELECT COUNT(*) FROM t")
    assert rows[0][0] == 200


async def test_a_failing_job_does_not_undo_its_batchmates(db: Database) -> None:
    def ok(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO t VALUES (1, 'a')")

    def bad(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO t VALUES (2, 'b')")
        raise ValueError("business rule says no")

    def ok2(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO t VALUES (3, 'c')")

    f1, f2, f3 = db.submit(NO_SESSION, ok), db.submit(NO_SESSION, bad), db.submit(NO_SESSION, ok2)
    await f1
    with pytest.raises(ValueError, match="business rule"):
        await f2
    await f3
    rows = await db.fetchall("SELECT k FROM t ORDER BY k")
    assert [r[0] for r in rows] == [1, 3]


async def test_a_batch_without_failures_runs_without_savepoints(db: Database) -> None:
    before = db.counts()
    futures = [
        db.submit(NO_SESSION, lambda c, k=k: c.execute("INSERT INTO t VALUES (?, ?)", (k, "v")))
        for k in range(100)
    ]
    await asyncio.gather(*futures)
    cost = db.counts() - before
    assert cost.jobs == 100 and cost.commits < 100  # batched
    assert cost.control == 2 * cost.commits  # BEGIN and COMMIT only


async def test_a_job_failing_in_the_database_does_not_undo_its_batchmates(db: Database) -> None:
    await db.write(NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES (0, 'taken')"))
    before = db.counts()
    futures = [
        db.submit(NO_SESSION, lambda c, k=k: c.execute("INSERT INTO t VALUES (?, 'v')", (k,)))
        for k in range(1, 60)
    ]
    # A duplicate key in the middle: on PostgreSQL the whole transaction is aborted by it.
    duplicate = db.submit(NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES (0, 'again')"))
    futures += [
        db.submit(NO_SESSION, lambda c, k=k: c.execute("INSERT INTO t VALUES (?, 'v')", (k,)))
        for k in range(60, 120)
    ]
    await asyncio.gather(*futures)
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        await duplicate
    rows = await db.fetchall("SELECT COUNT(*), MIN(k), MAX(k) FROM t")
    assert tuple(rows[0]) == (120, 0, 119)
    row = await db.fetchone("SELECT v FROM t WHERE k = 0")
    assert row is not None and row[0] == "taken"
    assert db.counts().jobs - before.jobs == 120  # a batch run again counts its jobs once


async def test_jobs_read_their_own_writes_and_row_counts_inside_a_batch(db: Database) -> None:
    # On PostgreSQL a batch's statements are pipelined: what a job reads must still see
    # what the batch wrote before it, and an UPDATE's row count must be the real one.
    def insert(k: int) -> Any:
        return lambda c: c.execute("INSERT INTO t VALUES (?, 'new')", (k,))

    def touch_all(c: Any) -> tuple[int, int]:
        changed = c.execute("UPDATE t SET v = 'touched' WHERE v = 'new'").rowcount
        (count,) = c.execute("SELECT COUNT(*) FROM t WHERE v = 'touched'").fetchone()
        return changed, count

    futures = [db.submit(NO_SESSION, insert(k)) for k in range(30)]
    touched = db.submit(NO_SESSION, touch_all)
    futures += [db.submit(NO_SESSION, insert(k)) for k in range(30, 40)]
    await asyncio.gather(*futures)
    assert await touched == (30, 30)


async def test_reads_see_committed_writes(db: Database) -> None:
    await db.write(NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES (7, 'x')"))
    row = await db.fetchone("SELECT v FROM t WHERE k = 7")
    assert row is not None and row["v"] == "x"


async def test_readers_are_read_only(db: Database) -> None:
    refused: type[Exception] = sqlite3.OperationalError
    if db.dialect == "postgres":
        refused = psycopg.errors.ReadOnlySqlTransaction
    with pytest.raises(refused):
        await db.fetchall("INSERT INTO t VALUES (9, 'no')")


async def test_cancelled_caller_still_commits(db: Database) -> None:
    task = asyncio.create_task(
        db.write(NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES (5, 'y')"))
    )
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(200):
        if await db.fetchone("SELECT 1 FROM t WHERE k = 5"):
            break
        await asyncio.sleep(0.01)
    assert await db.fetchone("SELECT 1 FROM t WHERE k = 5") is not None


async def test_closed_database_refuses_work(open_db: Any) -> None:
    database = await open_db("c.db")
    await database.close()
    with pytest.raises(DatabaseClosed):
        database.submit(NO_SESSION, lambda c: None)


@pytest.mark.usefixtures("sqlite_only")
async def test_synchronous_setting_is_applied(tmp_path: Path) -> None:
    database = await SqliteDatabase(tmp_path / "f.db", synchronous="FULL").open()
    try:
        level = await database.write(
            NO_SESSION, lambda c: c.execute("PRAGMA synchronous").fetchone()[0]
        )
        assert level == 2  # FULL
    finally:
        await database.close()


async def test_counts_statements_jobs_commits_reads_and_events(db: Database) -> None:
    from app.storage.tx import Tx

    before = db.counts()

    def two_statements(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO t VALUES (1, 'a')")
        c.executemany("INSERT INTO t VALUES (?, ?)", [(2, "b"), (3, "c")])

    await db.write(NO_SESSION, two_statements)
    await db.fetchall("SELECT * FROM t")
    session = "ses_counted"
    await db.write(
        NO_SESSION,
        lambda c: c.execute(
            "INSERT INTO sessions (id, tenant_id, user_id, status, created_at, updated_at,"
            " last_activity_at) VALUES (?, 't', 'u', 'active', 0, 0, 0)",
            (session,),
        ),
    )
    await db.write(NO_SESSION, lambda c: Tx(c).emit(session, "t", "x.happened", {"n": 1}))
    cost = db.counts() - before
    assert (cost.jobs, cost.commits, cost.reads) == (3, 3, 1)
    # 1 + 2 inserts, the session, the event: its sequence number and its row, which
    # PostgreSQL takes in one statement.
    assert cost.writes == (5 if db.dialect == "postgres" else 6)
    assert cost.control == 6  # BEGIN and COMMIT of each lone job; no savepoints
    assert (cost.events, cost.event_bytes) == (1, len('{"n":1}'))


async def test_a_lone_failing_job_leaves_nothing_behind(db: Database) -> None:
    def bad(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO t VALUES (1, 'a')")
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await db.write(NO_SESSION, bad)
    assert await db.fetchall("SELECT * FROM t") == []
    await db.write(
        NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES (1, 'b')")
    )  # the writer goes on
    row = await db.fetchone("SELECT v FROM t WHERE k = 1")
    assert row is not None and row["v"] == "b"


async def test_a_lone_job_whose_commit_fails_gets_the_error(db: Database) -> None:
    # A deferred foreign key is checked at COMMIT: the job itself runs fine, its commit fails.
    await db.write(NO_SESSION, lambda c: c.execute("CREATE TABLE parent (k INTEGER PRIMARY KEY)"))
    postgres = db.dialect == "postgres"
    deferred = " DEFERRABLE INITIALLY DEFERRED" if postgres else ""
    await db.write(
        NO_SESSION,
        lambda c: c.execute(f"CREATE TABLE child (k INTEGER REFERENCES parent (k){deferred})"),
    )

    def orphan(c: Any) -> None:
        if not postgres:
            c.execute("PRAGMA defer_foreign_keys = ON")
        c.execute("INSERT INTO child VALUES (1)")

    refused: type[Exception] = psycopg.IntegrityError if postgres else sqlite3.IntegrityError
    async with asyncio.timeout(5):  # before the fix, the caller waited forever
        with pytest.raises(refused):
            await db.write(NO_SESSION, orphan)
    assert await db.fetchall("SELECT * FROM child") == []
    await db.write(
        NO_SESSION, lambda c: c.execute("INSERT INTO t VALUES (1, 'b')")
    )  # the writer goes on
