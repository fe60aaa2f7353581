"""What a turn changes in its session's snapshot, and the one way it is written.

The snapshot (summary, active goal, state, completed steps) changes twice in a turn: when old
turns are folded into a new summary before the model is called (`ContextBuilder.summarise`),
and when the turn completes. Both go through `store_fields`, as writes of the turn itself
(`DeferredWrites`): the fold is deferred to the turn's next write (or stored when the turn
ends, however it ends), the rest inside the transaction that completes the turn.

The goal and the understood slots are copies of the customer's words kept beside the
conversation (and shown to the model as notes): they are stored masked, like a tool call's
arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.conversation.transcript import StoredTranscript
from app.conversation.understanding import Understanding
from app.storage.records import Snapshot, Turn
from app.storage.snapshots import update_snapshot
from app.storage.tx import Tx
from app.tools.policy import Taint
from app.tools.shaping import Redactor

_GOAL_CHARS = 500
_COMPLETED_STEPS_KEPT = 20
_UNTRUSTED_KEPT = 10


def store_fields(session_id: str, fields: dict[str, Any]) -> Callable[[Tx], None]:
    """The write that stores `fields` in the session's snapshot, for the turn's writes."""
    return lambda tx: update_snapshot(tx, session_id, **fields)


def turn_end_fields(
    turn: Turn,
    snapshot: Snapshot | None,
    user_text: str,
    transcript: StoredTranscript,
    understanding: Understanding | None,
    taint: Taint,
    redactor: Redactor,
) -> dict[str, Any]:
    """The fields a completed turn changes: the goal (its first), the steps it completed, the
    intent and slots it understood, and lasting taint."""
    fields: dict[str, Any] = {}
    if snapshot is None or not snapshot.active_goal:
        fields["active_goal"] = redactor.text(user_text[:_GOAL_CHARS])
    if transcript.steps:
        done = (snapshot.completed_steps if snapshot else []) + transcript.steps
        fields["completed_steps"] = done[-_COMPLETED_STEPS_KEPT:]
    state = dict(snapshot.state) if snapshot else {}
    state["last_turn"] = turn.number
    if taint.lasting:  # untrusted tool output stays in the conversation: so does its taint
        state["untrusted"] = taint.lasting[-_UNTRUSTED_KEPT:]
    if understanding is not None:
        state["intent"] = understanding.result.intent
        slots = dict(state.get("slots", {}))
        slots.update({s.name: redactor.text(s.value) for s in understanding.result.slots})
        state["slots"] = slots
    fields["state"] = state
    return fields
