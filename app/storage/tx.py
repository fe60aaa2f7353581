"""A write transaction that can also append session events.

`Store.transact(fn)` runs `fn(tx)` on the writer thread; the events `tx.emit` appends get their
per-session sequence numbers inside the same transaction as the state change they describe,
and are handed to the publisher only after the commit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from app.errors import DatabaseClosed
from app.events import EventType, at_rest
from app.storage import fence as fences
from app.storage.port import Connection, Cursor, Database, Dialect, dialect_of, note_event
from app.storage.records import Event, dumps
from app.storage.writer import shielded

T = TypeVar("T")
log = logging.getLogger(__name__)
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

    A write submitted while a session's lease fence is set (`app.storage.fence.current`) runs
    only if the fence still holds."""

    def __init__(self, db: Database, publish: Publisher | None = None) -> None:
        self.db = db
        self._publish = publish

    async def transact(self, fn: Callable[[Tx], T]) -> T:
        result, _events = await self.db.write(*self._job(fn))
        return result

    def transact_nowait(self, fn: Callable[[Tx], T]) -> asyncio.Future[tuple[T, list[Event]]]:
        """Queue a transaction without waiting (the writer keeps submission order)."""
        return self.db.submit(*self._job(fn))

    def _job(
        self, fn: Callable[[Tx], T]
    ) -> tuple[
        Callable[[Connection], tuple[T, list[Event]]],
        Callable[[tuple[T, list[Event]]], None],
    ]:
        # Taken where the write is submitted: a session worker's writes (and its turn's) carry
        # its lease, checked first inside the transaction itself.
        fence = fences.current.get()

        def job(conn: Connection) -> tuple[T, list[Event]]:
            tx = Tx(conn)
            if fence is not None:
                fences.check(tx, fence)
            return fn(tx), tx.events

        def on_commit(result: tuple[T, list[Event]]) -> None:
            if result[1] and self._publish is not None:
                self._publish(result[1])

        return job, on_commit


class TurnWrites:
    """One turn's writes, fewer and larger: a write nobody waits for can be *held* and run at
    the start of the turn's next transaction (`now` or `send`), inside it.

    The writer keeps submission order, so the turn's own events keep their order; hold only
    what no other writer of the session could need to come after (the caller knows which:
    e.g. a step's start, carried by the `tool.started` event right behind it). A held write
    that fails fails the write carrying it. Nothing is published before it commits.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._held: list[Callable[[Tx], object]] = []
        self._following: list[Callable[[Tx], object]] = []

    def hold(self, fn: Callable[[Tx], object]) -> None:
        self._held.append(fn)

    def follow(self, fn: Callable[[Tx], object]) -> None:
        """Like `hold`, but run *after* the next write, in its transaction: `fn` sees what that
        write did (`tx.events`: e.g. the `tool.completed` whose result a step refers to)."""
        self._following.append(fn)

    def send(self, fn: Callable[[Tx], T]) -> asyncio.Future[tuple[T, list[Event]]]:
        """The held writes, `fn` and the following ones as one transaction, queued without
        waiting."""
        held, self._held = self._held, []
        following, self._following = self._following, []
        if not held and not following:
            return self._store.transact_nowait(fn)

        def carried(tx: Tx) -> T:
            for write in held:
                write(tx)
            result = fn(tx)
            for write in following:
                write(tx)
            return result

        return self._store.transact_nowait(carried)

    async def now(self, fn: Callable[[Tx], T]) -> T:
        # (shielded: a cancelled turn must not make the write look failed; it still commits.)
        result, _events = await shielded(self.send(fn))
        return result

    def release(self) -> None:
        """Send what is held on its own (the turn ends without another write to carry it)."""
        if not self._held and not self._following:
            return
        try:
            self.send(lambda tx: None).add_done_callback(_log_failure)
        except DatabaseClosed:  # shutting down: nothing more can be stored
            log.warning("held writes of an ended turn were dropped: the database is closed")


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("held writes of an ended turn failed", exc_info=future.exception())
