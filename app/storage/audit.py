"""The audit log: who did what to which record, and when.

A general table (`audit_log`, migration 0006) for actions that must be answerable later:
reads of unmasked data (`approval.read_full`), operators' decisions (`approval.decided`),
side-effecting tool calls (`tool.succeeded`, `tool.failed`), memory changes
(`memory.written`, `memory.verified`, `memory.rejected`, `memory.deleted`,
`memory.forgotten`), MCP definition approvals (`mcp.approved`), human agents taking a
session over and handing it back (`handoff.claim`, `handoff.release`), managed API keys
created, rotated and revoked (`key.created`, `key.rotated`, `key.revoked`; never the key),
the retention purge's runs (`retention.purged`, actor `retention`: rows deleted per table, one
entry per tenant whose rows went).
`record` writes inside the caller's transaction, so an action and its audit row commit
together or not at all. Rows
never hold message content or the sensitive values themselves: ids, names, kinds, outcomes.

Actors: a key's subject with its role; `model` (role `model`) for what the model proposed
and the runtime allowed; `session:<id>` (role `customer`) for what a customer's own words
did.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from app.storage.records import dumps
from app.storage.session_writer import NO_SESSION
from app.storage.tx import Store, Tx


@dataclass(frozen=True)
class AuditEntry:
    id: int
    tenant_id: str
    actor: str
    role: str
    action: str
    target_id: str | None
    session_id: str | None
    at: float
    details: dict[str, Any]

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> AuditEntry:
        values = {name: row[name] for name in row.keys()}
        values["details"] = json.loads(values["details"])
        return cls(**values)


def record(
    tx: Tx,
    *,
    tenant_id: str,
    actor: str,
    role: str,
    action: str,
    target_id: str | None = None,
    session_id: str | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    tx.execute(
        "INSERT INTO audit_log (tenant_id, actor, role, action, target_id, session_id, at,"
        " details) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (tenant_id, actor, role, action, target_id, session_id, tx.now, dumps(details or {})),
    )


class AuditStore(Store):
    async def record(
        self,
        *,
        tenant_id: str,
        actor: str,
        role: str,
        action: str,
        target_id: str | None = None,
        session_id: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        await self.transact(
            NO_SESSION,
            lambda tx: record(
                tx,
                tenant_id=tenant_id,
                actor=actor,
                role=role,
                action=action,
                target_id=target_id,
                session_id=session_id,
                details=details,
            ),
        )

    async def list(
        self,
        tenant_id: str,
        *,
        action: str | None = None,
        target_id: str | None = None,
        session_id: str | None = None,
        actor: str | None = None,
        since: float | None = None,
        until: float | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """A tenant's entries, oldest first, after the entry id `after`, narrowed by any of
        action, target, session, actor and a time range (`since` <= at < `until`)."""
        sql = "SELECT * FROM audit_log WHERE tenant_id = ? AND id > ?"
        params: list[Any] = [tenant_id, after]
        for column, value in (
            ("action", action),
            ("target_id", target_id),
            ("session_id", session_id),
            ("actor", actor),
        ):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        if since is not None:
            sql += " AND at >= ?"
            params.append(since)
        if until is not None:
            sql += " AND at < ?"
            params.append(until)
        rows = await self.db.fetchall(sql + " ORDER BY id LIMIT ?", [*params, limit])
        return [AuditEntry.from_row(r) for r in rows]


def role_of(actor: str) -> str:
    """The role an actor string stands for where no key's role is at hand."""
    if actor == "model":
        return "model"
    if actor.startswith("session:"):
        return "customer"
    return "system"
