"""A turn's deferred writes: they run inside the transaction of its next write, in order, and
their results come back to whoever deferred them once that transaction commits."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from app.storage.deferred import DeferredWrites
from app.storage.port import Database
from app.storage.records import Event
from app.storage.session_writer import SessionWriter
from app.storage.tx import Store, Tx
from tests.storage.batches import one_batch, submitted
from tests.storage.one_session import SESSION, event, with_one_session

WRITER = SessionWriter(SESSION)  # the turn's: its session's lane, no lease here


@pytest.fixture
async def db(open_db: Any) -> Database:
    return await with_one_session(open_db)


def types(published: list[list[Event]]) -> list[list[str]]:
    return [[e.type for e in batch] for batch in published]


async def test_deferred_writes_ride_with_the_next_one(db: Database) -> None:
    published: list[list[Event]] = []
    writes = DeferredWrites(Store(db, published.append), WRITER)
    before = db.counts()
    writes.defer(event("a"))
    writes.defer(event("b"))
    assert published == [] and db.counts().jobs == before.jobs  # nothing sent yet
    last = await writes.now(event("c"))
    cost = db.counts() - before
    assert (cost.jobs, cost.commits, cost.events) == (1, 1, 3)
    assert types(published) == [["a", "b", "c"]]
    assert [e.seq for e in published[0]] == [1, 2, 3] and last.seq == 3


async def test_a_deferred_writes_result_comes_back_once_committed(db: Database) -> None:
    writes = DeferredWrites(Store(db), WRITER)
    seen: list[str] = []
    writes.defer(event("a"), lambda stored: seen.append(f"a={stored.seq}"))
    writes.defer_after(event("c"), lambda stored: seen.append(f"c={stored.seq}"))
    carried = writes.send(event("b"))
    assert seen == []  # not while it runs: only once its transaction committed
    assert (await carried).seq == 2
    assert seen == ["a=1", "c=3"]


async def test_a_failing_deferred_write_fails_its_carrier_and_nothing_is_published(
    db: Database,
) -> None:
    published: list[list[Event]] = []
    writes = DeferredWrites(Store(db, published.append), WRITER)
    seen: list[Event] = []
    writes.defer(event("a"), seen.append)

    def broken(tx: Tx) -> None:
        raise ValueError("no")

    writes.defer(broken)
    with pytest.raises(ValueError, match="no"):
        await writes.now(event("c"))
    assert published == [] and seen == []
    assert await db.fetchall("SELECT * FROM events") == []


async def test_a_rolled_back_attempt_hands_back_nothing(db: Database) -> None:
    """A batch whose job fails runs again, each job in a savepoint: a deferred write's result
    is the one of the run that committed, or none when its carrier failed in the end."""
    store = Store(db)
    kept, lost = DeferredWrites(store, WRITER), DeferredWrites(store, WRITER)
    seen: list[tuple[str, int]] = []
    kept.defer(event("a"), lambda stored: seen.append(("kept", stored.seq)))
    lost.defer(event("b"), lambda stored: seen.append(("lost", stored.seq)))
    runs = itertools.count()

    def second_run_fails(tx: Tx) -> None:
        if next(runs):
            raise RuntimeError("the lease moved")

    def fails(tx: Tx) -> None:
        raise ValueError("no")

    async with one_batch(db, WRITER):
        carried, unlucky, failed = await submitted(
            kept.now(lambda tx: None), lost.now(second_run_fails), store.transact(WRITER, fails)
        )
    await carried
    with pytest.raises(RuntimeError):
        await unlucky
    with pytest.raises(ValueError):
        await failed
    stored = await db.fetchall("SELECT seq FROM events")
    assert seen == [("kept", 1)] and [tuple(r) for r in stored] == [(1,)]


async def test_flush_sends_what_is_deferred_on_its_own(db: Database) -> None:
    published: list[list[Event]] = []
    writes = DeferredWrites(Store(db, published.append), WRITER)
    writes.flush()  # nothing deferred: nothing sent
    writes.defer(event("a"))
    writes.flush()
    await writes.now(event("b"))  # the writer keeps order: a's job commits first
    assert types(published) == [["a"], ["b"]]


async def test_a_write_deferred_after_runs_after_the_next_one_and_sees_its_events(
    db: Database,
) -> None:
    published: list[list[Event]] = []
    writes = DeferredWrites(Store(db, published.append), WRITER)
    seen: list[list[str]] = []
    writes.defer(event("a"))
    writes.defer_after(lambda tx: [e.type for e in tx.events], seen.append)
    writes.defer_after(event("c"))
    await writes.now(event("b"))
    assert seen == [["a", "b"]]
    assert types(published) == [["a", "b", "c"]]
    writes.defer_after(event("d"))
    writes.flush()  # a write deferred after with nothing to follow goes on its own
    await writes.now(event("e"))
    assert types(published)[1:] == [["d"], ["e"]]
