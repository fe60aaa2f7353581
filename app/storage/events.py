"""Reading a session's event log (appending happens through `Tx.emit`)."""

from __future__ import annotations

from app.storage.records import Event
from app.storage.tx import Store


class EventStore(Store):
    async def after(self, session_id: str, after_seq: int, limit: int = 500) -> list[Event]:
        rows = await self.db.fetchall(
            "SELECT session_id, seq, tenant_id, turn_id, type, data, created_at FROM events"
            " WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after_seq, limit),
        )
        return [Event.from_row(r) for r in rows]

    async def exists(self, session_id: str) -> bool:
        return (
            await self.db.fetchone("SELECT 1 FROM sessions WHERE id = ?", (session_id,)) is not None
        )

    async def last_seq(self, session_id: str) -> int:
        row = await self.db.fetchone(
            "SELECT last_event_seq FROM sessions WHERE id = ?", (session_id,)
        )
        return 0 if row is None else int(row[0])
