"""The messages a model call sees: system prompt, goal, snapshot summary, extra notes (NLU
system notes; recalled memory as a quoted `user` block), and the conversation within the
token budget (folded into the summary when it grows; see `app.conversation.window`).

Planning is pure; folding (`ContextBuilder.summarise`) is a separate, named step because it may
call a model, and its result is stored by the turn (its Plan stage, app/conversation/turn/plan.py)
with the rest of the snapshot."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from app.conversation.window import (
    ContextPlan,
    ContextTurn,
    Summarizer,
    WindowConfig,
    fold,
    plan_context,
)
from app.llm.messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCallPart,
    ToolMessage,
)
from app.storage.records import Message, Snapshot

log = logging.getLogger(__name__)


def system_messages(system_prompt: str, snapshot: Snapshot | None) -> list[SystemMessage]:
    out: list[SystemMessage] = [{"role": "system", "content": system_prompt}]
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
) -> list[ChatMessage]:
    """Recent messages in the chat shape, made consistent for the model.

    A window may start in the middle of a tool exchange, and a turn that failed may have left
    tool calls without results; both would be rejected by providers. Leading orphan tool
    results are dropped and unanswered calls get an explicit "not executed" result, except
    those in `leave_open` (a resumed turn is about to run them).
    """
    out: list[ChatMessage] = []
    start = 0
    while start < len(messages) and messages[start].role == "tool":
        start += 1
    window = messages[start:]
    for i, message in enumerate(window):
        out.append(chat_message(message))
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


def chat_message(message: Message) -> ChatMessage:
    """A stored message in the chat shape the model is sent."""
    # Tool calls are stored as the model sent them (`RequestedToolCall.as_message_part`); user,
    # system and tool messages are never stored without content.
    match message.role:
        case "assistant":
            assistant: AssistantMessage = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                assistant["tool_calls"] = cast(list[ToolCallPart], message.tool_calls)
            return assistant
        case "tool":
            tool: ToolMessage = {
                "role": "tool",
                "content": message.content or "",
                "tool_call_id": message.tool_call_id or "",
            }
            if message.name:
                tool["name"] = message.name
            return tool
        case "user":
            return {"role": "user", "content": message.content or ""}
        case "system":
            return {"role": "system", "content": message.content or ""}


def _not_executed(call_id: str) -> ToolMessage:
    body = {
        "status": "error",
        "error": {"code": "not_executed", "message": "this call was not executed (the turn ended)"},
    }
    content = json.dumps(body, separators=(",", ":"))
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def flatten(turns: list[ContextTurn]) -> list[ChatMessage]:
    return [m for t in turns for m in t.messages]


@dataclass(frozen=True)
class Compaction:
    """Old turns folded into a new version of the snapshot's summary (see `summarise`): the
    snapshot fields that change, and the plan of the model call over what is left."""

    summary: str
    summary_version: int
    summarized_turns: int
    plan: ContextPlan

    def fields(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "summary_version": self.summary_version,
            "summarized_turns": self.summarized_turns,
        }


class ContextBuilder:
    """Plans each model call within the budget, in two explicit steps: `plan` is pure and
    cheap; when the plan says folding is due, `summarise` folds old turns into a new summary,
    which may call a model. Neither writes anything: the caller stores the new summary with the
    rest of the session's snapshot."""

    def __init__(self, system_prompt: str, config: WindowConfig, summarizer: Summarizer) -> None:
        self.system_prompt = system_prompt
        self.config = config
        self.summarizer = summarizer

    def plan(
        self, snapshot: Snapshot | None, turns: list[ContextTurn], extra: list[ChatMessage]
    ) -> ContextPlan:
        """What the model call would see; `plan.summarize` says `summarise` is due first."""
        return plan_context(
            self.system_prompt,
            snapshot.active_goal if snapshot else None,
            snapshot.summary if snapshot else "",
            turns,
            summary_version=snapshot.summary_version if snapshot else 0,
            config=self.config,
            extra=extra,
        )

    async def summarise(
        self,
        plan: ContextPlan,
        snapshot: Snapshot | None,
        turns: list[ContextTurn],
        extra: list[ChatMessage],
        scope: Mapping[str, str] | None = None,
    ) -> Compaction:
        """Fold the turns `plan` names into the summary (the summarizer may call a model, with
        `scope`: the tenant and session) and plan again over the turns left."""
        summary = snapshot.summary if snapshot else ""
        folded = await fold(plan, summary, turns, self.summarizer, self.config, scope)
        log.info(
            "folded turns up to %d into summary v%d",
            folded.summarized_turns,
            folded.summary_version,
        )
        replanned = plan_context(
            self.system_prompt,
            snapshot.active_goal if snapshot else None,
            folded.summary,
            folded.remaining,
            summary_version=folded.summary_version,
            config=self.config,
            extra=extra,
        )
        return Compaction(
            folded.summary, folded.summary_version, folded.summarized_turns, replanned
        )


def messages_of(plan: ContextPlan) -> list[ChatMessage]:
    """The plan's messages for the model call. Turns' messages are shared with the session's
    cached history: the model call (and whatever a provider library does to its input) gets
    copies."""
    return [m.copy() for m in plan.messages]
