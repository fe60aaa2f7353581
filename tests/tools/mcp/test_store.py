"""Approved definitions in SQLite survive a restart of the database; every decision is kept."""

from __future__ import annotations

from pathlib import Path

from app.settings import PROJECT_ROOT
from app.storage.sqlite import SqliteDatabase
from app.tools.mcp.definitions import Definition
from app.tools.mcp.store import SqliteDefinitionStore


def definition(description: str) -> Definition:
    return Definition("echo", description, {"type": "object"}, None, None)


async def test_approvals_round_trip_and_replace(tmp_path: Path) -> None:
    path = tmp_path / "hermes.db"
    async with SqliteDatabase(path, migrations_dir=PROJECT_ROOT / "migrations") as db:
        store = SqliteDefinitionStore(db)
        assert await store.load("scripted") == {}
        await store.approve("scripted", definition("v1"), approved_by="first-seen")
        await store.approve("other", definition("v1"), approved_by="first-seen")
        await store.approve("scripted", definition("v2"), approved_by="key_op", tenant_id="acme")
    async with SqliteDatabase(path, migrations_dir=PROJECT_ROOT / "migrations") as db:
        loaded = await SqliteDefinitionStore(db).load("scripted")
        assert list(loaded) == ["echo"]
        row = loaded["echo"]
        assert row.definition == definition("v2")
        assert row.fingerprint == definition("v2").fingerprint()
        assert (row.approved_by, row.approved_by_tenant) == ("key_op", "acme")
        tenant = await db.fetchone(
            "SELECT approved_by_tenant FROM mcp_tool_approvals WHERE server = ?", ("scripted",)
        )
        assert tenant is not None and tenant[0] == "acme"


async def test_every_decision_is_kept_with_who_which_tenant_and_when(tmp_path: Path) -> None:
    path = tmp_path / "hermes.db"
    async with SqliteDatabase(path, migrations_dir=PROJECT_ROOT / "migrations") as db:
        store = SqliteDefinitionStore(db)
        first = await store.approve("scripted", definition("v1"), approved_by="first-seen")
        second = await store.approve(
            "scripted", definition("v2"), approved_by="key_a", tenant_id="acme"
        )
        third = await store.approve(
            "scripted", definition("v3"), approved_by="key_b", tenant_id="globex"
        )
    async with SqliteDatabase(path, migrations_dir=PROJECT_ROOT / "migrations") as db:
        store = SqliteDefinitionStore(db)
        kept = await store.decisions("scripted", "echo")
        assert await store.decisions("other", "echo") == []
    assert [(d.decision, d.decided_by, d.tenant_id, d.fingerprint) for d in kept] == [
        ("first_seen", "first-seen", None, first.fingerprint),
        ("approved", "key_a", "acme", second.fingerprint),
        ("approved", "key_b", "globex", third.fingerprint),
    ]
    assert [d.decided_at for d in kept] == [
        first.approved_at,
        second.approved_at,
        third.approved_at,
    ]
