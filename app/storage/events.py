"""Reading a session's event log (appending happens through `Tx.emit`)."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from app import events
from app.events import EventType
from app.storage.port import Database
from app.storage.records import Event, Turn, dumps
from app.storage.tx import Store, Tx

_SEQS_PER_QUERY = 500  # far below SQLite's limit on a statement's parameters
_TURN = "session_id = ? AND seq > ? AND turn_id = ? AND type = ?"


def _short_step(dialect: str) -> str:
    """SQL building a superseded `step.updated`'s stored payload from its `data`: the keys of
    `events.SUPERSEDED_STEP_KEYS`, compact JSON in that order (as `dumps` writes it)."""
    parts = []
    for i, key in enumerate(events.SUPERSEDED_STEP_KEYS):
        value = (
            f"to_json(data::json->>'{key}')::text"
            if dialect == "postgres"
            else f"json_quote(json_extract(data, '$.{key}'))"
        )
        parts.append(f"'{'{' if i == 0 else ','}\"{key}\":' || {value}")
    return " || ".join(parts) + " || '}'"


def _step_id(table: str, dialect: str) -> str:
    if dialect == "postgres":
        return f"({table}.data::json->>'step_id')"
    return f"json_extract({table}.data, '$.step_id')"


def coalesce_turn(tx: Tx, turn: Turn) -> None:
    """Shrink the superseded events of a turn whose final message this transaction stores
    (`events.SUPERSEDED_*`): every `message.delta`, and each step's `step.updated` but its
    last. Rows and sequence numbers stay, so replay stays exactly-once and gap-free; a client
    that replays the finished turn gets the whole reply from `message.completed` and each
    step's final state from its last `step.updated`. Live followers already had the full
    payloads (they are published from the transactions' events, not read back). Two
    statements, whatever the turn's length; no row of another turn is touched."""
    key = (turn.session_id, turn.accepted_seq, turn.id)
    tx.execute(
        f"UPDATE events SET data = ? WHERE {_TURN} AND data <> ?",
        (
            dumps(events.SUPERSEDED_DELTA),
            *key,
            EventType.MESSAGE_DELTA,
            dumps(events.SUPERSEDED_DELTA),
        ),
    )
    d = tx.dialect
    tx.execute(
        f"UPDATE events SET data = {_short_step(d)} WHERE {_TURN} AND EXISTS (SELECT 1 FROM"
        " events later WHERE later.session_id = events.session_id AND later.seq > events.seq"
        " AND later.turn_id = events.turn_id AND later.type = events.type"
        f" AND {_step_id('later', d)} = {_step_id('events', d)})",
        (*key, EventType.STEP_UPDATED),
    )


async def payloads(
    db: Database, session_id: str, seqs: Collection[int]
) -> dict[int, dict[str, Any]]:
    """The stored payloads of some of a session's events, by sequence number; an event that is
    gone (purged, erased) is left out. Other tables refer to an event by (session, seq) instead
    of copying what it holds (a tool step's result: app/storage/steps.py); this is the one
    query that follows such a reference. The payload is as stored: without the turn id."""
    wanted = sorted(set(seqs))
    found: dict[int, dict[str, Any]] = {}
    for at in range(0, len(wanted), _SEQS_PER_QUERY):
        some = wanted[at : at + _SEQS_PER_QUERY]
        rows = await db.fetchall(
            "SELECT seq, data FROM events WHERE session_id = ? AND seq IN"
            f" ({', '.join('?' * len(some))})",
            (session_id, *some),
        )
        found.update((int(seq), json.loads(data)) for seq, data in rows)
    return found


class EventStore(Store):
    async def payloads(self, session_id: str, seqs: Collection[int]) -> dict[int, dict[str, Any]]:
        """See `payloads`."""
        return await payloads(self.db, session_id, seqs)

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
