"""The audit log: who did what to which record, and when.

A general table (`audit_log`, migration 0006) for actions that must be answerable later:
reads of unmasked data (`approval.read_full`), operators' decisions (`approval.decided`).
`record` writes inside the caller's transaction, so an action and its audit row commit
together or not at all. Rows never hold the sensitive values themselves.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from app.storage.records import dumps
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
            lambda tx: record(
                tx,
                tenant_id=tenant_id,
                actor=actor,
                role=role,
                action=action,
                target_id=target_id,
                session_id=session_id,
                details=details,
            )
        )

    async def list(
        self,
        tenant_id: str,
        *,
        action: str | None = None,
        target_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """A tenant's entries, oldest first, narrowed by any of action, target and session."""
        sql = "SELECT * FROM audit_log WHERE tenant_id = ?"
        params: list[Any] = [tenant_id]
        for column, value in (
            ("action", action),
            ("target_id", target_id),
            ("session_id", session_id),
        ):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        rows = await self.db.fetchall(sql + " ORDER BY id LIMIT ?", [*params, limit])
        return [AuditEntry.from_row(r) for r in rows]
