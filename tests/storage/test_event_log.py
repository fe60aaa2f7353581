"""The event log on both engines: a completed turn's superseded events are deleted in the
transaction that stores its reply, and nothing of another turn or session is touched."""

from __future__ import annotations

from typing import Any, cast

from app import events
from app.storage.records import Event, Turn
from app.storage.session_writer import SessionWriter
from app.storage.tx import Tx
from tests.storage.test_turns import TENANT, Stores, accepted, stores  # noqa: F401 (a fixture)
from tests.storage.test_usage import running_turn


def _step(turn_id: str, step_id: str, status: str) -> events.NewEvent:
    return events.step_updated(
        turn_id,
        step_id,
        key=f"k-{step_id}",
        parent_id=None,
        action_type="call_tool",
        name="order_status",
        status=status,
        attempts=1,
        started_at=1.0,
        finished_at=None,
        error=None,
    )


def _a_turns_work(turn_id: str) -> list[events.NewEvent]:
    """What a turn with two steps and two tool calls announces before its reply."""
    return [
        _step(turn_id, "s1", "queued"),
        events.message_delta(turn_id, "one "),
        _step(turn_id, "s1", "running"),
        events.tool_started(turn_id, "c1", "order_status"),
        events.tool_completed(turn_id, "c1", "order_status", "ok", {"data": {"n": 1}}),
        _step(turn_id, "s1", "succeeded"),
        _step(turn_id, "s2", "running"),  # its only state
        events.tool_started(turn_id, "c2", "refund"),  # never completed
        events.message_delta(turn_id, "two"),
    ]


def _label(event: Event) -> tuple[str, str | None, Any]:
    data = event.data
    return (
        event.type,
        event.turn_id,
        data.get("step_id") or data.get("call_id") or data.get("text"),
    )


async def _emit(s: Stores, session_id: str, news: list[events.NewEvent]) -> None:
    def emit(tx: Tx) -> None:
        for new in news:
            tx.emit(session_id, TENANT, *new)

    await s.turns.transact(SessionWriter(session_id), emit)


async def _running(s: Stores, session_id: str) -> Turn:
    return cast(Turn, await running_turn(s.turns, TENANT, session_id))


async def test_a_completed_turns_superseded_events_are_deleted_and_no_other_rows(
    stores: Stores,  # noqa: F811 (the fixture)
) -> None:
    session_id = await stores.session()
    other_session = await stores.session()
    turn = await _running(stores, session_id)
    queued = (await accepted(stores, session_id, "and then?")).turn  # turn.queued: in between
    other = await _running(stores, other_session)
    await _emit(stores, session_id, _a_turns_work(turn.id))
    # A later turn's and another session's events of the same kinds, in the turn's seq range.
    await _emit(stores, session_id, [events.message_delta(queued.id, "not mine")])
    await _emit(stores, other_session, _a_turns_work(other.id))
    kept_elsewhere = await stores.events.after(other_session, 0)
    before = await stores.events.after(session_id, 0)
    last = await stores.events.last_seq(session_id)

    await stores.turns.complete(
        SessionWriter(turn.session_id),
        turn,
        text="one two",
        token_estimate=2,
        model="m",
        rounds=1,
        prompt_tokens=1,
        completion_tokens=1,
    )

    after = await stores.events.after(session_id, 0)
    assert [_label(e) for e in after] == [
        ("session.created", None, None),
        ("turn.started", turn.id, None),
        ("turn.queued", queued.id, None),
        ("tool.completed", turn.id, "c1"),  # its tool.started is gone
        ("step.updated", turn.id, "s1"),  # the last state of s1 only
        ("step.updated", turn.id, "s2"),
        ("tool.started", turn.id, "c2"),  # no completion: kept
        ("message.delta", queued.id, "not mine"),
        ("message.completed", turn.id, "one two"),
        ("turn.completed", turn.id, None),
    ]
    # What is left is stored as it was (byte for byte: same payloads, same ids) ...
    old = {e.seq: e for e in before}
    assert all(old[e.seq] == e for e in after if e.seq <= last)
    assert [e.data["status"] for e in after if e.type == "step.updated"] == [
        "succeeded",
        "running",
    ]
    # ... the ids still grow, with holes where the superseded events were ...
    seqs = [e.seq for e in after]
    assert seqs == sorted(seqs) and seqs[-1] == last + 2
    assert len(after) < seqs[-1]
    assert await stores.events.last_seq(session_id) == last + 2
    # ... and another session's running turn lost nothing.
    assert await stores.events.after(other_session, 0) == kept_elsewhere
