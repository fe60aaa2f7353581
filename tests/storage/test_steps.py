"""Steps on both engines: a tool step's result stored as a reference to the event that holds it
reads back whole (and as a clear marker once that event is gone), older inline results and
schema references read as before, and `hermes export` writes referenced results out whole."""

from __future__ import annotations

import json
from typing import Any

from app import events
from app.storage.event_log import SESSION_KEY, EventStore
from app.storage.export import rows_due
from app.storage.port import Database
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.sessions import SessionStore
from app.storage.steps import (
    EVENT_GONE,
    NewStep,
    StepStore,
    TurnRef,
    enqueue_steps,
    event_ref,
    finish_step,
)
from app.storage.turns import TurnStore
from app.storage.tx import Tx
from tests.storage.test_purge import NOW, POLICY, archive
from tests.storage.test_usage import running_turn

RESULT = {"status": "success", "data": {"order": "202405201234", "state": "shipped"}}
SCHEMA = {"type": "object", "properties": {"state": {"type": "string"}}}


async def tool_step(db: Database, *, by_reference: bool = True) -> tuple[TurnRef, str, int]:
    """A session with a finished `call_tool` step whose `tool.completed` event (its seq) holds
    its result, stored by reference or (as rows of before) inline."""
    session_id = (await SessionStore(db).create("acme", "u1", {})).id
    turns = TurnStore(db)
    turn = await running_turn(turns, "acme", session_id)
    ref = TurnRef("acme", session_id, turn.id)

    def run(tx: Tx) -> tuple[str, int]:
        [step], _ = enqueue_steps(
            tx,
            ref,
            [NewStep("tool:c1", "call_tool", "query_order_status", {}, SCHEMA, status="running")],
            max_depth=50,
        )
        event = tx.emit(
            session_id,
            "acme",
            *events.tool_completed(turn.id, "c1", "query_order_status", "success", RESULT),
        )
        result = event_ref(event.seq) if by_reference else RESULT
        finish_step(tx, step.id, "succeeded", {"result": result})
        return step.id, event.seq

    step_id, seq = await turns.transact(SessionWriter(session_id), run)
    return ref, step_id, seq


async def stored_result(db: Database, step_id: str) -> Any:
    row = await db.fetchone("SELECT result FROM steps WHERE id = ?", (step_id,))
    return json.loads(row[0])


async def test_a_result_held_by_its_event_is_stored_once_and_read_whole(open_db: Any) -> None:
    db = await open_db()
    ref, step_id, seq = await tool_step(db)
    assert await stored_result(db, step_id) == {"$event": seq}
    store = StepStore(db)
    [listed] = await store.for_session("acme", ref.session_id)
    got = await store.get("acme", ref.session_id, step_id)
    assert listed.result == RESULT and got is not None and got.result == RESULT
    assert listed.expected_output_schema == SCHEMA  # stored as a 16-hex digest, read whole
    (digest,) = await db.fetchone(
        "SELECT expected_output_schema FROM steps WHERE id = ?", (step_id,)
    )
    assert len(json.loads(digest)) == 16
    payloads = await EventStore(db).payloads(ref.session_id, [seq, seq + 1000])
    assert list(payloads) == [seq] and payloads[seq]["result"] == RESULT


async def test_a_result_whose_event_is_gone_reads_as_a_marker(open_db: Any) -> None:
    db = await open_db()
    ref, _, seq = await tool_step(db)
    await db.write(
        SessionWriter(ref.session_id),
        lambda c: c.execute(
            f"DELETE FROM events WHERE session_key = {SESSION_KEY} AND seq = ?",
            (ref.session_id, seq),
        ),
    )
    [step] = await StepStore(db).for_session("acme", ref.session_id)
    assert step.result == {"$event": seq, "missing": EVENT_GONE}


async def test_rows_stored_before_read_as_they_did(open_db: Any) -> None:
    db = await open_db()
    ref, step_id, _ = await tool_step(db, by_reference=False)
    old_ref = {"$ref": "step_schemas/" + "ab" * 16}
    await db.write(
        NO_SESSION,
        lambda c: c.execute(
            "INSERT INTO step_schemas (digest, body) VALUES (?, ?)",
            ("ab" * 16, json.dumps({"old": True})),
        ),
    )
    await db.write(
        SessionWriter(ref.session_id),
        lambda c: c.execute(
            "UPDATE steps SET expected_output_schema = ? WHERE id = ?",
            (json.dumps(old_ref), step_id),
        ),
    )
    [step] = await StepStore(db).for_session("acme", ref.session_id)
    assert step.result == RESULT and step.expected_output_schema == {"old": True}


async def test_the_export_writes_a_referenced_result_whole(open_db: Any) -> None:
    db = await open_db()
    ref, step_id, _ = await tool_step(db)
    await TurnStore(db).transact(
        SessionWriter(ref.session_id),
        lambda tx: tx.execute("UPDATE turns SET status = 'completed' WHERE id = ?", (ref.turn_id,)),
    )
    await archive(db, ref.session_id, days_ago=40)
    rows = [row async for table, row in rows_due(db, POLICY, NOW) if table == "steps"]
    assert [json.loads(row["result"]) for row in rows] == [RESULT]
    assert await stored_result(db, step_id) != RESULT  # the stored row still refers
