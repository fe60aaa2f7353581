"""The catalogue of session events: every type that goes on the wire, and the one function that
builds each one's payload.

Events are the SSE protocol (`event: <type>`, `data: <json>`), replayed from the database for as
long as a session lives, so a payload's keys and their order are part of the protocol. Whoever
announces something (storage inside the transaction that changes the state, the turn's emitter
for streamed text and tool progress) asks this module for the event and only persists what it
gets back. It sits at the bottom of the layer order, beside `errors` and `settings`, so every
package may use it; it knows nothing of records, tools or models, only plain values.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple


class EventType(StrEnum):
    """Every event type a session's stream can carry (README's list is checked against it)."""

    SESSION_CREATED = "session.created"
    SESSION_RESUMED = "session.resumed"
    SESSION_ARCHIVED = "session.archived"
    TURN_QUEUED = "turn.queued"
    TURN_STARTED = "turn.started"
    INTENT_CLASSIFIED = "intent.classified"
    MEMORY_RECALLED = "memory.recalled"
    MEMORY_FORGOTTEN = "memory.forgotten"
    KNOWLEDGE_RETRIEVED = "knowledge.retrieved"
    STEP_UPDATED = "step.updated"
    MESSAGE_DELTA = "message.delta"
    TOOL_STARTED = "tool.started"
    TOOL_COMPLETED = "tool.completed"
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_RESOLVED = "approval.resolved"
    CONFIRMATION_REQUESTED = "confirmation.requested"
    CONFIRMATION_RESOLVED = "confirmation.resolved"
    MESSAGE_COMPLETED = "message.completed"
    TURN_COMPLETED = "turn.completed"
    TURN_FAILED = "turn.failed"
    MESSAGE_RECEIVED = "message.received"
    HANDOFF_REQUESTED = "handoff.requested"
    HANDOFF_CLAIMED = "handoff.claimed"
    HANDOFF_RELEASED = "handoff.released"
    HANDOFF_EXPIRED = "handoff.expired"
    SUGGESTION_READY = "suggestion.ready"
    SESSION_SUMMARY = "session.summary"


# A turn's stream ends with one of these.
TERMINAL_TURN_EVENTS = frozenset({EventType.TURN_COMPLETED, EventType.TURN_FAILED})


class NewEvent(NamedTuple):
    """An event to append to a session's log: its type, payload and the turn it belongs to.
    The fields are `Tx.emit`'s last three parameters, in order."""

    type: EventType
    data: dict[str, Any]
    turn_id: str | None = None


# -- the session ----------------------------------------------------------------------------------


def session_created(session_id: str) -> NewEvent:
    return NewEvent(EventType.SESSION_CREATED, {"session_id": session_id})


def session_resumed(session_id: str) -> NewEvent:
    """An archived session got a new message and is active again."""
    return NewEvent(EventType.SESSION_RESUMED, {"session_id": session_id})


def session_archived(session_id: str) -> NewEvent:
    return NewEvent(EventType.SESSION_ARCHIVED, {"session_id": session_id})


# -- a turn's life --------------------------------------------------------------------------------


def turn_queued(turn_id: str, ahead: int) -> NewEvent:
    """The turn waits behind `ahead` open turns of its session."""
    return NewEvent(EventType.TURN_QUEUED, {"turn_id": turn_id, "ahead": ahead}, turn_id)


def turn_started(
    turn_id: str, user_message_id: str, resumed_from_step: str | None = None
) -> NewEvent:
    data: dict[str, Any] = {"turn_id": turn_id, "user_message_id": user_message_id}
    if resumed_from_step:
        data["resumed_from_step"] = resumed_from_step
    return NewEvent(EventType.TURN_STARTED, data, turn_id)


