"""Approved MCP tool definitions, kept so a changed definition is caught across restarts, and
every decision about them (who, with which tenant's key, when) for the audit trail."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Protocol

from app.storage import audit
from app.storage.port import Connection, Database
from app.storage.session_writer import NO_SESSION
from app.storage.tx import Tx
from app.tools.mcp.definitions import Definition

FIRST_SEEN = "first-seen"  # `approved_by` of a definition trusted on first sight


@dataclass(frozen=True)
class ApprovedDefinition:
    server: str
    tool: str
    fingerprint: str
    definition: Definition
    approved_by: str  # the principal's subject, or FIRST_SEEN
    approved_at: float
    approved_by_tenant: str | None = None

    @property
    def decision(self) -> str:
        return "first_seen" if self.approved_by == FIRST_SEEN else "approved"


@dataclass(frozen=True)
class Decision:
    """One entry of the audit trail: a definition approved, by whom, for which tenant, when."""

    server: str
    tool: str
    fingerprint: str
    decision: str  # first_seen | approved
    decided_by: str
    tenant_id: str | None
    decided_at: float


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

    async def decisions(self, server: str, tool: str) -> list[Decision]: ...


class SqliteDefinitionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def load(self, server: str) -> dict[str, ApprovedDefinition]:
        rows = await self.db.fetchall(
            "SELECT server, tool, fingerprint, definition, approved_by, approved_by_tenant,"
            " approved_at FROM mcp_tool_approvals WHERE server = ?",
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
        approved = _approved(server, definition, approved_by, tenant_id)

        def write(conn: Connection) -> None:
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
            conn.execute(
                "INSERT INTO mcp_tool_decisions (server, tool, fingerprint, decision, decided_by,"
                " tenant_id, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    server,
                    approved.tool,
                    approved.fingerprint,
                    approved.decision,
                    approved_by,
                    tenant_id,
                    approved.approved_at,
                ),
            )
            if tenant_id is not None:  # a person's approval (first sight trusts nobody's)
                audit.record(
                    Tx(conn),
                    tenant_id=tenant_id,
                    actor=approved_by,
                    role="admin",  # the route approves for admins only
                    action="mcp.approved",
                    target_id=f"{server}/{approved.tool}",
                    details={"fingerprint": approved.fingerprint, "decision": approved.decision},
                )

        await self.db.write(NO_SESSION, write)
        return approved

    async def decisions(self, server: str, tool: str) -> list[Decision]:
        rows = await self.db.fetchall(
            "SELECT server, tool, fingerprint, decision, decided_by, tenant_id, decided_at"
            " FROM mcp_tool_decisions WHERE server = ? AND tool = ? ORDER BY seq",
            (server, tool),
        )
        return [Decision(*row) for row in rows]


class MemoryDefinitionStore:
    """`DefinitionStore` without a database: approvals last as long as the process."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], ApprovedDefinition] = {}
        self.log: list[Decision] = []

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
        row = _approved(server, definition, approved_by, tenant_id)
        self.rows[(server, definition.name)] = row
        self.log.append(
            Decision(
                server,
                row.tool,
                row.fingerprint,
                row.decision,
                approved_by,
                tenant_id,
                row.approved_at,
            )
        )
        return row

    async def decisions(self, server: str, tool: str) -> list[Decision]:
        return [d for d in self.log if (d.server, d.tool) == (server, tool)]


def _from_row(row: sqlite3.Row) -> ApprovedDefinition:
    return ApprovedDefinition(
        server=row["server"],
        tool=row["tool"],
        fingerprint=row["fingerprint"],
        definition=Definition.from_dict(json.loads(row["definition"])),
        approved_by=row["approved_by"],
        approved_at=row["approved_at"],
        approved_by_tenant=row["approved_by_tenant"],
    )


def _approved(
    server: str, definition: Definition, approved_by: str, tenant_id: str | None
) -> ApprovedDefinition:
    return ApprovedDefinition(
        server=server,
        tool=definition.name,
        fingerprint=definition.fingerprint(),
        definition=definition,
        approved_by=approved_by,
        approved_at=time.time(),
        approved_by_tenant=tenant_id,
    )
