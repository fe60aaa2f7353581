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


# -- 0017: events keyed by integers -----------------------------------------------------------

# Before 0017: two sessions, two turns, and events of each kind of row: no turn, a turn, a turn
# whose id an older Hermes also kept in the payload, and turns that are not in `turns` (none
# should be; their id must survive anyway).
BEFORE_0017 = [
    "INSERT INTO sessions (id, tenant_id, user_id, created_at, updated_at, last_activity_at,"
    " last_event_seq) VALUES ('s1', 't1', 'u', 0, 0, 0, 4), ('s2', 't2', 'u', 0, 0, 0, 2)",
    "INSERT INTO turns (id, session_id, tenant_id, number, user_message_id, status,"
    " accepted_seq, created_at) VALUES ('trn_a', 's1', 't1', 1, 'm', 'completed', 1, 0),"
    " ('trn_b', 's1', 't1', 2, 'm', 'running', 2, 0)",
    "INSERT INTO events (session_id, seq, tenant_id, turn_id, type, data, created_at) VALUES"
    " ('s1', 1, 't1', NULL, 'session.created', '{\"session_id\":\"s1\"}', 1.5),"
    " ('s1', 2, 't1', 'trn_a', 'turn.started', '{\"user_message_id\":\"m\"}', 2.5),"
    " ('s1', 3, 't1', 'trn_b', 'message.delta', '{\"turn_id\":\"trn_b\",\"text\":\"x\"}', 3.5),"
    " ('s1', 4, 't1', 'trn_gone', 'turn.queued', '{\"ahead\":1}', 4.5),"
    " ('s2', 1, 't2', NULL, 'session.created', '{}', 5.5),"
    " ('s2', 2, 't2', 'trn_gone2', 'turn.failed', '{}', 6.5)",
]
# What a replay reads after it (session, seq, tenant, turn, type, stored data, time).
AFTER_0017 = [
    ("s1", 1, "t1", None, "session.created", '{"session_id":"s1"}', 1.5),
    ("s1", 2, "t1", "trn_a", "turn.started", '{"user_message_id":"m"}', 2.5),
    ("s1", 3, "t1", "trn_b", "message.delta", '{"turn_id":"trn_b","text":"x"}', 3.5),
    ("s1", 4, "t1", None, "turn.queued", '{"turn_id":"trn_gone","ahead":1}', 4.5),
    ("s2", 1, "t2", None, "session.created", "{}", 5.5),
    ("s2", 2, "t2", None, "turn.failed", '{"turn_id":"trn_gone2"}', 6.5),
]


def migrations_before(directory: Path, version: int, into: Path) -> Path:
    """A copy of `directory`'s migrations older than `version`."""
    into.mkdir()
    for migration in discover(directory):
        if migration.version < version:
            name = f"{migration.version:04d}_{migration.name}.sql"
            (into / name).write_text(migration.sql)
    return into


def test_0017_keys_events_by_integers_and_every_reader_sees_the_same_rows(
    tmp_path: Path,
) -> None:
    from app.storage.event_log import SELECT_EVENTS

    db = tmp_path / "old.db"
    apply_migrations(db, migrations_before(PROJECT_ROOT / "migrations", 17, tmp_path / "old"))
    with sqlite3.connect(db) as conn:
        for statement in BEFORE_0017:
            conn.execute(statement)
    assert apply_migrations(db, PROJECT_ROOT / "migrations")[0] == "0017_event_keys"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        read = [
            tuple(r)
            for s in ("s1", "s2")
            for r in conn.execute(f"{SELECT_EVENTS} ORDER BY e.seq", (s,)).fetchall()
        ]
        assert read == AFTER_0017
        columns = [r[1] for r in conn.execute("PRAGMA table_info(events)")]
        assert columns == ["session_key", "seq", "turn_number", "type", "data", "created_at"]
        # A new session takes the next key; deleting a session takes its events.
        conn.execute(
            "INSERT INTO sessions (id, tenant_id, user_id, created_at, updated_at,"
            " last_activity_at) VALUES ('s3', 't1', 'u', 0, 0, 0)"
        )
        keys = dict(conn.execute("SELECT id, session_key FROM sessions").fetchall())
        assert sorted(keys.values()) == [1, 2, 3] and keys["s3"] == 3
        conn.execute("DELETE FROM sessions WHERE id = 's1'")
        assert conn.execute("SELECT DISTINCT session_key FROM events").fetchall() == [(keys["s2"],)]