def turn_completed(
    turn_id: str,
    message_id: str,
    *,
    model: str | None,
    rounds: int,
    prompt_tokens: int,
    completion_tokens: int,
) -> NewEvent:
    data = {
        "turn_id": turn_id,
        "message_id": message_id,
        "model": model,
        "rounds": rounds,
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    return NewEvent(EventType.TURN_COMPLETED, data, turn_id)


def turn_failed(turn_id: str, code: str, message: str) -> NewEvent:
    data = {"turn_id": turn_id, "code": code, "message": message}
    return NewEvent(EventType.TURN_FAILED, data, turn_id)


# -- what the turn found out ----------------------------------------------------------------------


def intent_classified(turn_id: str, message_id: str, understanding: dict[str, Any]) -> NewEvent:
    """What the NLU made of the user's message (`understanding`: intent, slots, confidence)."""
    data = {"turn_id": turn_id, "message_id": message_id, **understanding}
    return NewEvent(EventType.INTENT_CLASSIFIED, data, turn_id)


def memory_recalled(turn_id: str, recall: dict[str, Any]) -> NewEvent:
    """What the user's memory contributed to the turn (`recall`: memory's own summary of it)."""
    return NewEvent(EventType.MEMORY_RECALLED, {"turn_id": turn_id, **recall}, turn_id)


def memory_forgotten(turn_id: str, count: int) -> NewEvent:
    """The user asked to forget; `count` stored items were deleted for good."""
    return NewEvent(EventType.MEMORY_FORGOTTEN, {"turn_id": turn_id, "count": count}, turn_id)


def knowledge_retrieved(turn_id: str, query: str, hits: list[dict[str, Any]]) -> NewEvent:
    """What a knowledge search of the turn found (`hits`: document_id, chunk_id, title, section,
    score), best first; an empty list when nothing passed the threshold."""
    return NewEvent(
        EventType.KNOWLEDGE_RETRIEVED, {"turn_id": turn_id, "query": query, "hits": hits}, turn_id
    )


# -- the reply ------------------------------------------------------------------------------------


def message_delta(turn_id: str, text: str) -> NewEvent:
    return NewEvent(EventType.MESSAGE_DELTA, {"turn_id": turn_id, "text": text}, turn_id)


def message_completed(
    turn_id: str, message_id: str, text: str, extra: dict[str, Any] | None = None
) -> NewEvent:
    """An assistant message is stored: the turn's reply, or a follow-up the service added
    (`extra`: its metadata, e.g. why it was added)."""
    data = {"turn_id": turn_id, "message_id": message_id, "text": text, **(extra or {})}
    return NewEvent(EventType.MESSAGE_COMPLETED, data, turn_id)


# What a completed turn's log no longer needs once its final message is stored: the events
# another event of the turn supersedes, deleted in the transaction that stores the final message
# (app/storage/event_log.py; README "Following a session"). Every `message.delta` (that
# `message.completed` carries the whole reply is why the deletion waits for it); and each event
# of a type here for which a later event of the turn, of the type it maps to, has the same value
# under the key: each step's `step.updated` but its last (the step's final state), each
# `tool.started` whose `tool.completed` is stored (the call's tool, status and result). Their
# sequence numbers are not reused: a finished turn's replay has holes where they were.
SUPERSEDED_BY: dict[EventType, tuple[EventType, str]] = {
    EventType.STEP_UPDATED: (EventType.STEP_UPDATED, "step_id"),
    EventType.TOOL_STARTED: (EventType.TOOL_COMPLETED, "call_id"),
}


# -- steps and tools ------------------------------------------------------------------------------


def step_updated(
    turn_id: str,
    step_id: str,
    *,
    key: str,
    parent_id: str | None,
    action_type: str,
    name: str,
    status: str,
    attempts: int,
    started_at: float | None,
    finished_at: float | None,
    error: dict[str, Any] | None,
) -> NewEvent:
    data = {
        "turn_id": turn_id,
        "step_id": step_id,
        "key": key,
        "parent_id": parent_id,
        "action_type": action_type,
        "name": name,
        "status": status,
        "attempts": attempts,
        # Milliseconds are what anyone reads from these (the steps API has the full times).
        "started_at": _ms(started_at),
        "finished_at": _ms(finished_at),
        "error": error,
    }
    return NewEvent(EventType.STEP_UPDATED, data, turn_id)


def _ms(at: float | None) -> float | None:
    return None if at is None else round(at, 3)


# Fields stored only when they are not null (most steps have no parent and no error): a reader
# puts them back, as null and in their place (`as_sent`), so a replayed event is the live one
# byte for byte. A payload without every other field (a step state shrunk in place by an older
# Hermes) is left as it is.
_STEP_FIELDS = (
    "turn_id",
    "step_id",
    "key",
    "parent_id",
    "action_type",
    "name",
    "status",
    "attempts",
    "started_at",
    "finished_at",
    "error",
)
_NULL_NOT_STORED: dict[EventType, tuple[tuple[str, ...], frozenset[str]]] = {
    EventType.STEP_UPDATED: (_STEP_FIELDS, frozenset({"parent_id", "error"})),
}


def at_rest(type: EventType, data: dict[str, Any]) -> dict[str, Any]:
    """The payload as it is stored: without the fields `as_sent` puts back."""
    spec = _NULL_NOT_STORED.get(type)
    if spec is None:
        return data
    _order, optional = spec
    return {k: v for k, v in data.items() if not (v is None and k in optional)}


def as_sent(type: EventType, data: dict[str, Any]) -> dict[str, Any]:
    """A stored payload (its turn id already in front) as it went on the wire."""
    spec = _NULL_NOT_STORED.get(type)
    if spec is None:
        return data
    order, optional = spec
    if any(k not in data for k in order if k not in optional) or len(data) >= len(order):
        return data
    return {k: data.get(k) for k in order}


def tool_started(turn_id: str, call_id: str, tool: str) -> NewEvent:
    data = {"turn_id": turn_id, "call_id": call_id, "tool": tool, "status": "running"}
    return NewEvent(EventType.TOOL_STARTED, data, turn_id)


def tool_completed(
    turn_id: str, call_id: str, tool: str, status: str, result: dict[str, Any]
) -> NewEvent:
    """`status` and `result` are the tool result's (`ToolResult.to_dict()` for `result`)."""
    data = {
        "turn_id": turn_id,
        "call_id": call_id,
        "tool": tool,
        "status": status,
        "result": result,
    }
    return NewEvent(EventType.TOOL_COMPLETED, data, turn_id)


# -- waiting for a person -------------------------------------------------------------------------


def approval_requested(
    turn_id: str,
    approval_id: str,
    *,
    call_id: str,
    tool: str,
    arguments: dict[str, Any],
    sensitive: list[dict[str, Any]],
    reason: str,
    expires_at: float,
) -> NewEvent:
    """An operator must decide on a call; `arguments` as the operator may see them (masked)."""
    data = {
        "turn_id": turn_id,
        "approval_id": approval_id,
        "call_id": call_id,
        "tool": tool,
        "arguments": arguments,
        "sensitive": sensitive,
        "reason": reason,
        "expires_at": expires_at,
    }
    return NewEvent(EventType.APPROVAL_REQUESTED, data, turn_id)


def approval_resolved(
    turn_id: str,
    approval_id: str,
    *,
    call_id: str,
    tool: str,
    status: str,
    reason: str | None,
) -> NewEvent:
    data = {
        "turn_id": turn_id,
        "approval_id": approval_id,
        "call_id": call_id,
        "tool": tool,
        "status": status,
        "reason": reason,
    }
    return NewEvent(EventType.APPROVAL_RESOLVED, data, turn_id)


def confirmation_requested(
    turn_id: str,
    confirmation_id: str,
    *,
    call_id: str,
    tool: str,
    readback: dict[str, str],
    expires_at: float,
) -> NewEvent:
    """The customer must confirm a call; `readback` is what they are asked to confirm."""
    data = {
        "turn_id": turn_id,
        "confirmation_id": confirmation_id,
        "call_id": call_id,
        "tool": tool,
        "readback": readback,
        "expires_at": expires_at,
    }
    return NewEvent(EventType.CONFIRMATION_REQUESTED, data, turn_id)


def confirmation_resolved(
    turn_id: str, confirmation_id: str, *, call_id: str, tool: str, status: str
) -> NewEvent:
    data = {
        "turn_id": turn_id,
        "confirmation_id": confirmation_id,
        "call_id": call_id,
        "tool": tool,
        "status": status,
    }
    return NewEvent(EventType.CONFIRMATION_RESOLVED, data, turn_id)


# -- a human agent --------------------------------------------------------------------------------


def message_received(message_id: str, text: str, author: str = "customer") -> NewEvent:
    """A customer's message while a human agent holds the session: stored, no bot turn."""
    data = {"message_id": message_id, "author": author, "text": text}
    return NewEvent(EventType.MESSAGE_RECEIVED, data)


def desk_message(
    turn_id: str | None, message_id: str, text: str, author: str, extra: dict[str, Any]
) -> NewEvent:
    """A message not written by a turn: the human agent's (`author` "agent") or the service's
    own about the handoff (`author` "bot": position in the queue, the fallback)."""
    data = {"turn_id": turn_id, "message_id": message_id, "text": text, "author": author, **extra}
    return NewEvent(EventType.MESSAGE_COMPLETED, data, turn_id)


def handoff_requested(
    handoff_id: str, *, reason: str, requested_by: str, position: int, expected_wait_s: float
) -> NewEvent:
    data = {
        "handoff_id": handoff_id,
        "reason": reason,
        "requested_by": requested_by,
        "position": position,
        "expected_wait_s": expected_wait_s,
    }
    return NewEvent(EventType.HANDOFF_REQUESTED, data)


def handoff_claimed(handoff_id: str, agent: str, waited_s: float) -> NewEvent:
    data = {"handoff_id": handoff_id, "agent": agent, "waited_s": round(waited_s, 3)}
    return NewEvent(EventType.HANDOFF_CLAIMED, data)


def handoff_released(handoff_id: str, agent: str, status: str) -> NewEvent:
    """`status`: "released" (back to the bot) or "closed" (the session ended with it)."""
    return NewEvent(
        EventType.HANDOFF_RELEASED, {"handoff_id": handoff_id, "agent": agent, "status": status}
    )


def handoff_expired(handoff_id: str, ticket_id: str) -> NewEvent:
    """Nobody claimed the handoff in time: a call-back ticket was opened instead."""
    return NewEvent(EventType.HANDOFF_EXPIRED, {"handoff_id": handoff_id, "ticket_id": ticket_id})


def suggestion_ready(suggestion_id: str, text: str, for_message_id: str | None) -> NewEvent:
    """A reply the bot drafted for the human agent; never sent on its own."""
    data = {"suggestion_id": suggestion_id, "text": text, "for_message_id": for_message_id}
    return NewEvent(EventType.SUGGESTION_READY, data)


def session_summary(summary: dict[str, Any]) -> NewEvent:
    """The contact summary written when the session ended (the body of GET .../summary)."""
    return NewEvent(EventType.SESSION_SUMMARY, summary)
