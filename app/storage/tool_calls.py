"""Side-effecting tool calls keyed by idempotency key: a stored success is never redone."""

from __future__ import annotations

import json
from typing import Any

from app.storage.records import dumps
from app.storage.tx import Store, Tx


class ToolCallStore(Store):
    async def stored_result(self, key: str) -> dict[str, Any] | None:
        row = await self.db.fetchone(
            "SELECT result FROM tool_calls WHERE idempotency_key = ? AND status = 'succeeded'",
            (key,),
        )
        return None if row is None else json.loads(row[0])

    async def begin(
        self, *, key: str, tenant_id: str, session_id: str, turn_id: str, call_id: str, tool: str
    ) -> None:
        def begin(tx: Tx) -> None:
            tx.execute(
                "INSERT INTO tool_calls (idempotency_key, tenant_id, session_id, turn_id, call_id,"
                " tool, status, created_at) VALUES (?, ?, ?, ?, ?, ?, 'running', ?)"
                " ON CONFLICT (idempotency_key) DO UPDATE SET created_at = excluded.created_at"
                " WHERE tool_calls.status = 'running'",
                (key, tenant_id, session_id, turn_id, call_id, tool, tx.now),
            )

        await self.transact(begin)

    async def succeed(self, key: str, result: dict[str, Any]) -> None:
        def succeed(tx: Tx) -> None:
            tx.execute(
                "UPDATE tool_calls SET status = 'succeeded', result = ?, finished_at = ?"
                " WHERE idempotency_key = ?",
                (dumps(result), tx.now, key),
            )

        await self.transact(succeed)

    async def abandon(self, key: str) -> None:
        """The call failed: forget the attempt so a retry with the same key may run."""
        await self.transact(
            lambda tx: tx.execute(
                "DELETE FROM tool_calls WHERE idempotency_key = ? AND status = 'running'", (key,)
            )
        )
