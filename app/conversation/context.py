"""The messages a model call sees: system prompt, snapshot summary, recent conversation."""

from __future__ import annotations

import json
from typing import Any

from app.storage.records import Message, Snapshot


def system_messages(system_prompt: str, snapshot: Snapshot | None) -> list[dict[str, Any]]:
    out = [{"role": "system", "content": system_prompt}]
    if snapshot is not None and snapshot.summary:
        out.append(
            {
                "role": "system",
                "content": "Summary of the earlier part of this conversation:\n" + snapshot.summary,
            }
        )
    return out


def history_messages(
    messages: list[Message], *, leave_open: set[str] | frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """Recent messages in the chat shape, made consistent for the model.

    A window may start in the middle of a tool exchange, and a turn that failed may have left
    tool calls without results; both would be rejected by providers. Leading orphan tool
    results are dropped and unanswered calls get an explicit "not executed" result, except
    those in `leave_open` (a resumed turn is about to run them).
    """
    out: list[dict[str, Any]] = []
    start = 0
    while start < len(messages) and messages[start].role == "tool":
        start += 1
    window = messages[start:]
    for i, message in enumerate(window):
        out.append(message.to_llm())
        if message.role != "assistant" or not message.tool_calls:
            continue
        answered = set()
        for later in window[i + 1 :]:
            if later.role != "tool":
                break
            answered.add(later.tool_call_id)
        for call in message.tool_calls:
            if call["id"] not in answered and call["id"] not in leave_open:
                out.append(_not_executed(call["id"]))
    return out


def _not_executed(call_id: str) -> dict[str, Any]:
    body = {
        "status": "error",
        "error": {"code": "not_executed", "message": "this call was not executed (the turn ended)"},
    }
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(body)}
