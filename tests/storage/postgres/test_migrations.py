"""PostgreSQL migrations: applied once, recorded as on SQLite, edited history refused, safe
when two processes start at once, and the same schema as SQLite's."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import psycopg
import pytest

from app.errors import MigrationError
from app.settings import PROJECT_ROOT
from app.storage.migrations import apply_migrations as apply_sqlite
from app.storage.migrations import discover
from app.storage.postgres.migrations import apply_migrations

SQLITE_DIR = PROJECT_ROOT / "migrations"
PG_DIR = PROJECT_ROOT / "migrations" / "postgres"


def _write(directory: Path, name: str, sql: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(sql)


def test_the_postgres_migrations_mirror_the_sqlite_ones_one_for_one() -> None:
    assert [(m.version, m.name) for m in discover(PG_DIR)] == [
        (m.version, m.name) for m in discover(SQLITE_DIR)
    ]


def test_a_fresh_database_gets_every_migration_once(pg: psycopg.Connection) -> None:
    expected = [f"{m.version:04d}_{m.name}" for m in discover(PG_DIR)]
    assert apply_migrations(pg, PG_DIR) == expected
    assert apply_migrations(pg, PG_DIR) == []
    rows = pg.execute("SELECT version, name, checksum FROM schema_migrations ORDER BY 1").fetchall()
    assert rows == [(m.version, m.name, m.checksum) for m in discover(PG_DIR)]


def test_only_new_migrations_run(pg: psycopg.Connection, tmp_path: Path) -> None:
    mig = tmp_path / "m"
    _write(mig, "0002_b.sql", "INSERT INTO a VALUES (2);")
    _write(mig, "0001_a.sql", "CREATE TABLE a (x BIGINT);\nINSERT INTO a VALUES (1);")
    assert apply_migrations(pg, mig) == ["0001_a", "0002_b"]
    _write(mig, "0003_c.sql", "INSERT INTO a VALUES (3);")
    assert apply_migrations(pg, mig) == ["0003_c"]
    assert [r[0] for r in pg.execute("SELECT x FROM a ORDER BY x")] == [1, 2, 3]


def test_a_changed_migration_is_refused(pg: psycopg.Connection, tmp_path: Path) -> None:
    mig = tmp_path / "m"
    _write(mig, "0001_a.sql", "CREATE TABLE a (x BIGINT);")
    apply_migrations(pg, mig)
    _write(mig, "0001_a.sql", "CREATE TABLE a (x BIGINT, y TEXT);")
    with pytest.raises(MigrationError, match="0001_a was changed"):
        apply_migrations(pg, mig)


def test_a_failed_migration_leaves_nothing_behind(pg: psycopg.Connection, tmp_path: Path) -> None:
    mig = tmp_path / "m"
    _write(mig, "0001_a.sql", "CREATE TABLE a (x BIGINT);\nINSERT INTO nowhere VALUES (1);")
    with pytest.raises(MigrationError, match="0001_a"):
        apply_migrations(pg, mig)
    assert pg.execute("SELECT to_regclass('a')").fetchone() == (None,)
    assert pg.execute("SELECT count(*) FROM schema_migrations").fetchone() == (0,)
    # The lock was released: the next attempt is not stuck behind the failed one.
    _write(mig, "0001_a.sql", "CREATE TABLE a (x BIGINT);")
    assert apply_migrations(pg, mig) == ["0001_a"]


def test_a_connection_in_a_transaction_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn, pytest.raises(MigrationError, match="autocommit"):
        apply_migrations(conn, PG_DIR)


def test_two_processes_starting_at_once_apply_each_migration_once(
    pg_url: str, tmp_path: Path
) -> None:
    # Each migration inserts a row: run twice, it would insert two (or fail on the CREATE).
    mig = tmp_path / "m"
    _write(mig, "0001_a.sql", "CREATE TABLE runs (n BIGINT);\nINSERT INTO runs VALUES (1);")
    _write(mig, "0002_b.sql", "SELECT pg_sleep(0.2);\nINSERT INTO runs VALUES (2);")
    _write(mig, "0003_c.sql", "INSERT INTO runs VALUES (3);")
    start = threading.Barrier(4)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                start.wait()
                results.append(apply_migrations(conn, mig))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results, key=len) == [[], [], [], ["0001_a", "0002_b", "0003_c"]]
    with psycopg.connect(pg_url) as conn:
        assert [r[0] for r in conn.execute("SELECT n FROM runs ORDER BY n")] == [1, 2, 3]


# Which PostgreSQL types a SQLite declared type may become.
COMPATIBLE = {
    "INTEGER": {"bigint"},
    "REAL": {"double precision"},
    "TEXT": {"text", "jsonb"},
    "BLOB": {"bytea"},
}
JSONB_COLUMNS = {("sessions", "metadata"), ("messages", "metadata")}


def _sqlite_schema(tmp_path: Path) -> tuple[dict[str, dict[str, tuple[str, bool]]], set[str]]:
    """{table: {column: (declared type, nullable)}} and the index names, FTS5 left out."""
    db = tmp_path / "parity.db"
    apply_sqlite(db, SQLITE_DIR)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        virtual = {name for kind, name, _, sql in rows if sql and "VIRTUAL TABLE" in sql}
        shadows = {n for _, n, _, _ in rows if any(n.startswith(f"{v}_") for v in virtual)}
        skip = virtual | shadows | {"schema_migrations"}
        tables: dict[str, dict[str, tuple[str, bool]]] = {}
        for kind, name, _, _ in rows:
            if kind != "table" or name in skip or name.startswith("sqlite_"):
                continue
            columns = conn.execute(f"PRAGMA table_info({name})").fetchall()
            # A primary key is NOT NULL on PostgreSQL whatever SQLite's declaration says.
            tables[name] = {c[1]: (c[2].upper(), not (c[3] or c[5])) for c in columns}
        indexes = {
            name
            for kind, name, table, sql in rows
            if kind == "index" and sql is not None and table not in skip
        }
    return tables, indexes


def test_the_schema_matches_sqlite(pg: psycopg.Connection, tmp_path: Path) -> None:
    apply_migrations(pg, PG_DIR)
    sqlite_tables, sqlite_indexes = _sqlite_schema(tmp_path)
    assert len(sqlite_tables) >= 16 and len(sqlite_indexes) >= 20
    columns = pg.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
    ).fetchall()
    pg_tables: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, data_type, nullable in columns:
        pg_tables.setdefault(table, {})[column] = (data_type, nullable == "YES")
    for table, sqlite_columns in sqlite_tables.items():
        assert table in pg_tables, table
        assert list(pg_tables[table]) == list(sqlite_columns), table
        for column, (declared, nullable) in sqlite_columns.items():
            pg_type, pg_nullable = pg_tables[table][column]
            assert pg_type in COMPATIBLE[declared], (table, column, declared, pg_type)
            assert (pg_type == "jsonb") == ((table, column) in JSONB_COLUMNS), (table, column)
            assert pg_nullable == nullable, (table, column)
    assert set(pg_tables) == set(sqlite_tables) | {"schema_migrations"}
    pg_indexes = {
        r[0] for r in pg.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")
    }
    assert sqlite_indexes <= pg_indexes
    assert "memories_search_trgm" in pg_indexes


def test_chinese_substring_search_is_served_and_isolated(pg: psycopg.Connection) -> None:
    apply_migrations(pg, PG_DIR)
    rows = [
        (1 << 24 | 1, "t1", "u1", "我想办理退货手续"),
        (1 << 24 | 2, "t1", "u1", "我要查询物流信息"),
        (2 << 24 | 1, "t1", "u2", "我想办理退货手续"),
        (3 << 24 | 1, "t2", "u1", "退货"),
    ]
    for pk, tenant, user, text in rows:
        pg.execute(
            "INSERT INTO memories (pk, id, tenant_id, user_id, tier, key, value, fact_type,"
            " search_text, confidence, status, source, created_at, updated_at,"
            " last_confirmed_at) VALUES (%s, %s, %s, %s, 'fact', %s, %s, 'note', %s, 0.9,"
            " 'active', 'user', 0, 0, 0)",
            (pk, f"mem_{pk}", tenant, user, f"note{pk}", text, text),
        )

    def search(tenant: str, user: str, needle: str) -> list[int]:
        found = pg.execute(
            "SELECT pk FROM memories WHERE tenant_id = %s AND user_id = %s"
            " AND search_text ILIKE %s ORDER BY pk",
            (tenant, user, f"%{needle}%"),
        )
        return [r[0] for r in found]

    assert search("t1", "u1", "退货") == [1 << 24 | 1]
    assert search("t1", "u2", "退货") == [2 << 24 | 1]
    assert search("t2", "u1", "退货") == [3 << 24 | 1]
    assert search("t2", "u2", "退货") == []
    assert search("t1", "u1", "物流") == [1 << 24 | 2]
    # The trigram index can answer the pattern (three characters or more give trigrams).
    pg.execute("SET enable_seqscan = off")
    plan = "\n".join(
        r[0]
        for r in pg.execute(
            "EXPLAIN SELECT pk FROM memories WHERE search_text ILIKE %s", ("%办理退货%",)
        )
    )
    assert "memories_search_trgm" in plan


def test_0017_keys_events_by_integers_as_on_sqlite(pg: psycopg.Connection, tmp_path: Path) -> None:
    from app.storage.event_log import SELECT_EVENTS
    from tests.storage.test_migrations import AFTER_0017, BEFORE_0017, migrations_before

    apply_migrations(pg, migrations_before(PG_DIR, 17, tmp_path / "old"))
    for statement in BEFORE_0017:
        pg.execute(statement)
    assert apply_migrations(pg, PG_DIR)[0] == "0017_event_keys"
    select = f"{SELECT_EVENTS} ORDER BY e.seq".replace("?", "%s")
    read = [tuple(r) for s in ("s1", "s2") for r in pg.execute(select, (s,)).fetchall()]
    assert read == AFTER_0017
    pg.execute(
        "INSERT INTO sessions (id, tenant_id, user_id, created_at, updated_at,"
        " last_activity_at) VALUES ('s3', 't1', 'u', 0, 0, 0)"
    )
    keys = dict(pg.execute("SELECT id, session_key FROM sessions").fetchall())
    assert sorted(keys.values()) == [1, 2, 3] and keys["s3"] == 3
    pg.execute("DELETE FROM sessions WHERE id = 's1'")
    assert pg.execute("SELECT DISTINCT session_key FROM events").fetchall() == [(keys["s2"],)]
