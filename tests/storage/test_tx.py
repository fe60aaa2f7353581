"""A turn's writes: held ones run inside the transaction of the next, events in order, published
only after the commit."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from app import events
from app.events import EventType
from app.storage.events import EventStore
from app.storage.port import Database
from app.storage.records import Event, dumps
from app.storage.tx import Store, TurnWrites, Tx

SESSION = "ses_tx"


@pytest.fixture
async def db(open_db: Any) -> AsyncIterator[Database]:
    database = await open_db()
    await database.write(
        lambda c: c.execute(
            "INSERT INTO sessions (id, tenant_id, user_id, status, created_at, updated_at,"
            " last_activity_at) VALUES (?, 't', 'u', 'active', 0, 0, 0)",
            (SESSION,),
        )
    )
    yield database
    await database.close()


def event(type: str) -> Callable[[Tx], Event]:
    return lambda tx: tx.emit(SESSION, "t", type, {})


async def test_held_writes_ride_with_the_next_one(db: Database) -> None:
    published: list[list[Event]] = []
    writes = TurnWrites(Store(db, published.append))
    before = db.counts()
    writes.hold(event("a"))
    writes.hold(event("b"))
    assert published == [] and db.counts().jobs == before.jobs  # nothing sent yet
    last = await writes.now(event("c"))
    cost = db.counts() - before
    assert (cost.jobs, cost.commits, cost.events) == (1, 1, 3)
    assert [[e.type for e in batch] for batch in published] == [["a", "b", "c"]]
    assert [e.seq for e in published[0]] == [1, 2, 3] and last.seq == 3


async def test_a_failing_held_write_fails_its_carrier_and_nothing_is_published(
    db: Database,
) -> None:
    published: list[list[Event]] = []
    writes = TurnWrites(Store(db, published.append))
    writes.hold(event("a"))

    def broken(tx: Tx) -> None:
        raise ValueError("no")

    writes.hold(broken)
    with pytest.raises(ValueError, match="no"):
        await writes.now(event("c"))
    assert published == []
    assert await db.fetchall("SELECT * FROM events") == []


async def test_release_sends_what_is_held_on_its_own(db: Database) -> None:
    published: list[list[Event]] = []
    writes = TurnWrites(Store(db, published.append))
    writes.release()  # nothing held: nothing sent
    writes.hold(event("a"))
    writes.release()
    await writes.now(event("b"))  # the writer keeps order: a's job commits first
    assert [[e.type for e in batch] for batch in published] == [["a"], ["b"]]


async def add_turn(db: Database, session_id: str, turn_id: str, number: int = 1) -> None:
    """A turn row with this id (events of a turn name one: `Tx.emit` stores its number)."""
    await db.write(
        lambda c: c.execute(
            "INSERT INTO turns (id, session_id, tenant_id, number, user_message_id, status,"
            " accepted_seq, created_at) VALUES (?, ?, 't', ?, 'msg_1', 'running', 0, 0)",
            (turn_id, session_id, number),
        )
    )


async def test_a_turns_id_is_stored_once_as_its_number_and_read_back_in_front(
    db: Database,
) -> None:
    await add_turn(db, SESSION, "turn_1", 7)

    def emit(tx: Tx) -> Event:
        return tx.emit(
            SESSION, "t", EventType.TURN_QUEUED, {"turn_id": "turn_1", "ahead": 2}, "turn_1"
        )

    published = await Store(db).transact(emit)
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
        lambda c: c.execute(
            "INSERT INTO events (session_key, seq, turn_number, type, data, created_at)"
            " SELECT session_key, 2, 7, 'turn.queued', ?, 0 FROM sessions WHERE id = ?",
            ('{"turn_id":"turn_1","ahead":3}', SESSION),
        )
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
        lambda tx: [tx.emit(SESSION, "t", *plain), tx.emit(SESSION, "t", *failed)]
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
        lambda c: c.execute(
            "INSERT INTO events (session_key, seq, turn_number, type, data, created_at)"
            " SELECT session_key, 3, 1, 'step.updated', ?, 0 FROM sessions WHERE id = ?",
            ('{"step_id":"stp_1","status":"queued"}', SESSION),
        )
    )
    old = (await EventStore(db).after(SESSION, 2))[0]
    assert old.data == {"turn_id": "turn_1", "step_id": "stp_1", "status": "queued"}


async def test_an_event_of_a_turn_not_in_the_session_is_refused(db: Database) -> None:
    with pytest.raises(LookupError, match="not a turn of session"):
        await Store(db).transact(
            lambda tx: tx.emit(
                SESSION, "t", EventType.TURN_QUEUED, {"turn_id": "turn_x", "ahead": 2}, "turn_x"
            )
        )
    assert await EventStore(db).after(SESSION, 0) == []


async def test_a_turns_event_without_its_id_first_is_refused(db: Database) -> None:
    with pytest.raises(ValueError, match="first field"):
        await Store(db).transact(
            lambda tx: tx.emit(SESSION, "t", EventType.TURN_QUEUED, {"ahead": 2}, "turn_1")
        )


async def test_a_following_write_runs_after_the_next_one_and_sees_its_events(
    db: Database,
) -> None:
    published: list[list[Event]] = []
    writes = TurnWrites(Store(db, published.append))
    seen: list[list[str]] = []
    writes.hold(event("a"))
    writes.follow(lambda tx: seen.append([e.type for e in tx.events]))
    writes.follow(event("c"))
    await writes.now(event("b"))
    assert seen == [["a", "b"]]
    assert [[e.type for e in batch] for batch in published] == [["a", "b", "c"]]
    writes.follow(event("d"))
    writes.release()  # a following write with nothing to follow goes on its own
    await writes.now(event("e"))
    assert [[e.type for e in batch] for batch in published][1:] == [["d"], ["e"]]
