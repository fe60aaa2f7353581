"""A turn's writes: held ones run inside the transaction of the next, events in order, published
only after the commit."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from app.events import EventType
from app.storage.events import EventStore
from app.storage.port import Database
from app.storage.records import Event
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


async def test_a_turns_id_is_stored_once_and_read_back_in_front(db: Database) -> None:
    def emit(tx: Tx) -> Event:
        return tx.emit(
            SESSION, "t", EventType.TURN_QUEUED, {"turn_id": "turn_1", "ahead": 2}, "turn_1"
        )

    published = await Store(db).transact(emit)
    assert published.data == {"turn_id": "turn_1", "ahead": 2}
    stored = await db.fetchall("SELECT data, turn_id FROM events WHERE session_id = ?", (SESSION,))
    assert [tuple(r) for r in stored] == [('{"ahead":2}', "turn_1")]
    # A row stored before (the id in the payload too) reads the same; the order is the wire's.
    await db.write(
        lambda c: c.execute(
            "INSERT INTO events (session_id, seq, tenant_id, turn_id, type, data, created_at)"
            " VALUES (?, 2, 't', 'turn_1', 'turn.queued', ?, 0)",
            (SESSION, '{"turn_id":"turn_1","ahead":3}'),
        )
    )
    read = await EventStore(db).after(SESSION, 0)
    assert [list(e.data.items()) for e in read] == [
        [("turn_id", "turn_1"), ("ahead", 2)],
        [("turn_id", "turn_1"), ("ahead", 3)],
    ]


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
