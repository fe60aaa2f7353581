"""Approved MCP tool definitions, kept so a changed definition is caught across restarts."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Protocol

from app.storage.sqlite import Database
from app.tools.mcp.definitions import Definition

FIRST_SEEN = "first-seen"  # `approved_by` of a definition trusted on first sight


@dataclass(frozen=True)
class ApprovedDefinition:
    server: str
    tool: str
    fingerprint: str
    definition: Definition
    approved_by: str
    approved_at: float


class DefinitionStore(Protocol):
    async def load(self, server: str) -> dict[str, ApprovedDefinition]: ...

    async def approve(
        self,
        server: str,
        definition: Definition,
        *,
        approved_by: str,
        tenant_id: str | None = None,
    ) -> ApprovedDefinition: ...


class SqliteDefinitionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def load(self, server: str) -> dict[str, ApprovedDefinition]:
        rows = await self.db.fetchall(
            "SELECT server, tool, fingerprint, definition, approved_by, approved_at"
            " FROM mcp_tool_approvals WHERE server = ?",
            (server,),
        )
        return {row["tool"]: _from_row(row) for row in rows}

    async def approve(
        self,
        server: str,
        definition: Definition,
        *,
        approved_by: str,
        tenant_id: str | None = None,
    ) -> ApprovedDefinition:
        approved = _approved(server, definition, approved_by)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO mcp_tool_approvals (server, tool, fingerprint, definition,"
                " approved_by, approved_by_tenant, approved_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (server, tool) DO UPDATE SET fingerprint = excluded.fingerprint,"
                " definition = excluded.definition, approved_by = excluded.approved_by,"
                " approved_by_tenant = excluded.approved_by_tenant,"
                " approved_at = excluded.approved_at",
                (
                    server,
                    approved.tool,
                    approved.fingerprint,
                    json.dumps(definition.to_dict(), sort_keys=True),
                    approved_by,
                    tenant_id,
                    approved.approved_at,
                ),
            )

        await self.db.write(write)
        return approved


class MemoryDefinitionStore:
    """`DefinitionStore` without a database: approvals last as long as the process."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], ApprovedDefinition] = {}

    async def load(self, server: str) -> dict[str, ApprovedDefinition]:
        return {tool: row for (srv, tool), row in self.rows.items() if srv == server}

    async def approve(
        self,
        server: str,
        definition: Definition,
        *,
        approved_by: str,
        tenant_id: str | None = None,
    ) -> ApprovedDefinition:
        row = _approved(server, definition, approved_by)
        self.rows[(server, definition.name)] = row
        return row


def _from_row(row: sqlite3.Row) -> ApprovedDefinition:
    return ApprovedDefinition(
        server=row["server"],
        tool=row["tool"],
        fingerprint=row["fingerprint"],
        definition=Definition.from_dict(json.loads(row["definition"])),
        approved_by=row["approved_by"],
        approved_at=row["approved_at"],
    )


def _approved(server: str, definition: Definition, approved_by: str) -> ApprovedDefinition:
    return ApprovedDefinition(
        server=server,
        tool=definition.name,
        fingerprint=definition.fingerprint(),
        definition=definition,
        approved_by=approved_by,
        approved_at=time.time(),
    )
