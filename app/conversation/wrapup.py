"""Wrap-up: when a session ends, a contact summary (what the customer wanted, what was done and
with what result, what is still open) and a disposition code.

Written when the customer says goodbye, when an agent closes the session and when an idle
session is archived; stored (the latest per session) and announced as `session.summary`.
Built from the stored conversation alone, with no model call, so it costs little and reads the
same offline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from app.storage.handoffs import Handoff
from app.storage.records import Message

EndedBy = Literal["customer", "agent", "idle"]

# The codes a summary may carry when the agent gives none (an agent may give any short code).
DISPOSITIONS = (
    "resolved",  # tools ran and nothing is left open
    "informational",  # answered without any action
    "handled_by_agent",  # a human agent took the session over
    "callback_scheduled",  # nobody claimed the handoff: a call-back ticket was opened
    "unresolved",  # something is still open (an approval, a failed action, a question)
    "abandoned",  # the customer went quiet with a question of ours unanswered
)


@dataclass(frozen=True)
class Action:
    tool: str
    status: str
    result: str


def _tool_status(content: str | None) -> str:
    try:
        body = json.loads(content or "")
    except ValueError:
        return "ok"
    return str(body.get("status", "ok")) if isinstance(body, dict) else "ok"


def intents_of(messages: list[Message]) -> list[str]:
    """The customer's confident intents in the order they first came up."""
    seen: list[str] = []
    for message in messages:
        nlu = message.metadata.get("nlu") if message.role == "user" else None
        intent = nlu.get("intent") if isinstance(nlu, dict) and nlu.get("confident") else None
        if isinstance(intent, str) and intent not in seen:
            seen.append(intent)
    return seen


def actions_of(messages: list[Message]) -> list[Action]:
    return [
        Action(m.name or "tool", _tool_status(m.content), (m.content or "")[:300])
        for m in messages
        if m.role == "tool"
    ]


def open_items(
    messages: list[Message], pending_approvals: list[str], handoffs: list[Handoff]
) -> list[str]:
    items = [f"approval pending: {tool}" for tool in pending_approvals]
    items += [f"{a.tool} failed" for a in actions_of(messages) if a.status == "error"]
    last = handoffs[-1] if handoffs else None
    if last is not None and last.status == "waiting":
        items.append("waiting for a human agent")
    if last is not None and last.status == "expired":
        items.append(f"call the customer back (ticket {last.ticket_id})")
    said = [m for m in messages if m.role == "assistant" and m.content]
    if said and said[-1].content and said[-1].content.rstrip().endswith(("?", "？")):
        items.append(f"unanswered question: {said[-1].content.strip()[:200]}")
    return items


def disposition_of(
    ended_by: EndedBy, actions: list[Action], items: list[str], handoffs: list[Handoff]
) -> str:
    if any(h.status == "expired" for h in handoffs[-1:]):
        return "callback_scheduled"
    if any(h.claimed_by for h in handoffs):
        return "handled_by_agent"
    if ended_by == "idle" and any(i.startswith("unanswered question") for i in items):
        return "abandoned"
    if items:
        return "unresolved"
    return "resolved" if actions else "informational"


def describe(intents: list[str], actions: list[Action], items: list[str]) -> str:
    wanted = ", ".join(intents) or "no clear request"
    done = ", ".join(f"{a.tool} ({a.status})" for a in actions) or "no action"
    still = "; ".join(items) or "nothing"
    return f"Customer wanted: {wanted}. Done: {done}. Open: {still}."


def contact_summary(
    session_id: str,
    *,
    messages: list[Message],
    pending_approvals: list[str],
    handoffs: list[Handoff],
    ended_by: EndedBy,
    disposition: str | None,
    ended_at: float,
) -> dict[str, Any]:
    """The summary's wire body (GET /v1/sessions/{id}/summary, the `session.summary` event)."""
    intents = intents_of(messages)
    actions = actions_of(messages)
    items = open_items(messages, pending_approvals, handoffs)
    code = disposition or disposition_of(ended_by, actions, items, handoffs)
    return {
        "session_id": session_id,
        "intents": intents,
        "actions": [{"tool": a.tool, "status": a.status, "result": a.result} for a in actions],
        "open_items": items,
        "disposition": code,
        "text": f"{describe(intents, actions, items)} Disposition: {code}.",
        "ended_by": ended_by,
        "created_at": ended_at,
    }
