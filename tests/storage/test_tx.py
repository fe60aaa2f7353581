"""A write transaction: its events in order with per-session sequence numbers, published only
after the commit; a refusal raised after it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app import events
from app.errors import InternalError, SessionBusy
from app.events import EventType
from app.storage.event_log import EventStore
from app.storage.port import Database
from app.storage.records import Event, dumps
from app.storage.session_writer import SessionWriter
from app.storage.tx import Refused, Store, Tx
from tests.storage.one_session import SESSION, with_one_session


@pytest.fixture
async def db(open_db: Any) -> Database:
    return await with_one_session(open_db)


async def add_turn(db: Database, session_id: str, turn_id: str, number: int = 1) -> None:
    """A turn row with this id (events of a turn name one: `Tx.emit` stores its number)."""
    await db.write(
        SessionWriter(session_id),
        lambda c: c.execute(
            "INSERT INTO turns (id, session_id, tenant_id, number, user_message_id, status,"
            " accepted_seq, created_at) VALUES (?, ?, 't', ?, 'msg_1', 'running', 0, 0)",
            (turn_id, session_id, number),
        ),
    )


async def test_a_turns_id_is_stored_once_as_its_number_and_read_back_in_front(
    db: Database,
) -> None:
    await add_turn(db, SESSION, "turn_1", 7)

    def emit(tx: Tx) -> Event:
        return tx.emit(
            SESSION, "t", EventType.TURN_QUEUED, {"turn_id": "turn_1", "ahead": 2}, "turn_1"
        )

    published = await Store(db).transact(SessionWriter(SESSION), emit)
    assert published.data == {"turn_id": "turn_1", "ahead": 2}
    # The row: the session's integer key, the turn's number; no text id, no tenant.
    stored = await db.fetchall(
        "SELECT e.data, e.turn_number FROM events e JOIN sessions s"
        " ON s.session_key = e.session_key WHERE s.id = ?",
        (SESSION,),
    )
    assert [tuple(r) for r in stored] == [('{"ahead":2}', 7)]
    # A row stored before (the id in the payload too) reads the same; the order is the wire's.
    await db.write(
        SessionWriter(SESSION),
        lambda c: c.execute(
            "INSERT INTO events (session_key, seq, turn_number, type, data, created_at)"
            " SELECT session_key, 2, 7, 'turn.queued', ?, 0 FROM sessions WHERE id = ?",
            ('{"turn_id":"turn_1","ahead":3}', SESSION),
        ),
    )
    read = await EventStore(db).after(SESSION, 0)
    assert [list(e.data.items()) for e in read] == [
        [("turn_id", "turn_1"), ("ahead", 2)],
        [("turn_id", "turn_1"), ("ahead", 3)],
    ]
    assert [(e.session_id, e.tenant_id, e.turn_id) for e in read] == [(SESSION, "t", "turn_1")] * 2


async def test_a_step_states_null_fields_are_not_stored_and_read_back_as_sent(
    db: Database,
) -> None:
    await add_turn(db, SESSION, "turn_1", 1)
    common = {
        "key": "tool:c1",
        "action_type": "call_tool",
        "name": "lookup",
        "attempts": 1,
        "started_at": 1796133105.7841797,
        "finished_at": None,
    }
    plain = events.step_updated(
        "turn_1", "stp_1", parent_id=None, status="running", error=None, **common
    )
    failed = events.step_updated(
        "turn_1", "stp_2", parent_id="stp_0", status="failed", error={"code": "x"}, **common
    )
    live = await Store(db).transact(
        SessionWriter(SESSION),
        lambda tx: [tx.emit(SESSION, "t", *plain), tx.emit(SESSION, "t", *failed)],
    )
    stored = [
        json.loads(r[0])
        for r in await db.fetchall(
            "SELECT e.data FROM events e JOIN sessions s ON s.session_key = e.session_key"
            " WHERE s.id = ? ORDER BY e.seq",
            (SESSION,),
        )
    ]
    # No parent, no error: neither is stored; times at millisecond precision.
    assert "parent_id" not in stored[0] and "error" not in stored[0]
    assert stored[0]["started_at"] == 1796133105.784
    assert stored[1]["parent_id"] == "stp_0" and stored[1]["error"] == {"code": "x"}
    read = await EventStore(db).after(SESSION, 0)
    # What a reconnecting client replays is what a live follower got, byte for byte.
    assert [dumps(e.data) for e in read] == [dumps(e.data) for e in live]
    assert list(read[0].data)[:4] == ["turn_id", "step_id", "key", "parent_id"]
    # A state shrunk in place by an older Hermes reads as it is.
    await db.write(
        SessionWriter(SESSION),
        lambda c: c.execute(
            "INSERT INTO events (session_key, seq, turn_number, type, data, created_at)"
            " SELECT session_key, 3, 1, 'step.updated', ?, 0 FROM sessions WHERE id = ?",
            ('{"step_id":"stp_1","status":"queued"}', SESSION),
        ),
    )
    old = (await EventStore(db).after(SESSION, 2))[0]
    assert old.data == {"turn_id": "turn_1", "step_id": "stp_1", "status": "queued"}


async def test_an_event_of_a_turn_not_in_the_session_is_refused(db: Database) -> None:
    with pytest.raises(LookupError, match="not a turn of session"):
        await Store(db).transact(
            SessionWriter(SESSION),
            lambda tx: tx.emit(
                SESSION, "t", EventType.TURN_QUEUED, {"turn_id": "turn_x", "ahead": 2}, "turn_x"
            ),
        )
    assert await EventStore(db).after(SESSION, 0) == []


async def test_a_turns_event_without_its_id_first_is_refused(db: Database) -> None:
    with pytest.raises(ValueError, match="first field"):
        await Store(db).transact(
            SessionWriter(SESSION),
            lambda tx: tx.emit(SESSION, "t", EventType.TURN_QUEUED, {"ahead": 2}, "turn_1"),
        )


async def test_a_refusal_is_raised_after_its_batch_commits(db: Database) -> None:
    store = Store(db)
    refusal = SessionBusy("busy", session_id=SESSION)
    with pytest.raises(SessionBusy) as raised:
        await store.transact(SessionWriter(SESSION), lambda tx: Refused(refusal))
    assert raised.value is refusal


async def test_a_job_that_refuses_after_writing_fails(db: Database) -> None:
    """A refusal commits with its batch: one after an event would store the event."""
    published: list[list[Event]] = []

    def wrote_then_refused(tx: Tx) -> Refused:
        tx.emit(SESSION, "t", "a", {})
        return Refused(SessionBusy("busy"))

    with pytest.raises(InternalError, match="refused after it wrote"):
        await Store(db, published.append).transact(SessionWriter(SESSION), wrote_then_refused)
    assert published == [] and await db.fetchall("SELECT * FROM events") == []
