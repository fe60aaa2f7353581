"""`hermes/local` as a `ChatModel`: streamed pieces, tool calls in the OpenAI shape, usage
estimates, its name on the stream, and its place at the end of the chain."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.llm.build import build_chain
from app.llm.catalog import LOCAL_MODEL, ModelApi, ModelConfig, with_local_fallback
from app.llm.gateway import ModelRequest, StreamEnd, StreamItem, TextDelta, ToolCallDelta, collect
from app.llm.local import templates as t
from app.llm.local.model import LocalModel, LocalModelConfig, split_text
from app.llm.retry import RetryPolicy
from app.llm.testing import Fail, FakeLLMServer
from app.nlu.testing import ScriptedParser
from app.text.tokens import estimate_message, estimate_tokens
from tests.llm.local.chat import SHIPPED_ORDER, success, tool_call, tool_result, user
from tests.llm.paths import chain_options

ORDER = "202405201234"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "query_order_status",
            "description": "Look up an order by its 12-digit id.",
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"order_id": {"type": "string", "pattern": "^\\d{12}$"}},
                "required": ["order_id"],
            },
        },
    }
]


@pytest.fixture
def parser() -> ScriptedParser:
    p = ScriptedParser()
    p.on("我的订单到哪了", "order_status")
    p.on(f"我的订单{ORDER}到哪了", "order_status", slots={"order_id": ORDER})
    p.on(f"Where is order {ORDER}?", "order_status", slots={"order_id": ORDER})
    return p


@pytest.fixture
def local(parser: ScriptedParser) -> LocalModel:
    return LocalModel(parser)


async def stream(
    model: LocalModel, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> list[StreamItem]:
    return [item async for item in model.stream(ModelRequest(messages=messages, tools=tools))]


def prompt_estimate(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    total = sum(estimate_message(m) for m in messages)
    return total + (estimate_tokens(json.dumps(tools, ensure_ascii=False)) if tools else 0)


async def test_streams_text_in_several_pieces_with_usage_and_its_name(local: LocalModel) -> None:
    messages = [user("我的订单到哪了")]
    items = await stream(local, messages, TOOLS)
    pieces = [i.text for i in items if isinstance(i, TextDelta)]
    expected = t.ASK["order_status"]["order_id"]["zh"]
    assert len(pieces) >= 2
    assert "".join(pieces) == expected
    end = items[-1]
    assert isinstance(end, StreamEnd) and end.finish_reason == "stop"
    assert end.model == LOCAL_MODEL
    assert end.prompt_tokens == prompt_estimate(messages, TOOLS)
    assert end.completion_tokens == estimate_tokens(expected)


async def test_streams_a_tool_call_in_the_openai_shape(local: LocalModel) -> None:
    messages = [user(f"我的订单{ORDER}到哪了")]
    items = await stream(local, messages, TOOLS)
    assert not [i for i in items if isinstance(i, TextDelta) and i.text]
    calls = [i for i in items if isinstance(i, ToolCallDelta)]
    assert len(calls) == 1
    call = calls[0]
    assert call.index == 0
    assert call.id and call.id.startswith("call_")
    assert call.name == "query_order_status"
    assert json.loads(call.arguments) == {"order_id": ORDER}
    end = items[-1]
    assert isinstance(end, StreamEnd) and end.finish_reason == "tool_calls"
    assert end.model == LOCAL_MODEL
    assert end.prompt_tokens == prompt_estimate(messages, TOOLS)
    assert end.completion_tokens == estimate_tokens(call.name + call.arguments)


async def test_answers_a_tool_result(local: LocalModel) -> None:
    messages = [
        user(f"Where is order {ORDER}?"),
        tool_call("query_order_status", {"order_id": ORDER}),
        tool_result("call_1", success(SHIPPED_ORDER)),
    ]
    reply = await collect(local.stream(ModelRequest(messages=messages, tools=TOOLS)))
    assert reply.tool_calls == []
    assert reply.text.startswith(f"Your order {ORDER} is shipped.")
    assert "SF123456789CN" in reply.text


async def test_a_tool_that_is_not_offered_is_not_called(local: LocalModel) -> None:
    reply = await collect(local.stream(ModelRequest(messages=[user(f"Where is order {ORDER}?")])))
    assert reply.tool_calls == []
    assert reply.text == t.HANDOFF["tool_not_offered"]["en"]


async def test_the_threshold_comes_from_the_config(parser: ScriptedParser) -> None:
    parser.on("呃", "order_status", 0.6)
    model = LocalModel(parser, LocalModelConfig(min_confidence=0.7))
    reply = await collect(model.stream(ModelRequest(messages=[user("呃")])))
    assert reply.text == t.HANDOFF["low_confidence"]["zh"]


@pytest.mark.parametrize("api", ["openai", "litellm"])
async def test_the_local_model_answers_last_when_the_remote_model_fails(
    parser: ScriptedParser, fake_llm: FakeLLMServer, api: ModelApi
) -> None:
    fake_llm.enqueue(*[Fail(500)] * 5, model="remote-model")
    chain = build_chain(
        [ModelConfig("openai/remote-model", fake_llm.url, "sk-test"), ModelConfig(LOCAL_MODEL)],
        chain_options(api, retry=RetryPolicy(retries=0, backoff_s=0, backoff_max_s=0)),
        parser=parser,
    )
    items = [i async for i in chain.stream(ModelRequest(messages=[user("我的订单到哪了")]))]
    await chain.aclose()
    assert len(fake_llm.requests_for("remote-model")) == 1, "the remote model was not tried once"
    assert (
        "".join(i.text for i in items if isinstance(i, TextDelta))
        == (t.ASK["order_status"]["order_id"]["zh"])
    )
    end = items[-1]
    assert isinstance(end, StreamEnd) and end.model == LOCAL_MODEL
    assert end.route is not None and end.route.answered_by == LOCAL_MODEL


def test_split_text_keeps_every_character() -> None:
    for text in (t.GREETING["zh"], t.GREETING["en"], "x" * 50, "", "短"):
        pieces = split_text(text, 12)
        assert "".join(pieces) == text
        assert all(0 < len(p) <= 24 for p in pieces)


def test_the_local_model_is_appended_as_the_last_fallback_once() -> None:
    remote, backup = ModelConfig("openai/a"), ModelConfig("openai/b")
    assert [f.model for f in with_local_fallback(remote, [backup])] == ["openai/b", LOCAL_MODEL]
    assert with_local_fallback(ModelConfig(LOCAL_MODEL), []) == []
    chain = [backup, ModelConfig(LOCAL_MODEL)]
    assert with_local_fallback(remote, chain) == chain
