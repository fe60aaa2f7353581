"""The context budget on long scripted conversations: the goal survives, budgets hold."""

from __future__ import annotations

import json
import re

import pytest

from app.conversation.window import (
    ContextTurn,
    ExtractiveSummarizer,
    ModelSummarizer,
    WindowConfig,
    extractive_summary,
    fold,
    is_anchor,
    plan_context,
)
from app.llm.testing import Fail, Reply, ScriptedLLM
from app.settings import ContextSettings, ModelSettings
from app.text.tokens import estimate_message

SYSTEM = "You are Hermes, a customer-service assistant."
GOAL = "我要退掉订单 123456789012 里的耳机，并且退款到原支付方式"
CONSTRAINT = "不要给我打电话，只发邮件"
TEMPERATURE = ModelSettings().temperature_planning


def window(**context: float) -> WindowConfig:
    """The context budget with the default settings, changed by `context` (ContextSettings)."""
    return WindowConfig.from_settings(ContextSettings(**context))


def turn(n: int, user: str, *, tool_chars: int = 0, reply: str | None = None) -> ContextTurn:
    messages: list[dict] = [{"role": "user", "content": user}]
    if tool_chars:
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "order_lookup", "arguments": "{}"}}  # fmt: skip
        payload = json.dumps({"status": "success", "data": {"log": "x" * tool_chars}})
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"call_{n}",
                "name": "order_lookup",
                "content": payload,
            },
        ]
    messages.append({"role": "assistant", "content": reply or f"第{n}轮的回复：已经为您处理好了。"})
    return ContextTurn(n, messages)


def script(n: int) -> ContextTurn:
    """Turn n of a long support conversation: plain turns, tool-heavy turns, anchors."""
    if n == 1:
        return turn(1, GOAL)
    if n == 3:
        return turn(3, CONSTRAINT)
    if n % 7 == 0:
        return turn(n, f"昨天那个包裹现在到哪了？第{n}次问", tool_chars=900)
    return turn(
        n, f"第{n}轮：请帮我看一下物流进度和退款状态，谢谢。" * 2, tool_chars=600 if n % 2 else 0
    )


def all_text(messages: list[dict]) -> str:
    return "\n".join(m.get("content") or "" for m in messages)


def test_short_conversations_are_sent_whole():
    turns = [script(n) for n in range(1, 4)]
    plan = plan_context(SYSTEM, GOAL, "", turns, config=window())
    assert not plan.summarize and not plan.fold and plan.pruned_tools == 0
    assert plan.messages[0] == {"role": "system", "content": SYSTEM}
    assert GOAL in plan.messages[1]["content"]
    assert plan.messages[2:] == [m for t in turns for m in t.messages]
    assert plan.tokens == sum(estimate_message(m) for m in plan.messages)
    assert plan.summary_version == 0


async def test_goal_and_constraint_survive_forty_turns_and_budgets_hold():
    cfg = window(budget_tokens=4000, keep_turns=6)
    summarizer = ExtractiveSummarizer()
    summary, version, watermark = "", 0, 0
    pending: list[ContextTurn] = []
    folds, peak = 0, 0.0
    for n in range(1, 41):
        pending.append(script(n))
        plan = plan_context(SYSTEM, GOAL, summary, pending, summary_version=version, config=cfg)
        peak = max(peak, plan.usage)
        assert plan.tokens <= cfg.budget_tokens and not plan.over_budget
        if plan.summarize:
            folded = await fold(plan, summary, pending, summarizer, cfg)
            assert folded.summary_version == version + 1
            assert folded.summarized_turns > watermark
            summary, version, watermark = (
                folded.summary,
                folded.summary_version,
                folded.summarized_turns,
            )
            pending = folded.remaining
            folds += 1
            plan = plan_context(SYSTEM, GOAL, summary, pending, summary_version=version, config=cfg)
            assert plan.usage < cfg.summarize_at  # folding brings it back under 60 %
        # the last six turns are always there, whole
        recent = [m for t in [script(k) for k in range(max(1, n - 5), n + 1)] for m in t.messages]
        assert plan.messages[-len(recent) :] == recent
        text = all_text(plan.messages)
        assert GOAL in text  # never dropped
        if n >= 3:
            assert CONSTRAINT in text  # an anchor: in a kept turn or verbatim in the summary
    assert folds >= 3 and version == folds
    assert peak < cfg.compress_at  # summarised at 60 %, long before 85 %
    assert summary.startswith(f"Summary v{version} ") and f"! t3 user: {CONSTRAINT}" in summary
    assert estimate_message({"role": "system", "content": summary}) <= cfg.summary_tokens + 4


