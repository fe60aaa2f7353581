"""Follower: replay from the log, then live events from the bus, each exactly once and in order;
a gap or a full queue sends it back to the log. Real SQLite log, real bus, no HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from app import events
from app.conversation.bus import EventBus, Follower
from app.events import EventType
from app.settings import PROJECT_ROOT
from app.storage.event_log import EventStore
from app.storage.port import Database
from app.storage.records import Event
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.sqlite import SqliteDatabase
from app.storage.turns import TurnStore
from app.storage.tx import Store, Tx
from tests.storage.test_usage import running_turn

TENANT = "default"
DEADLINE_S = 5.0


@dataclass
class Log:
    db: Database
    bus: EventBus
    events: EventStore
    loud: Store  # commits and publishes, as every store of the service does
    quiet: Store  # commits without publishing (as another process would)
    session_id: str

    async def append(self, *labels: str, publish: bool = True) -> list[int]:
        """Commit one `message.delta` per label (the label is its text) in one transaction;
        their sequence numbers."""

        def emit(tx: Tx) -> list[int]:
            return [
                tx.emit(self.session_id, TENANT, EventType.MESSAGE_DELTA, {"text": label}).seq
                for label in labels
            ]

        return await (self.loud if publish else self.quiet).transact(
            SessionWriter(self.session_id), emit
        )

    def follow(self, after: int, *, keepalive_s: float = DEADLINE_S, **kw: object) -> Follower:
        return Follower(
            self.bus,
            self.events,
            self.session_id,
            after=after,
            keepalive_s=keepalive_s,
            **kw,  # type: ignore[arg-type]
        )


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[Log]:
    db = await SqliteDatabase(
        tmp_path / "events.db", migrations_dir=PROJECT_ROOT / "migrations"
    ).open()
    bus = EventBus()
    session = await SessionStore(db, bus.publish).create(TENANT, "u1", {})  # event 1
    yield Log(db, bus, EventStore(db), Store(db, bus.publish), Store(db), session.id)
    await db.close()


def label(event: Event) -> str:
    """What `Log.append` was given for this event (its type for any other event)."""
    return str(event.data["text"]) if event.type == EventType.MESSAGE_DELTA else event.type


async def take(follower: Follower, n: int) -> list[int]:
    """The sequence numbers of the next `n` events (keep-alive ticks fail the test)."""
    seqs = []
    async with asyncio.timeout(DEADLINE_S):
        for _ in range(n):
            event = await anext(follower)
            assert isinstance(event, Event), "a keep-alive tick instead of an event"
            seqs.append(event.seq)
    return seqs


async def test_replays_the_log_then_hands_over_to_live_events_without_duplicates(
    log: Log,
) -> None:
    await log.append("a", "b", "c")  # seq 2, 3, 4
    follower = log.follow(after=2)
    # Committed after the follower subscribed and before it read the log: in both.
    await log.append("d")  # 5
    try:
        assert await take(follower, 3) == [3, 4, 5]
        pending = asyncio.ensure_future(take(follower, 2))
        await log.append("e")
        await log.append("f")
        assert await pending == [6, 7]
    finally:
        await follower.aclose()
    assert log.bus.subscriber_count() == 0


async def live(log: Log, follower: Follower) -> int:
    """Bring the follower to its live phase: it has yielded an event and read the log since."""
    [seq] = await log.append("warm-up")
    assert await take(follower, 1) == [seq]
    return seq


async def test_a_gap_in_live_events_is_filled_from_the_log(log: Log) -> None:
    follower = log.follow(after=1)
    try:
        last = await live(log, follower)
        await log.append("elsewhere", publish=False)  # stored, never published here
        await log.append("x", "y")  # published; the first follows a gap
        assert await take(follower, 3) == [last + 1, last + 2, last + 3]
    finally:
        await follower.aclose()


async def test_a_follower_that_falls_behind_goes_back_to_the_log(log: Log) -> None:
    follower = log.follow(after=1)
    try:
        await live(log, follower)
        # More events in one commit than its queue holds: the rest are dropped from the queue.
        seqs = await log.append(*(f"e{i}" for i in range(1500)))
        assert await take(follower, 1500) == seqs
    finally:
        await follower.aclose()


async def test_keepalive_ticks_while_nothing_happens(log: Log) -> None:
    follower = log.follow(after=1, keepalive_s=0.01)
    try:
        async with asyncio.timeout(DEADLINE_S):
            assert await anext(follower) is None
            waiting = asyncio.ensure_future(anext(follower))
            await log.append("late")
            while (event := await waiting) is None:  # ticks until it arrives
                waiting = asyncio.ensure_future(anext(follower))
        assert event.seq == 2
    finally:
        await follower.aclose()


async def test_stops_after_the_event_it_waits_for(log: Log) -> None:
    await log.append("a", "stop", "after")
    follower = log.follow(after=0, until=lambda e: label(e) == "stop")
    seen = []
    async with asyncio.timeout(DEADLINE_S):
        async for event in follower:
            assert event is not None
            seen.append(label(event))
    await follower.aclose()
    assert seen == ["session.created", "a", "stop"]


async def test_ends_when_the_session_is_closed_or_gone(log: Log) -> None:
    follower = log.follow(after=1)
    waiting = asyncio.ensure_future(anext(follower))
    await asyncio.sleep(0)
    log.bus.close_session(log.session_id)
    with pytest.raises(StopAsyncIteration):
        async with asyncio.timeout(DEADLINE_S):
            await waiting
    await follower.aclose()

    missing = Follower(log.bus, log.events, "ses_missing", after=0, keepalive_s=DEADLINE_S)
    with pytest.raises(StopAsyncIteration):
        async with asyncio.timeout(DEADLINE_S):
            await anext(missing)
    await missing.aclose()


async def test_a_finished_turns_holes_neither_loop_nor_lose_an_event(log: Log) -> None:
    # A completed turn's end deletes its superseded events (here its deltas): followers live
    # through it, reconnecting in the middle or after the end, each get every event still
    # stored exactly once, in order, and then follow live events as before.
    turns = TurnStore(log.db, log.bus.publish)
    turn = await running_turn(turns, TENANT, log.session_id)  # turn.started: 2

    def delta(text: str) -> Callable[[Tx], int]:
        return lambda tx: tx.emit(log.session_id, TENANT, *events.message_delta(turn.id, text)).seq

    live_one = log.follow(after=1)
    await log.loud.transact(SessionWriter(log.session_id), delta("one "))  # 3
    mid_turn = log.follow(after=3)  # reconnected after the first delta
    await log.loud.transact(SessionWriter(log.session_id), delta("two "))  # 4
    followers = [live_one, mid_turn]
    try:
        assert await take(live_one, 3) == [2, 3, 4]
        assert await take(mid_turn, 1) == [4]
        # Stored but never heard here (another process's message that Redis lost): the next
        # live event shows the gap, and by then the log has a hole where it was.
        await log.quiet.transact(SessionWriter(log.session_id), delta("three"))  # 5
        await turns.complete(
            SessionWriter(turn.session_id),
            turn,
            text="one two three",
            token_estimate=3,
            model=None,
            rounds=1,
            prompt_tokens=1,
            completion_tokens=1,
        )  # message.completed 6, turn.completed 7; the deltas 3, 4 and 5 deleted
        for follower in followers:
            assert await take(follower, 2) == [6, 7]
        # After the end, from a deleted id and from the start: the holes are skipped.
        followers.append(log.follow(after=4))
        followers.append(log.follow(after=0))
        assert await take(followers[2], 2) == [6, 7]
        assert await take(followers[3], 4) == [1, 2, 6, 7]
        [later] = await log.append("later")
        for follower in followers:
            assert await take(follower, 1) == [later] == [8]  # live again, nothing twice
    finally:
        for follower in followers:
            await follower.aclose()
    stored = [e.seq for e in await log.events.after(log.session_id, 0)]
    assert stored == [1, 2, 6, 7, 8]
