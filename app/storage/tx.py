"""A write transaction that can also append session events.

`Store.transact(writer, fn)` runs `fn(tx)` on the writer thread, on the lane and under the
lease of `writer` (app/storage/session_writer.py); the events `tx.emit` appends get their
per-session sequence numbers inside the same transaction as the state change they describe,
and are handed to the publisher only after the commit.

`fn` is a function of the transaction (app/storage/writer.py may run it more than once): it
returns what it produced and changes nothing outside the database. When it turns a normal
request down (the session is busy, the queue is full), it returns `Refused(error)` instead of
raising: a raised error makes the writer run the job's whole batch again, each job in a
savepoint, while a refusal commits with its batch; `transact` raises the error after the commit,
on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from app.errors import HermesError, InternalError
from app.events import EventType, at_rest
from app.storage.port import Connection, Cursor, Database, Dialect, dialect_of, note_event
from app.storage.records import Event, dumps
from app.storage.session_writer import SessionWriter

T = TypeVar("T")
Publisher = Callable[[list[Event]], None]


# An event row is keyed by its session's integer key and carries its turn's number in the
# session (migration 0017); the turn's number is looked up by the turn's id, in its session.
_TURN_NUMBER = "(SELECT number FROM turns WHERE id = ? AND session_id = ?)"
# The next sequence number and the event row in one statement (SQLite can't UPDATE in a WITH).
_EMIT_POSTGRES = (
    "WITH next AS (UPDATE sessions SET last_event_seq = last_event_seq + 1 WHERE id = ?"
    " RETURNING session_key, last_event_seq)"
    " INSERT INTO events (session_key, seq, turn_number, type, data, created_at)"
    f" SELECT next.session_key, next.last_event_seq, {_TURN_NUMBER}, ?, ?, ? FROM next"
    " RETURNING seq, turn_number"
)
_EMIT_SQLITE = (
    "INSERT INTO events (session_key, seq, turn_number, type, data, created_at)"
    f" VALUES (?, ?, {_TURN_NUMBER}, ?, ?, ?) RETURNING seq, turn_number"
)


@dataclass(frozen=True)
class Refused:
    """A job's "no" to a normal request, returned (see the module docstring). A job refuses
    before it writes: what it wrote before would commit with its batch."""

    error: HermesError


class Tx:
    def __init__(self, conn: Connection, now: float | None = None) -> None:
        self.conn = conn
        self.now = time.time() if now is None else now
        self.events: list[Event] = []
        self.dialect: Dialect = dialect_of(conn)

    @property
    def for_update(self) -> str:
        """Appended to a SELECT of the row a transaction is about to change: on PostgreSQL it
        locks the row, so writers in other processes queue behind this one (SQLite's
        `BEGIN IMMEDIATE` already admits one writer at a time)."""
        return " FOR UPDATE" if self.dialect == "postgres" else ""

    def execute(self, sql: str, params: Any = ()) -> Cursor:
        return self.conn.execute(sql, params)

    def one(self, sql: str, params: Any = ()) -> Any | None:
        return self.conn.execute(sql, params).fetchone()

    def emit(
        self,
        session_id: str,
        tenant_id: str,
        type: EventType,
        data: dict[str, Any],
        turn_id: str | None = None,
    ) -> Event:
        """Append an event (built by `app.events`: `tx.emit(session, tenant, *new_event)`)
        to the session's log, with the session's next sequence number.

        A turn's event carries its turn id first in its payload (the catalogue builds them so);
        the row stores only the turn's number in the session, and a reader joins the turn's id
        back and puts it in front (`Event.from_row`). `tenant_id` is the session's: the record
        carries it, the row does not."""
        payload = dumps(at_rest(type, _without_turn_id(data, turn_id)))
        if self.dialect == "postgres":  # one statement, one round trip
            row = self.conn.execute(
                _EMIT_POSTGRES,
                (session_id, turn_id, session_id, type, payload, self.now),
            ).fetchone()
        else:
            next_seq = self.conn.execute(
                "UPDATE sessions SET last_event_seq = last_event_seq + 1 WHERE id = ?"
                " RETURNING session_key, last_event_seq",
                (session_id,),
            ).fetchone()
            row = None
            if next_seq is not None:
                row = self.conn.execute(
                    _EMIT_SQLITE,
                    (*next_seq, turn_id, session_id, type, payload, self.now),
                ).fetchone()
        if row is None:
            raise LookupError(f"session {session_id} vanished")
        if turn_id is not None and row[1] is None:
            raise LookupError(f"turn {turn_id} is not a turn of session {session_id}")
        event = Event(
            session_id=session_id,
            seq=row[0],
            tenant_id=tenant_id,
            type=type,
            data=data,
            turn_id=turn_id,
            created_at=self.now,
        )
        note_event(self.conn, len(payload.encode()))
        self.events.append(event)
        return event


def _without_turn_id(data: dict[str, Any], turn_id: str | None) -> dict[str, Any]:
    if turn_id is None:
        return data
    if next(iter(data), None) != "turn_id" or data["turn_id"] != turn_id:
        raise ValueError(f"an event of turn {turn_id} must carry it as its first field")
    return {k: v for k, v in data.items() if k != "turn_id"}


class Store:
    """Base for repositories: reads through the pool, writes as transactions that may emit.

    Every write names its `SessionWriter` (app/storage/session_writer.py): the session's lane
    it takes and the lease fence it runs under (a fenced write runs only while the fence still
    holds), or `NO_SESSION` for a write of no one session."""

    def __init__(self, db: Database, publish: Publisher | None = None) -> None:
        self.db = db
        self._publish = publish

    async def transact(self, writer: SessionWriter | None, fn: Callable[[Tx], T | Refused]) -> T:
        """Run `fn` in a write transaction on `writer`'s lane, under its fence; its refusal is
        raised here, after the commit."""
        result, _events = await self.db.write(writer, *self._job(fn))
        if isinstance(result, Refused):
            raise result.error
        return result

    def transact_nowait(
        self,
        writer: SessionWriter | None,
        fn: Callable[[Tx], T],
        then: Callable[[T], None] | None = None,
    ) -> asyncio.Future[tuple[T, list[Event]]]:
        """Queue a transaction of `writer` without waiting (its lane keeps submission order);
        `then` gets `fn`'s result on the event loop once it committed, after its events went
        out."""
        return self.db.submit(writer, *self._job(fn, then))

    def _job(
        self, fn: Callable[[Tx], T], then: Callable[[T], None] | None = None
    ) -> tuple[
        Callable[[Connection], tuple[T, list[Event]]],
        Callable[[tuple[T, list[Event]]], None],
    ]:
        def job(conn: Connection) -> tuple[T, list[Event]]:
            tx = Tx(conn)
            result = fn(tx)
            if isinstance(result, Refused) and tx.events:
                raise InternalError(f"a job refused after it wrote: {result.error!r}")
            return result, tx.events

        def on_commit(result: tuple[T, list[Event]]) -> None:
            if result[1] and self._publish is not None:
                self._publish(result[1])
            if then is not None:
                then(result[0])

        return job, on_commit
