"""What a resumed turn runs of its stored, masked tool calls: the real arguments where Hermes
holds them, the stored ones where masking changed nothing, and nothing from a masked copy."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.conversation.emitter import TurnEmitter
from app.conversation.transcript import StoredTranscript, resume_point
from app.llm.gateway import RequestedToolCall
from app.storage.records import Message, Turn
from app.storage.session_writer import SessionWriter
from app.storage.tx import Tx
from app.tools.results import ToolResult
from app.tools.shaping import Redactor
from tests.conversation.test_emitter import Claimed, claimed_turn
from tests.storage.batches import one_batch, submitted

PHONE = "13912345678"


def _turn() -> Turn:
    return Turn(
        id="turn_1",
        session_id="ses_1",
        tenant_id="t",
        number=1,
        client_message_id=None,
        user_message_id="msg_1",
        status="running",
        assistant_message_id=None,
        error_code=None,
        error_message=None,
        accepted_seq=1,
        model=None,
        rounds=0,
        prompt_tokens=0,
        completion_tokens=0,
        created_at=0.0,
        started_at=0.0,
        finished_at=None,
        resume_from_step="stp_1",
    )


def _call(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "update_contact_info", "arguments": json.dumps(arguments)},
    }


def _history() -> list[Message]:
    calls = [
        _call("c_held", {"value": "139****5678"}),
        _call("c_lost", {"value": "139****5678"}),
        _call("c_plain", {"field": "address"}),
        _call("c_done", {"value": "139****5678"}),
    ]
    return [
        Message("m1", "ses_1", "t", "turn_1", "user", f"my number is {PHONE}", 1),
        Message(
            "m2",
            "ses_1",
            "t",
            "turn_1",
            "assistant",
            None,
            1,
            tool_calls=calls,
            metadata={"masked_calls": ["c_held", "c_lost", "c_done"]},
        ),
        Message("m3", "ses_1", "t", "turn_1", "tool", "{}", 1, tool_call_id="c_done"),
    ]


def test_a_resumed_turn_runs_real_arguments_or_none() -> None:
    held = {"c_held": {"value": PHONE}}
    resume = resume_point(_turn(), _history(), held)
    pending = {c.id: json.loads(c.arguments) for c in resume.pending_calls}
    # Held: what the call started (or was approved, or confirmed) with.
    assert pending["c_held"] == {"value": PHONE}
    # Nothing sensitive in it: the stored copy is the call.
    assert pending["c_plain"] == {"field": "address"}
    # Masked and held nowhere (it never started): not run from a masked copy; the model gets
    # "not executed" and may ask again from the customer's words.
    assert "c_lost" not in pending
    assert "c_done" not in pending  # answered already
    assert resume.rounds_used == 1


@pytest.fixture
async def claimed(tmp_path: Path) -> AsyncIterator[Claimed]:
    found = await claimed_turn(tmp_path / "hermes.db")
    yield found
    await found.db.close()


async def test_a_transcript_knows_only_the_rows_that_committed(claimed: Claimed) -> None:
    """The transcript learns the rows it stored from the transaction that carried them, after
    that commits: an attempt of the batch that was rolled back leaves nothing behind. (Written
    from the writer thread as each attempt ran, it kept a row of an attempt rolled back, when
    the carrying write then failed.)"""
    writes = TurnEmitter(claimed.turns, SessionWriter(claimed.turn.session_id), claimed.turn).writes
    transcript = StoredTranscript(writes, claimed.turn, Redactor())
    call = RequestedToolCall("c1", "lookup", "{}")
    await transcript.tool_result(call, ToolResult.ok({"n": 1}))  # rides with the next write
    runs = itertools.count()

    def carrier(tx: Tx) -> None:
        # Its second run fails, as one whose lease was taken over between the two would.
        if next(runs):
            raise RuntimeError("the lease moved")

    def batchmate(tx: Tx) -> None:
        raise ValueError("no")  # the batch runs again, each job in a savepoint

    async with one_batch(claimed.db, writes.writer):
        carried, failed = await submitted(
            writes.now(carrier), claimed.turns.transact(writes.writer, batchmate)
        )
    with pytest.raises(RuntimeError):
        await carried
    with pytest.raises(ValueError):
        await failed

    stored = await claimed.db.fetchall("SELECT id FROM messages WHERE role = 'tool'")
    assert stored == [] and transcript.written == []
