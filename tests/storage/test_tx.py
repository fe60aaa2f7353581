"""A turn's writes: held ones run inside the transaction of the next, events in order, published
only after the commit."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

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
