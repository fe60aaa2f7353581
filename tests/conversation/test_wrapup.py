"""The contact summary is built from the stored conversation alone: intents, actions and their
results, open items, and a disposition when the agent gives none."""

from __future__ import annotations

import json
from typing import Any

from app.conversation.wrapup import DISPOSITIONS, contact_summary
from app.storage.handoffs import Handoff
from app.storage.records import Message


def msg(role: str, content: str, **extra: Any) -> Message:
    return Message(
        id=f"msg_{abs(hash((role, content)))}",
        session_id="ses_1",
        tenant_id="t",
        turn_id=None,
        role=role,  # type: ignore[arg-type]
        content=content,
        **extra,
    )


def asked(text: str, intent: str, confident: bool = True) -> Message:
    return msg("user", text, metadata={"nlu": {"intent": intent, "confident": confident}})


def tool(name: str, status: str) -> Message:
    return msg("tool", json.dumps({"status": status}), name=name)


def handoff(status: str, claimed_by: str | None = None, ticket: str | None = None) -> Handoff:
    return Handoff("hof_1", "ses_1", "t", status, "", "en", "customer", 1.0, claimed_by, None,
                   None, ticket)  # fmt: skip


def summary(messages: list[Message], **kw: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "pending_approvals": [],
        "handoffs": [],
        "ended_by": "customer",
        "disposition": None,
        "ended_at": 5.0,
        **kw,
    }
    return contact_summary("ses_1", messages=messages, **values)


def test_a_resolved_contact_names_its_intents_and_actions_in_order() -> None:
    body = summary(
        [
            asked("where is 202405201234", "order_status"),
            tool("query_order_status", "success"),
            msg("assistant", "It was delivered."),
            asked("ok", "affirm", confident=False),
            asked("where is 202405201234", "order_status"),
            asked("bye", "goodbye"),
            msg("assistant", "Goodbye!"),
        ]
    )
    assert body["intents"] == ["order_status", "goodbye"]
    assert [(a["tool"], a["status"]) for a in body["actions"]] == [
        ("query_order_status", "success")
    ]
    assert body["open_items"] == [] and body["disposition"] == "resolved"
    assert body["text"].startswith("Customer wanted: order_status, goodbye.")


def test_open_items_make_it_unresolved_and_an_unanswered_question_abandoned() -> None:
    messages = [asked("refund please", "refund_request"), tool("request_refund", "error")]
    body = summary(messages, pending_approvals=["send_email"])
    assert body["open_items"] == ["approval pending: send_email", "request_refund failed"]
    assert body["disposition"] == "unresolved"
    quiet = summary([asked("hi", "greeting"), msg("assistant", "Which order?")], ended_by="idle")
    assert quiet["disposition"] == "abandoned"
    assert quiet["open_items"] == ["unanswered question: Which order?"]
    assert summary([asked("hi", "greeting"), msg("assistant", "Hello.")])["disposition"] == (
        "informational"
    )


def test_handoffs_and_the_agents_own_code_decide_the_disposition() -> None:
    messages = [asked("a person please", "human_handoff")]
    expired = summary(messages, handoffs=[handoff("expired", ticket="CB-1")])
    assert expired["disposition"] == "callback_scheduled"
    assert "call the customer back (ticket CB-1)" in expired["open_items"]
    handled = summary(messages, handoffs=[handoff("released", claimed_by="key_a")])
    assert handled["disposition"] == "handled_by_agent"
    own = summary(messages, handoffs=[handoff("closed", "key_a")], disposition="refund_promised")
    assert own["disposition"] == "refund_promised" and own["ended_by"] == "customer"


def test_every_disposition_hermes_chooses_is_one_of_the_documented_codes() -> None:
    asked_for = [asked("a person please", "human_handoff")]
    chosen = {
        summary([asked("hi", "greeting"), msg("assistant", "Hello.")])["disposition"],
        summary([asked("hi", "greeting"), msg("assistant", "Which order?")], ended_by="idle")[
            "disposition"
        ],
        summary([asked("x", "refund_request"), tool("request_refund", "error")])["disposition"],
        summary([asked("x", "order_status"), tool("query_order_status", "success")])["disposition"],
        summary(asked_for, handoffs=[handoff("expired", ticket="CB-1")])["disposition"],
        summary(asked_for, handoffs=[handoff("released", claimed_by="key_a")])["disposition"],
    }
    assert chosen == set(DISPOSITIONS)
