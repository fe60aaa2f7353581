"""`hermes migrate-sqlite-to-postgres`: a database written by the real service arrives whole,
verified; a target with rows is refused; a row changed afterwards is caught by `verify`."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.cli import main
from app.llm.testing import FakeLLMServer, Reply
from app.settings import PROJECT_ROOT
from app.storage.migrations import apply_migrations as apply_sqlite
from app.storage.postgres.copy import CopyRefused, Table, copy_database, plan, verify
from app.testing import serve, stream_turn
from tests.conftest import new_session

EMBEDDING = bytes(range(256)) + b"\x00\xff"


async def _written_by_the_service(make_settings: Any, fake_llm: FakeLLMServer) -> Path:
    """A SQLite database with sessions, turns, messages, events, memories and their history,
    all written by the running service."""
    settings = make_settings()
    fake_llm.enqueue(Reply("您好，已为您查询。"), Reply("退货手续已经为您登记。"), Reply("好的"))
    async with serve(settings) as svc:
        first = await new_session(svc, "cust_1", channel="web", 备注={"优先": True, "n": 1.5})
        second = await new_session(svc, "cust_2")
        await stream_turn(svc.client, first, "我想查一下订单")
        await stream_turn(svc.client, first, "我想办理退货手续")
        await stream_turn(svc.client, second, "hello")
        base = "/v1/users/cust_1/memories"
        created = await svc.client.post(base, json={"key": "contact.email", "value": "a@x.cn"})
        assert created.status_code == 201, created.text
        updated = await svc.client.post(base, json={"key": "contact.email", "value": "b@x.cn"})
        assert updated.status_code == 200, updated.text
        note = await svc.client.post(base, json={"key": "note.return", "value": "要退货"})
        gone = await svc.client.delete(f"{base}/{note.json()['id']}")
        assert gone.status_code == 204, gone.text
    path = settings.storage.db_path
    with closing(sqlite3.connect(path)) as lite, lite:
        # No embedding model runs in tests: give one memory a vector so BLOB -> BYTEA is copied.
        lite.execute("UPDATE memories SET embedding = ? WHERE key = 'contact.email'", (EMBEDDING,))
    return Path(path)


def _rows(conn: Any, table: Table, *, postgres: bool) -> list[tuple[Any, ...]]:
    columns = ", ".join(f'"{c.name}"' for c in table.columns)
    collate = ' COLLATE "C"' if postgres else ""
    text_keys = {c.name for c in table.columns if c.kind == "text"}
    order = ", ".join(f'"{k}"{collate if k in text_keys else ""}' for k in table.key)
    rows = conn.execute(f'SELECT {columns} FROM "{table.name}" ORDER BY {order}').fetchall()
    out = []
    for row in rows:
        values = []
        for column, value in zip(table.columns, row, strict=True):
            if column.kind == "json" and isinstance(value, str):
                value = json.loads(value)
            if isinstance(value, memoryview):
                value = bytes(value)
            values.append(value)
        out.append(tuple(values))
    return out


async def test_a_service_database_is_copied_whole_and_verified(
    make_settings: Any,
    fake_llm: FakeLLMServer,
    pg_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = await _written_by_the_service(make_settings, fake_llm)

    code = main(["migrate-sqlite-to-postgres", "--from", str(source), "--to", pg_url])

    out = capsys.readouterr()
    assert code == 0, out.err
    lines = out.out.splitlines()
    with closing(sqlite3.connect(source)) as lite, psycopg.connect(pg_url) as pg:
        tables = plan(lite, pg)
        names = [t.name for t in tables]
        # Parents first: a child's rows never arrive before the row they point at.
        assert names.index("sessions") < names.index("messages")
        assert names.index("memories") < names.index("memory_history")
        assert "memory_fts" not in names and "schema_migrations" not in names
        assert not any(n.startswith("memory_fts") for n in names)
        assert [line.split()[0] for line in lines[:-1]] == names
        assert all(line.endswith(" ok") for line in lines[:-1])
        assert lines[-1].startswith(f"copied {len(tables)} tables")
        counts: dict[str, int] = {}
        for table in tables:
            expected = _rows(lite, table, postgres=False)
            assert _rows(pg, table, postgres=True) == expected, table.name
            counts[table.name] = len(expected)
        for name in ("sessions", "turns", "messages", "events", "memories", "memory_history"):
            assert counts[name] > 0, name
        assert counts["memory_audit"] == 1 and counts["memory_owners"] == 1
        assert all(check.ok for check in verify(lite, pg))

        metadata = pg.execute("SELECT metadata FROM sessions WHERE user_id = 'cust_1'").fetchone()
        assert metadata == ({"channel": "web", "备注": {"优先": True, "n": 1.5}},)
        blob = pg.execute("SELECT embedding FROM memories WHERE embedding IS NOT NULL").fetchone()
        assert blob == (EMBEDDING,)
        found = pg.execute(
            "SELECT count(*) FROM messages WHERE tenant_id = 'default' AND content ILIKE %s",
            ("%退货%",),
        ).fetchone()
        assert found is not None and found[0] >= 1
        # Identities continue after the ids copied: the next row written gets a new id.
        for table, column in (("messages", "pk"), ("memory_history", "id")):
            top = pg.execute(f"SELECT max({column}) FROM {table}").fetchone()
            after = pg.execute("SELECT nextval(pg_get_serial_sequence(%s, %s))", (table, column))
            assert top is not None and after.fetchone() == (top[0] + 1,)


def _small_source(tmp_path: Path) -> Path:
    """A migrated SQLite database with a session, two events and an AUTOINCREMENT row."""
    path = tmp_path / "small.db"
    apply_sqlite(path, PROJECT_ROOT / "migrations")
    with closing(sqlite3.connect(path)) as lite, lite:
        lite.execute(
            "INSERT INTO sessions (id, tenant_id, user_id, metadata, created_at, updated_at,"
            " last_activity_at, last_event_seq) VALUES ('s1', 't1', 'u1', '{\"b\": 1, \"a\": 2}',"
            " 1.1, 2.2, 0.30000000000000004, 2)"
        )
        for seq, data in ((1, '{"z": 1, "a": "x"}'), (2, '{"text": "退货"}')):
            lite.execute(
                "INSERT INTO events (session_key, seq, type, data, created_at)"
                " SELECT session_key, ?, 'message.created', ?, 1.5 FROM sessions WHERE id = 's1'",
                (seq, data),
            )
        # AUTOINCREMENT: ids 1-3 were used, the top two deleted; 4 is the next one, not 2.
        for n in range(3):
            lite.execute(
                "INSERT INTO audit_log (tenant_id, actor, role, action, at) VALUES"
                " ('t1', 'op', 'operator', ?, 1.0)",
                (f"read{n}",),
            )
        lite.execute("DELETE FROM audit_log WHERE id > 1")
    return path


def test_event_data_is_copied_byte_for_byte_and_autoincrement_continues(
    tmp_path: Path, pg_url: str
) -> None:
    source = _small_source(tmp_path)
    with psycopg.connect(pg_url, autocommit=True) as pg:
        checks = copy_database(source, pg)
        assert [(c.table, c.sqlite_rows, c.ok) for c in checks if c.sqlite_rows] == [
            ("audit_log", 1, True),
            ("sessions", 1, True),
            ("events", 2, True),
        ]
        data = [r[0] for r in pg.execute("SELECT data FROM events ORDER BY seq")]
        assert data == ['{"z": 1, "a": "x"}', '{"text": "退货"}']
        assert pg.execute("SELECT last_activity_at FROM sessions").fetchone() == (
            0.30000000000000004,
        )
        after = pg.execute("SELECT nextval(pg_get_serial_sequence('audit_log', 'id'))")
        assert after.fetchone() == (4,)
        # The session's integer key (events refer to it) is copied; new sessions come after.
        assert pg.execute("SELECT session_key FROM sessions").fetchone() == (1,)
        after = pg.execute("SELECT nextval(pg_get_serial_sequence('sessions', 'session_key'))")
        assert after.fetchone() == (2,)


def test_a_target_that_holds_rows_is_refused(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _small_source(tmp_path)
    with psycopg.connect(pg_url, autocommit=True) as pg:
        copy_database(source, pg)
        with pytest.raises(CopyRefused, match="already holds rows"):
            copy_database(source, pg)
        assert pg.execute("SELECT count(*) FROM events").fetchone() == (2,)

    code = main(["migrate-sqlite-to-postgres", "--from", str(source), "--to", pg_url])

    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "already holds rows" in err


def test_a_source_behind_this_hermes_is_refused(tmp_path: Path, pg_url: str) -> None:
    old = tmp_path / "old"
    old.mkdir()
    for path in sorted((PROJECT_ROOT / "migrations").glob("000[1-4]_*.sql")):
        (old / path.name).write_text(path.read_text())
    source = tmp_path / "old.db"
    apply_sqlite(source, old)
    with psycopg.connect(pg_url, autocommit=True) as pg:
        with pytest.raises(CopyRefused, match="at migration 0004"):
            copy_database(source, pg)


def test_an_unreachable_target_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _small_source(tmp_path)
    url = "postgresql://postgres@127.0.0.1:1/none"
    assert main(["migrate-sqlite-to-postgres", "--from", str(source), "--to", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hermes: cannot connect to --to:") and err.count("\n") == 1


def test_verify_catches_a_row_changed_or_lost_after_the_copy(tmp_path: Path, pg_url: str) -> None:
    source = _small_source(tmp_path)
    with psycopg.connect(pg_url, autocommit=True) as pg, closing(sqlite3.connect(source)) as lite:
        copy_database(source, pg)
        pg.execute('UPDATE events SET data = \'{"z": 1, "a": "y"}\' WHERE seq = 1')
        pg.execute('UPDATE sessions SET metadata = \'{"a": 2, "b": 1}\'')  # same JSON value
        checks = {c.table: c for c in verify(lite, pg)}
        assert not checks["events"].ok and checks["events"].postgres_rows == 2
        assert checks["sessions"].ok  # JSONB is compared as JSON, not as text
        assert "MISMATCH" in checks["events"].line()
        assert [t for t, c in checks.items() if not c.ok] == ["events"]

        pg.execute('UPDATE events SET data = \'{"z": 1, "a": "x"}\' WHERE seq = 1')
        pg.execute("DELETE FROM audit_log")
        checks = {c.table: c for c in verify(lite, pg)}
        assert [t for t, c in checks.items() if not c.ok] == ["audit_log"]
        assert checks["audit_log"].postgres_rows == 0


def test_a_failed_copy_leaves_the_target_without_rows(tmp_path: Path, pg_url: str) -> None:
    source = _small_source(tmp_path)
    with closing(sqlite3.connect(source)) as lite, lite:
        # SQLite keeps text it cannot convert in an INTEGER column; PostgreSQL's BIGINT cannot.
        lite.execute(
            "INSERT INTO turns (id, session_id, tenant_id, number, user_message_id, status,"
            " accepted_seq, created_at) VALUES ('t1', 's1', 't1', 'one', 'm1', 'completed', 1, 1)"
        )
    with psycopg.connect(pg_url, autocommit=True) as pg:
        with pytest.raises(CopyRefused, match="table turns"):
            copy_database(source, pg)
        # sessions and events were copied before turns, in the same transaction: gone too.
        for table in ("sessions", "events", "audit_log", "turns"):
            assert pg.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
        with closing(sqlite3.connect(source)) as lite, lite:
            lite.execute("UPDATE turns SET number = 1")
        assert all(check.ok for check in copy_database(source, pg))
