"""What a turn records as it runs, and what a retried turn finds of it.

`StoredTranscript` stores the turn's tool calls and results as messages while the loop runs. Nothing
waits for these writes: each is deferred and stored with the turn's next one (the next step or
the turn's end); the rows stored come back once that commits and are kept for the session's
cached view.

A call's arguments are stored masked, as its step input and its approval show them; the message
lists the calls whose arguments the masking changed (`masked_calls`). A retried turn never runs
such a call from its stored copy: it takes the real arguments from where Hermes holds them to
run them (the call's approval or confirmation), or leaves the call unexecuted for the model to
ask again from the customer's own words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.conversation.loop import Resume
from app.llm.gateway import RequestedToolCall
from app.storage.deferred import DeferredWrites
from app.storage.records import Message, Turn
from app.storage.turns import turn_message
from app.text.tokens import estimate_tokens
from app.tools.results import ToolResult
from app.tools.shaping import Redactor


class StoredTranscript:
    """The turn's tool calls and results, as messages (see the module docstring)."""

    def __init__(self, writes: DeferredWrites, turn: Turn, redactor: Redactor) -> None:
        self._writes = writes
        self._turn = turn
        self._redactor = redactor
        self._stored: list[Message] = []  # handed back as each carrying transaction commits
        self.count = 0
        self.steps: list[dict[str, Any]] = []
        self.results: list[tuple[RequestedToolCall, ToolResult]] = []

    @property
    def written(self) -> list[Message]:
        """The rows stored so far (committed), in transcript order: the turn's writes commit
        in the order they were sent."""
        return list(self._stored)

    def _defer(self, role: str, content: str | None, token_estimate: int, **extra: Any) -> None:
        turn = self._turn
        self._writes.defer(
            lambda tx: turn_message(tx, turn, role, content, token_estimate, **extra),
            self._stored.append,
        )
        self.count += 1

    async def assistant_calls(self, text: str, calls: list[RequestedToolCall]) -> None:
        stored = [replace(c, arguments=self._redactor.arguments(c.arguments)) for c in calls]
        masked = [c.id for c, s in zip(calls, stored, strict=True) if s.arguments != c.arguments]
        self._defer(
            "assistant",
            text or None,
            estimate_tokens(text) + sum(estimate_tokens(c.arguments) for c in calls),
            tool_calls=[c.as_message_part() for c in stored],
            **({"metadata": {"masked_calls": masked}} if masked else {}),
        )

    async def tool_result(self, call: RequestedToolCall, result: ToolResult) -> None:
        content = result.model_content()
        self._defer(
            "tool",
            content,
            estimate_tokens(content),
            tool_call_id=call.id,
            name=call.name,
            metadata={"status": result.status},
        )
        self.results.append((call, result))
        self.steps.append(
            {
                "turn": self._turn.number,
                "tool": call.name,
                "call_id": call.id,
                "status": result.status,
            }
        )


def resume_point(turn: Turn, history: list[Message], held: Mapping[str, dict[str, Any]]) -> Resume:
    """What a retried turn already has: its recorded tool rounds and any calls left unanswered.

    `held` holds real arguments by call id (see the module docstring); a masked call without
    them is not resumed, so it gets a "not executed" result and the model may ask again."""
    own = [m for m in history if m.turn_id == turn.id]
    rounds = sum(1 for m in own if m.role == "assistant" and m.tool_calls)
    answered = {m.tool_call_id for m in own if m.role == "tool"}
    pending: list[RequestedToolCall] = []
    for message in reversed(own):
        if message.role == "assistant" and message.tool_calls:
            masked = set((message.metadata or {}).get("masked_calls", ()))
            for c in message.tool_calls:
                call = RequestedToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                if call.id in answered:
                    continue
                if call.id in masked:
                    if call.id not in held:
                        continue
                    call = replace(call, arguments=json.dumps(held[call.id], ensure_ascii=False))
                pending.append(call)
            break
    return Resume(pending_calls=pending, rounds_used=rounds)
