"""Reading a session's event log (appending happens through `Tx.emit`)."""

from __future__ import annotations

import json

from app import events
from app.events import EventType
from app.storage.records import Event, Turn, dumps
from app.storage.tx import Store, Tx

_SUPERSEDABLE = (EventType.MESSAGE_DELTA, EventType.STEP_UPDATED)


def coalesce_turn(tx: Tx, turn: Turn) -> None:
    """Shrink the superseded events of a turn whose final message this transaction stores
    (`events.superseded`): every `message.delta`, and each step's `step.updated` but its last.
    Rows and sequence numbers stay, so replay stays exactly-once and gap-free; a client that
    replays the finished turn gets the whole reply from `message.completed` and each step's
    final state from its last `step.updated`. Live followers already had the full payloads
    (they are published from this transaction's events, not read back)."""
    rows = tx.execute(
        "SELECT seq, type, data FROM events WHERE session_id = ? AND seq > ? AND turn_id = ?"
        " AND type IN (?, ?) ORDER BY seq DESC",
        (turn.session_id, turn.accepted_seq, turn.id, *_SUPERSEDABLE),
    ).fetchall()
    later: set[str] = set()  # steps with a later state
    for seq, type, raw in rows:
        data = json.loads(raw)
        if type == EventType.STEP_UPDATED:
            step_id = data.get("step_id")
            if step_id not in later:
                later.add(step_id)
                continue
        short = events.superseded(EventType(type), data)
        if short != data:
            tx.execute(
                "UPDATE events SET data = ? WHERE session_id = ? AND seq = ?",
                (dumps(short), turn.session_id, seq),
            )


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
