"""The event catalogue (app/events.py): the README names exactly its types, each type has one
builder whose payload keeps the wire shape (keys and their order), and no other module spells an
event type as a string."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import pytest

from app import events
from app.events import TERMINAL_TURN_EVENTS, EventType, NewEvent
from app.settings import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
NAMED = re.compile(r"`([a-z]+\.[a-z_]+)`")


def readme_event_types() -> set[str]:
    """The types the README's API section lists: a turn's SSE frames, and what else a session's
    stream carries (under "Following a session")."""
    turn = README.split("Types, in order of appearance:", 1)[1].split("\n* ", 1)[0]
    following = README.split("### Following a session", 1)[1].split("\n## ", 1)[0]
    return set(NAMED.findall(turn)) | set(NAMED.findall(following))


def test_the_readme_lists_every_event_type() -> None:
    assert {t.value for t in EventType} - readme_event_types() == set()


def test_the_readme_lists_no_event_type_the_catalogue_lacks() -> None:
    assert readme_event_types() - {t.value for t in EventType} == set()


T = "turn_1"

# One call of every builder, and the payload it must produce (key order included).
SAMPLES: list[tuple[NewEvent, dict[str, Any], str | None]] = [
    (events.session_created("ses_1"), {"session_id": "ses_1"}, None),
    (events.session_resumed("ses_1"), {"session_id": "ses_1"}, None),
    (events.session_archived("ses_1"), {"session_id": "ses_1"}, None),
    (events.turn_queued(T, 2), {"turn_id": T, "ahead": 2}, T),
    (events.turn_started(T, "msg_1"), {"turn_id": T, "user_message_id": "msg_1"}, T),
    (
        events.intent_classified(T, "msg_1", {"intent": "refund", "confident": True}),
        {"turn_id": T, "message_id": "msg_1", "intent": "refund", "confident": True},
        T,
    ),
    (events.memory_recalled(T, {"items": 1}), {"turn_id": T, "items": 1}, T),
    (events.memory_forgotten(T, 3), {"turn_id": T, "count": 3}, T),
    (
        events.knowledge_retrieved(T, "refund time", [{"document_id": "doc_1"}]),
        {"turn_id": T, "query": "refund time", "hits": [{"document_id": "doc_1"}]},
        T,
    ),
    (
        events.step_updated(
            T,
            "stp_1",
            key="tool:c1",
            parent_id=None,
            action_type="call_tool",
            name="lookup",
            status="running",
            attempts=1,
            started_at=1.5,
            finished_at=None,
            error=None,
        ),
        {
            "turn_id": T,
            "step_id": "stp_1",
            "key": "tool:c1",
            "parent_id": None,
            "action_type": "call_tool",
            "name": "lookup",
            "status": "running",
            "attempts": 1,
            "started_at": 1.5,
            "finished_at": None,
            "error": None,
        },
        T,
    ),
    (events.message_delta(T, "Hi"), {"turn_id": T, "text": "Hi"}, T),
    (
        events.tool_started(T, "c1", "lookup"),
        {"turn_id": T, "call_id": "c1", "tool": "lookup", "status": "running"},
        T,
    ),
    (
        events.tool_completed(T, "c1", "lookup", "success", {"status": "success"}),
        {
            "turn_id": T,
            "call_id": "c1",
            "tool": "lookup",
            "status": "success",
            "result": {"status": "success"},
        },
        T,
    ),
    (
        events.approval_requested(
            T,
            "apr_1",
            call_id="c1",
            tool="refund",
            arguments={"amount": 5},
            sensitive=[],
            reason="risk",
            expires_at=9.0,
        ),
        {
            "turn_id": T,
            "approval_id": "apr_1",
            "call_id": "c1",
            "tool": "refund",
            "arguments": {"amount": 5},
            "sensitive": [],
            "reason": "risk",
            "expires_at": 9.0,
        },
        T,
    ),
    (
        events.approval_resolved(
            T, "apr_1", call_id="c1", tool="refund", status="approved", reason=None
        ),
        {
            "turn_id": T,
            "approval_id": "apr_1",
            "call_id": "c1",
            "tool": "refund",
            "status": "approved",
            "reason": None,
        },
        T,
    ),
    (
        events.confirmation_requested(
            T, "cnf_1", call_id="c1", tool="refund", readback={"amount": "5"}, expires_at=9.0
        ),
        {
            "turn_id": T,
            "confirmation_id": "cnf_1",
            "call_id": "c1",
            "tool": "refund",
            "readback": {"amount": "5"},
            "expires_at": 9.0,
        },
        T,
    ),
    (
        events.confirmation_resolved(T, "cnf_1", call_id="c1", tool="refund", status="declined"),
        {
            "turn_id": T,
            "confirmation_id": "cnf_1",
            "call_id": "c1",
            "tool": "refund",
            "status": "declined",
        },
        T,
    ),
    (
        events.message_completed(T, "msg_2", "Done."),
        {"turn_id": T, "message_id": "msg_2", "text": "Done."},
        T,
    ),
    (
        events.turn_completed(
            T, "msg_2", model="m", rounds=1, prompt_tokens=10, completion_tokens=2
        ),
        {
            "turn_id": T,
            "message_id": "msg_2",
            "model": "m",
            "rounds": 1,
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
        },
        T,
    ),
    (
        events.turn_failed(T, "llm_timeout", "too slow"),
        {"turn_id": T, "code": "llm_timeout", "message": "too slow"},
        T,
    ),
    (
        events.message_received("msg_4", "hello?"),
        {"message_id": "msg_4", "author": "customer", "text": "hello?"},
        None,
    ),
    (
        events.handoff_requested(
            "hof_1", reason="asked", requested_by="customer", position=2, expected_wait_s=240.0
        ),
        {
            "handoff_id": "hof_1",
            "reason": "asked",
            "requested_by": "customer",
            "position": 2,
            "expected_wait_s": 240.0,
        },
        None,
    ),
    (
        events.handoff_claimed("hof_1", "key_abc", 12.34567),
        {"handoff_id": "hof_1", "agent": "key_abc", "waited_s": 12.346},
        None,
    ),
    (
        events.handoff_released("hof_1", "key_abc", "released"),
        {"handoff_id": "hof_1", "agent": "key_abc", "status": "released"},
        None,
    ),
    (
        events.handoff_expired("hof_1", "CB-1"),
        {"handoff_id": "hof_1", "ticket_id": "CB-1"},
        None,
    ),
    (
        events.suggestion_ready("sug_1", "Sorry!", "msg_4"),
        {"suggestion_id": "sug_1", "text": "Sorry!", "for_message_id": "msg_4"},
        None,
    ),
    (
        events.session_summary({"session_id": "ses_1", "disposition": "resolved"}),
        {"session_id": "ses_1", "disposition": "resolved"},
        None,
    ),
]


def test_every_type_has_a_builder() -> None:
    assert sorted(e.type for e, _, _ in SAMPLES) == sorted(EventType)


@pytest.mark.parametrize(("event", "payload", "turn_id"), SAMPLES, ids=lambda v: str(v)[:40])
def test_builders_keep_the_wire_shape(
    event: NewEvent, payload: dict[str, Any], turn_id: str | None
) -> None:
    assert list(event.data.items()) == list(payload.items())  # the order is on the wire too
    assert event.turn_id == turn_id
    assert json.dumps(event.data) == json.dumps(payload)


def test_optional_parts_appear_only_when_given() -> None:
    resumed = events.turn_started(T, "msg_1", "stp_9")
    assert resumed.data == {"turn_id": T, "user_message_id": "msg_1", "resumed_from_step": "stp_9"}
    followup = events.message_completed(T, "msg_3", "Still there?", {"followup": "ask_user"})
    assert list(followup.data) == ["turn_id", "message_id", "text", "followup"]
    agent = events.desk_message(None, "msg_5", "Hi, Ana here", "agent", {"agent": "key_abc"})
    assert agent.type == EventType.MESSAGE_COMPLETED and agent.turn_id is None
    assert list(agent.data.items()) == [
        ("turn_id", None),
        ("message_id", "msg_5"),
        ("text", "Hi, Ana here"),
        ("author", "agent"),
        ("agent", "key_abc"),
    ]


def test_types_are_their_wire_strings() -> None:
    assert f"{EventType.TURN_FAILED}" == "turn.failed" == EventType("turn.failed")
    assert json.dumps({"type": EventType.TOOL_STARTED}) == '{"type": "tool.started"}'
    assert "turn.completed" in TERMINAL_TURN_EVENTS and "turn.failed" in TERMINAL_TURN_EVENTS


def test_no_module_but_the_catalogue_spells_an_event_type() -> None:
    """Event types come from `EventType`, never as string literals elsewhere in app/."""
    wire = {t.value for t in EventType}
    found = []
    for path in sorted((PROJECT_ROOT / "app").rglob("*.py")):
        if path == PROJECT_ROOT / "app" / "events.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in wire:
                found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {node.value}")
    assert found == []
