"""TurnEmitter on a real SQLite file: what a turn reports is stored as catalogue events, in
order, and published only once committed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app import events
from app.api.sse import encode
from app.conversation.emitter import TurnEmitter
from app.events import EventType
from app.llm.gateway import RequestedToolCall
from app.settings import PROJECT_ROOT
from app.storage.event_log import EventStore
from app.storage.port import Database
from app.storage.records import Event, Turn
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.sqlite import SqliteDatabase
from app.storage.turns import TurnStore
from app.tools.results import ToolResult


@dataclass
class Claimed:
    """A running turn in a fresh database, and every batch of events published so far."""

    db: Database
    turns: TurnStore
    turn: Turn
    published: list[list[Event]]

    async def log(self) -> list[Event]:
        """The session's events as stored (and as SSE replays them)."""
        return await EventStore(self.db).after(self.turn.session_id, 0)

    async def turn_log(self) -> list[Event]:
        return [e for e in await self.log() if e.turn_id == self.turn.id]


async def claimed_turn(path: Path) -> Claimed:
    db = SqliteDatabase(path, migrations_dir=PROJECT_ROOT / "migrations")
    await db.open()
    published: list[list[Event]] = []
    session = await SessionStore(db, published.append).create("t", "u", {})
    turns = TurnStore(db, published.append)
    accepted = await turns.accept(
        SessionWriter(session.id),
        tenant_id="t",
        session_id=session.id,
        content="hello",
        token_estimate=1,
        client_message_id=None,
        policy="reject",
        max_queued=5,
    )
    assert accepted is not None
    claimed = await turns.claim_next(SessionWriter(session.id), session.id)
    assert claimed is not None
    published.clear()
    return Claimed(db, turns, claimed.turn, published)


@pytest.fixture
async def claimed(tmp_path: Path) -> AsyncIterator[Claimed]:
    found = await claimed_turn(tmp_path / "hermes.db")
    yield found
    await found.db.close()


def call(call_id: str = "c1", name: str = "lookup") -> RequestedToolCall:
    return RequestedToolCall(call_id, name, "{}")


async def test_tool_calls_are_stored_as_catalogue_events_in_order(claimed: Claimed) -> None:
    emitter = TurnEmitter(claimed.turns, SessionWriter(claimed.turn.session_id), claimed.turn)
    turn_id = claimed.turn.id
    await emitter.started(call())
    result = ToolResult.ok({"n": 1})
    await emitter.completed(call(), result)
    stored = await claimed.turn_log()
    assert [e.type for e in stored][-2:] == [EventType.TOOL_STARTED, EventType.TOOL_COMPLETED]
    started, completed = stored[-2:]
    assert started.data == events.tool_started(turn_id, "c1", "lookup").data
    assert completed.data == {
        "turn_id": turn_id,
        "call_id": "c1",
        "tool": "lookup",
        "status": "success",
        "result": result.to_dict(),
    }
    assert started.seq + 1 == completed.seq
    # Each was awaited: published one by one, after its commit.
    assert [[e.seq for e in batch] for batch in claimed.published] == [
        [started.seq],
        [completed.seq],
    ]


async def test_streamed_text_is_gathered_and_goes_out_before_the_next_event(
    claimed: Claimed,
) -> None:
    emitter = TurnEmitter(
        claimed.turns, SessionWriter(claimed.turn.session_id), claimed.turn, flush_s=60
    )
    emitter.delta("Hel")  # the first piece goes out at once
    emitter.delta("lo, ")
    emitter.delta("world")
    recalled = await emitter.emit(events.memory_recalled(claimed.turn.id, {"items": 2}))
    stored = await claimed.turn_log()
    deltas = [e for e in stored if e.type == EventType.MESSAGE_DELTA]
    assert [d.data["text"] for d in deltas] == ["Hel", "lo, world"]
    assert recalled.type == EventType.MEMORY_RECALLED
    assert recalled.data == {"turn_id": claimed.turn.id, "items": 2}
    assert stored[-1].seq == recalled.seq and all(d.seq < recalled.seq for d in deltas)


async def test_deferred_text_rides_with_the_next_write(claimed: Claimed) -> None:
    emitter = TurnEmitter(
        claimed.turns, SessionWriter(claimed.turn.session_id), claimed.turn, flush_s=60
    )
    emitter.delta("first")
    await emitter.settle()
    emitter.delta(" and the rest")
    emitter.defer_text()
    before = claimed.db.counts()
    await emitter.started(call())
    assert (claimed.db.counts() - before).jobs == 1  # one transaction carried both
    last = claimed.published[-1]
    assert [e.type for e in last] == [EventType.MESSAGE_DELTA, EventType.TOOL_STARTED]
    assert last[0].data == {"turn_id": claimed.turn.id, "text": " and the rest"}


async def test_model_calls_and_queued_calls_announce_nothing_without_steps(
    claimed: Claimed,
) -> None:
    emitter = TurnEmitter(claimed.turns, SessionWriter(claimed.turn.session_id), claimed.turn)
    before = await claimed.log()
    await emitter.model_started(0, "model", [], 3)
    assert await emitter.queue_calls(0, [call()], {}, []) == []
    assert await claimed.log() == before


async def test_stored_payloads_are_the_wire_bytes_less_the_turn_id(claimed: Claimed) -> None:
    """What SSE sends is the stored JSON, compact and in the catalogue's key order; a turn is
    stored as its number in the session, its id read back in front of the payload."""
    emitter = TurnEmitter(claimed.turns, SessionWriter(claimed.turn.session_id), claimed.turn)
    await emitter.emit(events.memory_forgotten(claimed.turn.id, 3))
    row = await claimed.db.fetchone(
        "SELECT type, data, turn_number, seq FROM events"
        " WHERE session_key = (SELECT session_key FROM sessions WHERE id = ?)"
        " ORDER BY seq DESC LIMIT 1",
        (claimed.turn.session_id,),
    )
    assert row is not None
    assert (row[0], row[1], row[2]) == ("memory.forgotten", '{"count":3}', claimed.turn.number)
    [read] = await EventStore(claimed.db).after(claimed.turn.session_id, row[3] - 1)
    wire = json.dumps({"turn_id": claimed.turn.id, "count": 3}, separators=(",", ":"))
    assert f"data: {wire}\n".encode() in encode(read)
