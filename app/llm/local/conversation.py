"""Read an OpenAI-shaped conversation into what the offline policy needs.

The policy keeps no state between calls: everything it knows comes from the messages. This
module splits them into user turns (each with the assistant text the user was answering) and
the tool exchanges of the current turn (calls after the last user message, with their results).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Recalled memory comes as a `user` message of this name (app.memory.prompt.MESSAGE_NAME):
# quoted notes from earlier sessions, not something the user said in this conversation.
MEMORY_MESSAGE = "hermes_memory"


@dataclass(frozen=True)
class UserTurn:
    text: str
    after: str  # the last assistant text before this message ("" if none)


@dataclass(frozen=True)
class Outcome:
    """A tool result as the model sees it: `{"status", "data"}` or `{"status", "error"}`."""

    status: str  # success | error | fallback | unreadable
    data: Any = None
    error_code: str = ""
    approved: bool = False  # an operator approved the call before it ran


@dataclass(frozen=True)
class Exchange:
    call_id: str
    name: str
    arguments: dict[str, Any] | None  # None when the arguments were not a JSON object
    outcome: Outcome | None  # None while no result has arrived

    def key(self) -> tuple[str, str] | None:
        return None if self.arguments is None else call_key(self.name, self.arguments)


@dataclass(frozen=True)
class Conversation:
    user_turns: list[UserTurn]
    exchanges: list[Exchange]  # of the current turn, in call order
    last_is_tool: bool

    def last_result(self) -> Exchange | None:
        answered = [e for e in self.exchanges if e.outcome is not None]
        return answered[-1] if answered else None


def call_key(name: str, arguments: dict[str, Any]) -> tuple[str, str]:
    return name, json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def text_of(content: Any) -> str:
    """Message content as plain text; content may be a string or a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def read(messages: Sequence[Mapping[str, Any]]) -> Conversation:
    turns: list[UserTurn] = []
    last_assistant = ""
    last_user = -1
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "user" and message.get("name") == MEMORY_MESSAGE:
            continue
        if role == "user":
            turns.append(UserTurn(text_of(message.get("content")).strip(), last_assistant))
            last_user = i
        elif role == "assistant":
            text = text_of(message.get("content")).strip()
            if text:
                last_assistant = text
    tail = messages[last_user + 1 :] if last_user >= 0 else []
    last_is_tool = bool(messages) and messages[-1].get("role") == "tool"
    return Conversation(turns, _exchanges(tail), last_is_tool)


def _exchanges(tail: Sequence[Mapping[str, Any]]) -> list[Exchange]:
    calls: dict[str, tuple[str, dict[str, Any] | None]] = {}
    order: list[str] = []
    results: dict[str, Outcome] = {}
    for message in tail:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                call_id = str(call.get("id") or f"anon_{len(order)}")
                calls[call_id] = (str(fn.get("name") or ""), _arguments(fn.get("arguments")))
                order.append(call_id)
        elif message.get("role") == "tool":
            results[str(message.get("tool_call_id"))] = parse_outcome(message.get("content"))
    return [Exchange(cid, *calls[cid], results.get(cid)) for cid in order]


def _arguments(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def parse_outcome(content: Any) -> Outcome:
    try:
        body = json.loads(text_of(content))
    except ValueError:
        return Outcome("unreadable")
    if not isinstance(body, dict) or body.get("status") not in ("success", "error", "fallback"):
        return Outcome("unreadable")
    error = body.get("error")
    code = str(error.get("code") or "") if isinstance(error, dict) else ""
    return Outcome(str(body["status"]), body.get("data"), code, body.get("approval") == "approved")


def earlier_results(messages: Sequence[Mapping[str, Any]], tool: str) -> list[Exchange]:
    """Successful results of `tool` from turns before the last user message, oldest first."""
    last_user = max(
        (
            i
            for i, m in enumerate(messages)
            if m.get("role") == "user" and m.get("name") != MEMORY_MESSAGE
        ),
        default=-1,
    )
    found = _exchanges(messages[:last_user] if last_user >= 0 else [])
    return [e for e in found if e.name == tool and e.outcome and e.outcome.status == "success"]
