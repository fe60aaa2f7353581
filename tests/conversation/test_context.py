"""History handed to the model is always consistent: no orphan tool results, no unanswered calls."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from app.conversation.context import (
    ContextBuilder,
    chat_message,
    history_messages,
    messages_of,
    system_messages,
)
from app.conversation.window import ContextTurn, ExtractiveSummarizer, WindowConfig
from app.settings import ContextSettings
from app.storage.records import Message, Snapshot
from tests.conversation.test_window import GOAL, SYSTEM, script


def msg(role: str, content: str | None = None, **kw: object) -> Message:
    return Message(
        id="m",
        session_id="s",
        tenant_id="t",
        turn_id="x",
        role=role,
        content=content,
        **kw,  # type: ignore[arg-type]
    )


def call(call_id: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_leading_orphan_tool_results_are_dropped() -> None:
    history = [msg("tool", "r", tool_call_id="c0"), msg("user", "hi"), msg("assistant", "hello")]
    assert [m["role"] for m in history_messages(history)] == ["user", "assistant"]


def test_unanswered_calls_get_an_explicit_not_executed_result() -> None:
    history = [
        msg("user", "do two things"),
        msg("assistant", None, tool_calls=[call("c1"), call("c2")]),
        msg("tool", "ok", tool_call_id="c1"),
        msg("user", "hello?"),
    ]
    out = history_messages(history)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    synthetic = [m for m in out if m["role"] == "tool" and m["tool_call_id"] == "c2"]
    assert json.loads(synthetic[0]["content"])["error"]["code"] == "not_executed"


def test_summary_is_added_after_the_system_prompt() -> None:
    snap = Snapshot(session_id="s", tenant_id="t", summary="User wants a refund.")
    out = system_messages("SYSTEM", snap)
    assert out[0] == {"role": "system", "content": "SYSTEM"}
    assert "User wants a refund." in out[1]["content"]
    assert system_messages("SYSTEM", None) == [{"role": "system", "content": "SYSTEM"}]


class CountingSummarizer:
    """The extractive summarizer, counting its calls (a model-backed one would call a model)."""

    def __init__(self) -> None:
        self.calls = 0

    async def summarize(
        self,
        previous: str,
        turns: Sequence[ContextTurn],
        *,
        max_tokens: int,
        version: int,
        scope: Mapping[str, str] | None = None,
    ) -> str:
        self.calls += 1
        return await ExtractiveSummarizer().summarize(
            previous, turns, max_tokens=max_tokens, version=version
        )


async def test_planning_is_pure_and_summarising_is_its_own_step() -> None:
    summarizer = CountingSummarizer()
    builder = ContextBuilder(
        SYSTEM,
        WindowConfig.from_settings(ContextSettings(budget_tokens=4000, keep_turns=2)),
        summarizer,
    )
    snap = Snapshot(session_id="s", tenant_id="t", active_goal=GOAL)
    turns = [script(n) for n in range(1, 41)]
    plan = builder.plan(snap, turns, [])
    assert plan.summarize and summarizer.calls == 0  # planning never calls a model
    compaction = await builder.summarise(plan, snap, turns, [])
    assert summarizer.calls == 1
    assert compaction.fields() == {
        "summary": compaction.summary,
        "summary_version": 1,
        "summarized_turns": max(plan.fold),
    }
    assert compaction.plan.summary_version == 1 and not compaction.plan.over_budget
    sent = messages_of(compaction.plan)
    assert sent == compaction.plan.messages and sent[0] is not compaction.plan.messages[0]


def test_stored_messages_take_the_chat_shape_the_model_is_sent() -> None:
    calls = [call("c1")]
    assert chat_message(msg("user", "hi")) == {"role": "user", "content": "hi"}
    assert chat_message(msg("assistant", "hello")) == {"role": "assistant", "content": "hello"}
    assert chat_message(msg("assistant", None, tool_calls=calls)) == {
        "role": "assistant",
        "content": None,
        "tool_calls": calls,
    }
    assert chat_message(msg("tool", "ok", tool_call_id="c1", name="f")) == {
        "role": "tool",
        "content": "ok",
        "tool_call_id": "c1",
        "name": "f",
    }
    # A tool message stored without a name gets no `name` key at all (not a null one).
    assert "name" not in chat_message(msg("tool", "ok", tool_call_id="c1"))