def test_old_tool_output_is_pruned_before_any_turn_is_dropped():
    cfg = window(budget_tokens=6000, keep_turns=2, compress_at=0.85)
    turns = [turn(n, f"第{n}个问题", tool_chars=4000) for n in range(1, 7)]
    plan = plan_context(SYSTEM, GOAL, "", turns, config=cfg)
    assert plan.usage > 1.0 and plan.summarize and plan.pruned_tools > 0 and plan.dropped == ()
    assert plan.tokens <= cfg.compress_at * cfg.budget_tokens
    stubs = [m for m in plan.messages if m["role"] == "tool" and "pruned" in m["content"]]
    assert stubs and all(
        "\n" not in m["content"] and "order_lookup success" in m["content"] for m in stubs
    )
    assert all(m["tool_call_id"] for m in stubs)  # the call/result pairing stays valid
    # the kept recent turns are whole
    assert plan.messages[-len(turns[-1].messages) :] == turns[-1].messages
    assert [m for m in plan.messages if m["role"] == "tool"][-2:] == [
        m for t in turns[-2:] for m in t.messages if m["role"] == "tool"
    ]


def test_without_a_fold_old_turns_are_left_out_anchors_and_neighbours_last():
    cfg = window(budget_tokens=2000, keep_turns=2)
    turns = [turn(n, f"普通问题{n}" + "。" * 200) for n in range(1, 11)]
    turns[4] = turn(5, "下周三之前必须送到" + "。" * 200)
    plan = plan_context(SYSTEM, GOAL, "", turns, config=cfg)
    assert plan.anchors == (5,)
    kept = {t.number for t in turns if t.messages[0] in plan.messages}
    assert {4, 5, 6} <= kept and {9, 10} <= kept  # the anchor with neighbours, the recent two
    assert plan.dropped and set(plan.dropped).isdisjoint({4, 5, 6})
    assert plan.tokens <= cfg.compress_at * cfg.budget_tokens


def test_the_fold_stops_before_anchors_when_that_is_enough():
    cfg = window(budget_tokens=2400, keep_turns=2)
    turns = [turn(n, f"普通问题{n}" + "。" * 150) for n in range(1, 9)]
    turns[4] = turn(5, "不要用中通" + "。" * 150)
    plan = plan_context(SYSTEM, GOAL, "", turns, config=cfg)
    assert 0.6 <= plan.usage < 0.85
    assert plan.summarize and plan.fold == (1, 2, 3)  # turn 4 neighbours the anchor
    assert plan.summary_version == 1


def test_urgent_when_the_window_is_past_compress_at():
    cfg = window(budget_tokens=2000, keep_turns=1)
    turns = [turn(n, "问题" + "。" * 400) for n in range(1, 6)]
    plan = plan_context(SYSTEM, None, "", turns, config=cfg, summary_version=4)
    assert plan.usage >= 0.85 and plan.summarize and plan.urgent
    assert plan.summary_version == 5 and plan.fold == (1, 2, 3, 4)


def test_last_resort_stubs_recent_tool_output_but_never_the_current_turn():
    cfg = window(budget_tokens=2000, keep_turns=3)
    turns = [turn(n, f"问题{n}", tool_chars=2500) for n in range(1, 4)]
    plan = plan_context(SYSTEM, GOAL, "", turns, config=cfg)
    tools = [m for m in plan.messages if m["role"] == "tool"]
    assert ["pruned" in m["content"] for m in tools] == [True, True, False]
    assert plan.over_budget == (plan.tokens > cfg.budget_tokens)


def test_extra_system_messages_count_and_are_kept():
    memory = {"role": "system", "content": "[Memory about this user] ..."}
    plan = plan_context(SYSTEM, GOAL, "earlier", [script(1)], config=window(), extra=[memory])
    assert plan.messages[3] == memory and "earlier" in plan.messages[2]["content"]


