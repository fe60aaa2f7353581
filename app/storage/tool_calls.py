"""Side-effecting tool calls keyed by idempotency key: a stored success is never redone.

Each one's outcome is in the audit log too (`tool.succeeded`, `tool.failed`), committed with
it: which tool, in which session and turn, under which key; never its arguments or result.
"""

from __future__ import annotations

import json
from typing import Any

from app.storage.records import dumps
from app.storage.session_writer import SessionWriter
from app.storage.tx import Store, Tx


class ToolCallStore(Store):
    async def stored_result(self, key: str) -> dict[str, Any] | None:
        row = await self.db.fetchone(
            "SELECT result FROM tool_calls WHERE idempotency_key = ? AND status = 'succeeded'",
            (key,),
        )
        return None if row is None else json.loads(row[0])

    async def begin(
        self,
        writer: SessionWriter,
        *,
        key: str,
        tenant_id: str,
        session_id: str,
        turn_id: str,
        call_id: str,
        tool: str,
        arguments: dict[str, Any],
    ) -> None:
        """The call starts. Its real `arguments` are held until it ends (stored tool calls are
        masked): a turn resumed meanwhile runs it again with them, under the same key."""

        def begin(tx: Tx) -> None:
            tx.execute(
                "INSERT INTO tool_calls (idempotency_key, tenant_id, session_id, turn_id, call_id,"
                " tool, status, created_at, arguments) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?)"
                " ON CONFLICT (idempotency_key) DO UPDATE SET created_at = excluded.created_at"
                " WHERE tool_calls.status = 'running'",
                (key, tenant_id, session_id, turn_id, call_id, tool, tx.now, dumps(arguments)),
            )

        await self.transact(writer, begin)

    async def succeed(self, writer: SessionWriter, key: str, result: dict[str, Any]) -> None:
        def succeed(tx: Tx) -> None:
            tx.execute(
                "UPDATE tool_calls SET status = 'succeeded', result = ?, finished_at = ?,"
                " arguments = NULL"
                " WHERE idempotency_key = ?",
                (dumps(result), tx.now, key),
            )
            _audit(tx, key, "tool.succeeded")

        await self.transact(writer, succeed)

    async def abandon(self, writer: SessionWriter, key: str) -> None:
        """The call failed: forget the attempt so a retry with the same key may run."""

        def abandon(tx: Tx) -> None:
            _audit(tx, key, "tool.failed", status="running")
            tx.execute(
                "DELETE FROM tool_calls WHERE idempotency_key = ? AND status = 'running'", (key,)
            )

        await self.transact(writer, abandon)


def _audit(tx: Tx, key: str, action: str, status: str | None = None) -> None:
    """The call's audit row, from its own row: the model proposed it (the runtime allowed it,
    and an operator's approval, if it needed one, has its own row)."""
    fields = "'tool', tool, 'turn_id', turn_id, 'idempotency_key', idempotency_key"
    details = (
        f"json_build_object({fields})::text"
        if tx.dialect == "postgres"
        else f"json_object({fields})"
    )
    tx.execute(
        "INSERT INTO audit_log (tenant_id, actor, role, action, target_id, session_id, at,"
        f" details) SELECT tenant_id, 'model', 'model', ?, call_id, session_id, ?, {details}"
        " FROM tool_calls WHERE idempotency_key = ?"
        + (" AND status = ?" if status is not None else ""),
        (action, tx.now, key, *((status,) if status is not None else ())),
    )
