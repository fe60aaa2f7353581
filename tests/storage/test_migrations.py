"""Migrations run in order once, are recorded, and refuse edited history."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.errors import MigrationError
from app.settings import PROJECT_ROOT
from app.storage.migrations import apply_migrations, discover, split_statements


def _write(directory: Path, name: str, sql: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(sql)


def test_project_migrations_apply_once(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    first = apply_migrations(db, PROJECT_ROOT / "migrations")
    assert first and first[0] == "0001_init"
    assert first == sorted(first)
    assert apply_migrations(db, PROJECT_ROOT / "migrations") == []
    with sqlite3.connect(db) as conn:
        recorded = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert recorded == sorted(recorded)
    assert {"sessions", "messages", "events", "turns", "session_snapshots"} <= tables


def test_applies_in_numeric_order_and_only_new_ones(tmp_path: Path) -> None:
    mig = tmp_path / "m"
    _write(mig, "0002_b.sql", "INSERT INTO a VALUES (2);")
    _write(mig, "0001_a.sql", "CREATE TABLE a (x INTEGER);\nINSERT INTO a VALUES (1);")
    db = tmp_path / "o.db"
    assert apply_migrations(db, mig) == ["0001_a", "0002_b"]
    _write(mig, "0003_c.sql", "INSERT INTO a VALUES (3);")
    assert apply_migrations(db, mig) == ["0003_c"]
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT x FROM a")] == [1, 2, 3]


def test_failed_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    mig = tmp_path / "m"
    _write(mig, "0001_a.sql", "CREATE TABLE a (x INTEGER);\nINSERT INTO nowhere VALUES (1);")
    db = tmp_path / "f.db"
    with pytest.raises(MigrationError, match="0001_a"):
        apply_migrations(db, mig)
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "a" not in tables
        assert conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == 0


def test_edited_migration_is_refused(tmp_path: Path) -> None:
    mig = tmp_path / "m"
    _write(mig, "0001_a.sql", "CREATE TABLE a (x INTEGER);")
    db = tmp_path / "e.db"
    apply_migrations(db, mig)
    _write(mig, "0001_a.sql", "CREATE TABLE a (x INTEGER, y TEXT);")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        apply_migrations(db, mig)


def test_bad_file_names_are_refused(tmp_path: Path) -> None:
    mig = tmp_path / "m"
    _write(mig, "1_a.sql", "SELECT 1;")
    with pytest.raises(MigrationError, match="NNNN_name"):
        discover(mig)


def test_statement_splitting_keeps_triggers_whole() -> None:
    sql = """
    -- comment
    CREATE TABLE a (x);
    CREATE TRIGGER t AFTER INSERT ON a BEGIN
        INSERT INTO a VALUES (1);
        UPDATE a SET x = 2;
    END;
    """
    statements = split_statements(sql)
    assert len(statements) == 2
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")
