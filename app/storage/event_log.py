"""Reading a session's event log (appending happens through `Tx.emit`).

A row is keyed by its session's integer key and carries its turn's number in the session
(migration 0017); every reader sees session, tenant and turn ids as they were sent, joined
back from `sessions` and `turns` (`SELECT_EVENTS`).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from app import events
from app.events import EventType
from app.storage.port import Database
from app.storage.records import Event, Turn
from app.storage.tx import Store, Tx

_SEQS_PER_QUERY = 500  # far below SQLite's limit on a statement's parameters
# The events of one session (`s.id = ?`) with the columns `Event.from_row` reads.
SELECT_EVENTS = (
    "SELECT s.id AS session_id, e.seq, s.tenant_id, t.id AS turn_id, e.type, e.data,"
    " e.created_at FROM sessions s JOIN events e ON e.session_key = s.session_key"
    " LEFT JOIN turns t ON t.session_id = s.id AND t.number = e.turn_number WHERE s.id = ?"
)
# A session's key, for a statement on its events.
SESSION_KEY = "(SELECT session_key FROM sessions WHERE id = ?)"


def _field(table: str, key: str, dialect: str) -> str:
    """SQL reading a top-level key of an event row's stored payload (`data`)."""
    if dialect == "postgres":
        return f"({table}.data::json->>'{key}')"
    return f"json_extract({table}.data, '$.{key}')"


def _drop_superseded_sql(dialect: str) -> str:
    # Each kind of superseded event: the later event of the turn that supersedes it.
    later = [
        f"(events.type = '{kind}' AND EXISTS (SELECT 1 FROM events later"
        " WHERE later.session_key = events.session_key AND later.seq > events.seq"
        f" AND later.turn_number = events.turn_number AND later.type = '{by}'"
        f" AND {_field('later', key, dialect)} = {_field('events', key, dialect)}))"
        for kind, (by, key) in events.SUPERSEDED_BY.items()
    ]
    return (
        f"DELETE FROM events WHERE session_key = {SESSION_KEY} AND seq > ? AND turn_number = ?"
        f" AND (events.type = '{EventType.MESSAGE_DELTA}' OR {' OR '.join(later)})"
    )


_DROP_SUPERSEDED = {d: _drop_superseded_sql(d) for d in ("sqlite", "postgres")}


def drop_superseded(tx: Tx, turn: Turn) -> None:
    """Delete the superseded events of a turn whose final message this transaction stores
    (`events.SUPERSEDED_BY`): every `message.delta` (`message.completed` has the whole reply),
    each step's `step.updated` but its last, each `tool.started` whose `tool.completed` is
    stored. One statement, whatever the turn's length, reading the turn's rows only (by the
    key, from its acceptance on); no row of another turn is touched.

    Their sequence numbers are never reused, so replay stays exactly-once and in order, with
    holes where they were. Live followers already had them (events are published from the
    transactions that wrote them, not read back); one that reads the finished turn from the
    log (a reconnect, a gap, polling while Redis is away) gets the reply from
    `message.completed` and each step's and call's final state."""
    tx.execute(_DROP_SUPERSEDED[tx.dialect], (turn.session_id, turn.accepted_seq, turn.number))


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
            f"SELECT seq, data FROM events WHERE session_key = {SESSION_KEY} AND seq IN"
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
            f"{SELECT_EVENTS} AND e.seq > ? ORDER BY e.seq LIMIT ?",
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
