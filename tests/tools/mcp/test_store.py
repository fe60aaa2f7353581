"""Approved definitions in SQLite survive a restart of the database."""

from __future__ import annotations

from pathlib import Path

from app.settings import PROJECT_ROOT
from app.storage.sqlite import Database
from app.tools.mcp.definitions import Definition
from app.tools.mcp.store import SqliteDefinitionStore


def definition(description: str) -> Definition:
    return Definition("echo", description, {"type": "object"}, None, None)


async def test_approvals_round_trip_and_replace(tmp_path: Path) -> None:
    path = tmp_path / "hermes.db"
    async with Database(path, migrations_dir=PROJECT_ROOT / "migrations") as db:
        store = SqliteDefinitionStore(db)
        assert await store.load("scripted") == {}
        await store.approve("scripted", definition("v1"), approved_by="first-seen")
        await store.approve("other", definition("v1"), approved_by="first-seen")
        await store.approve("scripted", definition("v2"), approved_by="key_op", tenant_id="acme")
    async with Database(path, migrations_dir=PROJECT_ROOT / "migrations") as db:
        loaded = await SqliteDefinitionStore(db).load("scripted")
        assert list(loaded) == ["echo"]
        row = loaded["echo"]
        assert row.definition == definition("v2")
        assert row.fingerprint == definition("v2").fingerprint()
        assert row.approved_by == "key_op"
        tenant = await db.fetchone(
            "SELECT approved_by_tenant FROM mcp_tool_approvals WHERE server = ?", ("scripted",)
        )
        assert tenant is not None and tenant[0] == "acme"
