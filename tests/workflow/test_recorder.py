"""StepRecorder as a decorator around the turn's emitter, on a real SQLite file: each model and
tool call becomes a step, and everything reaches the wrapped emitter as if there were no
recorder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app import events
from app.conversation.emitter import TurnEmitter
from app.events import EventType
from app.llm.gateway import ModelReply, RequestedToolCall
from app.storage.session_writer import SessionWriter
from app.storage.steps import StepStore, TurnRef
from app.tools.reports import TurnReports
from app.tools.results import ToolResult
from app.tools.shaping import Redactor
from app.workflow.recorder import StepQueueFull, StepRecorder
from tests.conversation.test_emitter import Claimed, claimed_turn


@pytest.fixture
async def claimed(tmp_path: Path) -> AsyncIterator[Claimed]:
    found = await claimed_turn(tmp_path / "hermes.db")
    yield found
    await found.db.close()


def recorder(claimed: Claimed, max_depth: int = 50) -> tuple[StepRecorder, StepStore]:
    turn = claimed.turn
    emitter = TurnEmitter(claimed.turns, SessionWriter(turn.session_id), turn)
    store = StepStore(claimed.db, claimed.published.append)
    wrapped = StepRecorder(
        store,
        TurnRef(turn.tenant_id, turn.session_id, turn.id),
        emitter,
        max_depth,
        Redactor(),
        writes=emitter.writes,
    )
    return wrapped, store


def reply(*calls: RequestedToolCall) -> ModelReply:
    return ModelReply("ok", list(calls), "stop", "m-1", 10, 2)


async def steps(claimed: Claimed, store: StepStore) -> dict[str, tuple[str, str]]:
    found = await store.for_session("t", claimed.turn.session_id, claimed.turn.id)
    return {s.key: (s.action_type, s.status) for s in found}


async def test_a_model_call_and_its_tools_become_steps_and_their_events_still_go_out(
    claimed: Claimed,
) -> None:
    wrapped, store = recorder(claimed)
    reports: TurnReports = wrapped  # what the loop and the executor see
    a, b = RequestedToolCall("a", "read_a", "{}"), RequestedToolCall("b", "read_b", "{}")
    await reports.model_started(0, "model", [], 2)
    reports.delta("thinking")
    await reports.model_finished(reply(a, b), ["read_a", "read_b"], None)
    assert await reports.queue_calls(0, [a, b], {}, ["a", "b"]) == []
    for c in (a, b):
        await reports.started(c)
        await reports.completed(c, ToolResult.ok({"id": c.id}))
    await reports.settle()
    assert await steps(claimed, store) == {
        "model:0": ("generate_response", "succeeded"),
        "batch:0": ("batch", "succeeded"),
        "tool:a": ("call_tool", "succeeded"),
        "tool:b": ("call_tool", "succeeded"),
    }
    types = [e.type for e in await claimed.turn_log()]
    # The wrapped emitter's events, in order, among the step updates.
    assert [t for t in types if t != EventType.STEP_UPDATED] == [
        EventType.TURN_STARTED,
        EventType.MESSAGE_DELTA,
        EventType.TOOL_STARTED,
        EventType.TOOL_COMPLETED,
        EventType.TOOL_STARTED,
        EventType.TOOL_COMPLETED,
    ]
    assert types.count(EventType.STEP_UPDATED) >= 4


async def test_a_failed_model_call_fails_its_step(claimed: Claimed) -> None:
    wrapped, store = recorder(claimed)
    await wrapped.model_started(0, "model", [], 1)
    await wrapped.model_failed("llm_timeout", "the model took too long", None)
    assert await steps(claimed, store) == {"model:0": ("generate_response", "timed_out")}
    await wrapped.model_failed("llm_timeout", "no step under way: nothing to do", None)


async def test_a_full_queue_refuses_calls_and_model_calls(claimed: Claimed) -> None:
    wrapped, store = recorder(claimed, max_depth=1)
    a, b = RequestedToolCall("a", "write_a", "{}"), RequestedToolCall("b", "write_b", "{}")
    assert await wrapped.queue_calls(0, [a, b], {}, []) == [b]
    with pytest.raises(StepQueueFull):
        await wrapped.model_started(1, "model", [], 1)
    assert await steps(claimed, store) == {"tool:a": ("call_tool", "queued")}


async def test_what_is_not_a_step_is_forwarded_untouched(claimed: Claimed) -> None:
    wrapped, store = recorder(claimed)
    event = await wrapped.emit(events.memory_forgotten(claimed.turn.id, 1))
    assert event.type == EventType.MEMORY_FORGOTTEN
    assert event.data == {"turn_id": claimed.turn.id, "count": 1}
    assert await steps(claimed, store) == {}


async def test_a_tool_steps_result_refers_to_the_event_that_carries_it(claimed: Claimed) -> None:
    wrapped, store = recorder(claimed)
    ok, bad = RequestedToolCall("a", "read_a", "{}"), RequestedToolCall("b", "write_b", "{}")
    await wrapped.queue_calls(0, [ok, bad], {}, [])
    for call, result in ((ok, ToolResult.ok({"id": "a"})), (bad, ToolResult.fail("nope", "x"))):
        await wrapped.started(call)
        await wrapped.completed(call, result)
    await wrapped.settle()
    log = await claimed.turn_log()
    [completed, _] = [e for e in log if e.type == EventType.TOOL_COMPLETED]
    rows = await claimed.db.fetchall(
        "SELECT key, result FROM steps WHERE turn_id = ? ORDER BY seq", (claimed.turn.id,)
    )
    # Stored once more only where there is something to store: the failure has no result.
    assert [(key, result) for key, result in rows] == [
        ("tool:a", f'{{"$event":{completed.seq}}}'),
        ("tool:b", None),
    ]
    by_key = {s.key: s for s in await store.for_session("t", claimed.turn.session_id)}
    assert (
        by_key["tool:a"].result == completed.data["result"] == ToolResult.ok({"id": "a"}).to_dict()
    )
    # The step's end is stored right after the event, in its transaction.
    after = log[log.index(completed) + 1]
    assert after.type == EventType.STEP_UPDATED and after.data["status"] == "succeeded"
    assert after.data["key"] == "tool:a"
