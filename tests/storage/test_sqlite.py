"""SQLite's file maintenance: a new database is in auto_vacuum=INCREMENTAL, a small old one is
converted at start-up and a large one left alone; `reclaim` gives purged pages back (the
freelist empties, the file shrinks); `checkpoint` keeps the WAL under its cap while a reader
holds an old snapshot open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.settings import PROJECT_ROOT
from app.storage.session_writer import NO_SESSION
from app.storage.sqlite import SqliteDatabase, ensure_incremental_vacuum

MIGRATIONS = PROJECT_ROOT / "migrations"


def _pragma(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])
    finally:
        conn.close()


def _old_file(path: Path, rows: int = 2000) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE filler (x TEXT)")
    conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 400,) for _ in range(rows)])
    conn.close()


async def test_a_new_database_gives_space_back_in_steps(tmp_path: Path) -> None:
    async with SqliteDatabase(tmp_path / "h.db", migrations_dir=MIGRATIONS):
        pass
    assert _pragma(tmp_path / "h.db", "auto_vacuum") == 2  # INCREMENTAL


async def test_a_small_old_database_is_converted_and_a_large_one_left(tmp_path: Path) -> None:
    small, large = tmp_path / "small.db", tmp_path / "large.db"
    _old_file(small)
    _old_file(large)
    assert _pragma(small, "auto_vacuum") == 0
    async with SqliteDatabase(small, migrations_dir=MIGRATIONS):
        pass
    assert _pragma(small, "auto_vacuum") == 2
    assert ensure_incremental_vacuum(large, max_bytes=1024, busy_timeout_ms=100) == "too large"
    assert _pragma(large, "auto_vacuum") == 0


async def test_reclaim_empties_the_freelist_and_shrinks_the_file(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    async with SqliteDatabase(path, migrations_dir=MIGRATIONS) as db:

        def fill(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO audit_log (tenant_id, actor, role, action, at, details)"
                " VALUES ('t', 'a', 'r', 'x', 0, ?)",
                [("y" * 1000,) for _ in range(5000)],
            )

        await db.write(NO_SESSION, fill)
        await db.write(NO_SESSION, lambda conn: conn.execute("DELETE FROM audit_log"))
        await db.checkpoint()
        free_before = _pragma(path, "freelist_count")
        size_before = path.stat().st_size
        assert free_before > 1000

        freed = await db.reclaim(256)
        await db.checkpoint()

        assert freed >= free_before - 1
        assert _pragma(path, "freelist_count") < free_before // 100
        assert path.stat().st_size < size_before // 2


async def test_the_wal_is_cut_back_under_its_cap(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    cap = 256 * 1024
    db = SqliteDatabase(
        path, migrations_dir=MIGRATIONS, wal_autocheckpoint_pages=100_000, wal_max_bytes=cap
    )
    async with db:
        # A reader holding a snapshot open keeps every later frame in the WAL...
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sessions").fetchone()
        for _ in range(5):
            await db.write(
                NO_SESSION,
                lambda conn: conn.executemany(
                    "INSERT INTO audit_log (tenant_id, actor, role, action, at, details)"
                    " VALUES ('t', 'a', 'r', 'x', 0, ?)",
                    [("z" * 1000,) for _ in range(200)],
                ),
            )
        wal = path.with_name("h.db-wal")
        grown = wal.stat().st_size
        assert grown > cap
        # ...so the checkpoint cannot truncate it while the reader is there,
        assert await db.checkpoint() == pytest.approx(grown, rel=0.01)
        reader.execute("COMMIT")
        reader.close()
        # and does, once it is gone.
        assert await db.checkpoint() == 0
        assert wal.stat().st_size == 0


def test_only_a_file_that_cannot_be_used_counts_as_the_database_unavailable() -> None:
    import sqlite3

    from app.storage.sqlite import file_unusable

    def error(kind: type[sqlite3.Error], code: int) -> sqlite3.Error:
        exc = kind("from the driver")
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]
        return exc

    assert file_unusable(error(sqlite3.OperationalError, 10))  # SQLITE_IOERR
    assert file_unusable(error(sqlite3.OperationalError, 10 | (4 << 8)))  # IOERR_SHORT_READ
    assert file_unusable(error(sqlite3.OperationalError, 14))  # SQLITE_CANTOPEN
    assert not file_unusable(error(sqlite3.OperationalError, 5))  # SQLITE_BUSY: it waits
    assert not file_unusable(error(sqlite3.IntegrityError, 19))  # a constraint: a bug
    assert not file_unusable(ValueError("not the driver's"))
