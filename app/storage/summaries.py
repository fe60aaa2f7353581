"""Contact summaries: what a session came to when it ended (one per session, the latest), and
what the wrap-up reads to write one."""

from __future__ import annotations

import json
from typing import Any

from app import events
from app.storage.records import Message, dumps
from app.storage.session_writer import SessionWriter
from app.storage.tx import Store, Tx

_MESSAGE_COLUMNS = (
    "pk, id, session_id, tenant_id, turn_id, turn_number, role, content, tool_calls,"
    " tool_call_id, name, token_estimate, metadata, created_at"
)


def save_summary(tx: Tx, session_id: str, tenant_id: str, body: dict[str, Any]) -> None:
    """Store the summary (replacing an earlier one) and announce it as `session.summary`."""
    tx.execute(
        "INSERT INTO session_summaries (session_id, tenant_id, ended_by, disposition, body,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
        " ended_by = excluded.ended_by, disposition = excluded.disposition,"
        " body = excluded.body, created_at = excluded.created_at",
        (session_id, tenant_id, body["ended_by"], body["disposition"], dumps(body), tx.now),
    )
    tx.emit(session_id, tenant_id, *events.session_summary(body))


class SummaryStore(Store):
    async def save(
        self, writer: SessionWriter, session_id: str, tenant_id: str, body: dict[str, Any]
    ) -> None:
        await self.transact(writer, lambda tx: save_summary(tx, session_id, tenant_id, body))

    async def close_session(
        self, writer: SessionWriter, session_id: str, tenant_id: str, body: dict[str, Any]
    ) -> bool:
        """Archive the session and store its summary, in one transaction; False when the
        session is gone."""

        def close(tx: Tx) -> bool:
            cur = tx.execute(
                "UPDATE sessions SET status = 'archived', archived_at = ?, updated_at = ?"
                " WHERE id = ? AND tenant_id = ?",
                (tx.now, tx.now, session_id, tenant_id),
            )
            if cur.rowcount == 0:
                return False
            tx.emit(session_id, tenant_id, *events.session_archived(session_id))
            save_summary(tx, session_id, tenant_id, body)
            return True

        return await self.transact(writer, close)

    async def get(self, tenant_id: str, session_id: str) -> dict[str, Any] | None:
        row = await self.db.fetchone(
            "SELECT body FROM session_summaries WHERE session_id = ? AND tenant_id = ?",
            (session_id, tenant_id),
        )
        if row is None:
            return None
        body: dict[str, Any] = json.loads(row[0])
        return body

    async def tenant_of(self, session_id: str) -> str | None:
        row = await self.db.fetchone("SELECT tenant_id FROM sessions WHERE id = ?", (session_id,))
        return None if row is None else str(row[0])

    async def conversation(self, session_id: str, limit: int = 2000) -> list[Message]:
        """The session's messages in conversation order (the last `limit`)."""
        rows = await self.db.fetchall(
            f"SELECT {_MESSAGE_COLUMNS} FROM (SELECT {_MESSAGE_COLUMNS} FROM messages"
            " WHERE session_id = ? ORDER BY turn_number DESC, pk DESC LIMIT ?) AS recent"
            " ORDER BY turn_number, pk",
            (session_id, limit),
        )
        return [Message.from_row(r) for r in rows]

    async def pending_approvals(self, session_id: str) -> list[str]:
        """The tools of the session's calls still waiting for an operator."""
        rows = await self.db.fetchall(
            "SELECT tool FROM approvals WHERE session_id = ? AND status = 'pending'",
            (session_id,),
        )
        return [str(r[0]) for r in rows]