def test_extractive_summary_is_bounded_and_keeps_anchors_longest():
    turns = [turn(n, f"普通的第{n}个问题，关于物流" * 3) for n in range(1, 30)]
    turns[2] = turn(3, CONSTRAINT)
    text = extractive_summary("", turns, max_tokens=200, version=2)
    assert text.startswith("Summary v2 (extractive, through turn 29):")
    assert f"! t3 user: {CONSTRAINT}" in text and "t29" in text and "t4 " not in text
    assert estimate_message({"role": "user", "content": text}) <= 204
    merged = extractive_summary(text, [turn(30, "好的")], max_tokens=400, version=3)
    assert merged.startswith("Summary v3 ") and "t29" in merged and "t30" in merged


def test_fold_needs_something_to_fold():
    plan = plan_context(SYSTEM, GOAL, "", [script(1)], config=window())
    with pytest.raises(ValueError):
        import asyncio

        asyncio.run(fold(plan, "", [script(1)], ExtractiveSummarizer(), window()))


async def test_model_summarizer_uses_the_model_and_falls_back_offline():
    turns = [turn(1, GOAL), turn(2, CONSTRAINT)]
    model = ScriptedLLM(Reply("用户要退耳机并退款；不要打电话，只发邮件。"))
    text = await ModelSummarizer(model, TEMPERATURE).summarize("", turns, max_tokens=300, version=1)
    assert text == "Summary v1 (model, through turn 2):\n用户要退耳机并退款；不要打电话，只发邮件。"
    request = model.requests[0]
    assert request.tools is None and CONSTRAINT in request.messages[-1]["content"]
    failing = ScriptedLLM(Fail(503, "down"))
    text = await ModelSummarizer(failing, TEMPERATURE).summarize(
        "", turns, max_tokens=300, version=1
    )
    assert text.startswith("Summary v1 (extractive") and CONSTRAINT in text
    verbose = ScriptedLLM(Reply("很长的总结" * 500))
    text = await ModelSummarizer(verbose, TEMPERATURE).summarize(
        "", turns, max_tokens=300, version=1
    )
    assert text.startswith("Summary v1 (extractive")


@pytest.mark.parametrize(
    ("text", "anchor"),
    [("昨天买的耳机", True), ("那个订单呢", True), ("不要发短信", True),
     ("you must ship by Friday", True), ("only email me", True), ("查一下物流", False),
     ("thanks a lot", False), ("好的", False)],
)  # fmt: skip
def test_anchor_detection(text: str, anchor: bool):
    assert is_anchor(text) is anchor


async def test_a_model_summary_carries_its_scope_so_the_tenants_masking_applies():
    from app.llm.masked import MaskedModel
    from app.llm.pseudonyms import KINDS, MaskingPolicy

    phone = "13812345678"
    turns = [turn(1, f"请打 {phone} 联系我"), turn(2, CONSTRAINT)]
    model = ScriptedLLM()
    policy = MaskingPolicy.of("off", {"acme": "pseudonymise"}, KINDS)
    summarizer = ModelSummarizer(MaskedModel(model, policy), TEMPERATURE)
    scope = {"tenant_id": "acme", "session_id": "ses_1"}
    await summarizer.summarize("", turns, max_tokens=300, version=1, scope=scope)
    sent = model.requests[0]
    assert sent.metadata == scope
    tokens = re.findall(r"«PHONE_[A-Z2-9]+»", sent.messages[-1]["content"])
    assert len(tokens) == 1 and phone not in sent.messages[-1]["content"]
    # The model names the number by its token; the stored summary has the number.
    model.enqueue(Reply(f"用户电话 {tokens[0]}"))
    text = await summarizer.summarize("", turns, max_tokens=300, version=1, scope=scope)
    assert text.endswith(f"用户电话 {phone}")
    # Another tenant's summary (policy off) goes as it is.
    await summarizer.summarize("", turns, max_tokens=300, version=1, scope={"tenant_id": "x"})
    assert phone in model.requests[-1].messages[-1]["content"]
