from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.conversation.tokens import estimate_message, estimate_tokens
from app.errors import UpstreamLLMError
from app.llm.gateway import ModelRequest, StreamEnd, StreamItem, TextDelta, ToolCallDelta, collect
from app.llm.litellm_gateway import LiteLLMGateway, ModelConfig
from app.llm.local import templates as t
from app.llm.local.provider import (
    LOCAL_MODEL,
    HermesLocalLLM,
    LocalModelConfig,
    litellm,
    register,
    split_text,
    unregister,
    with_local_fallback,
)
from app.llm.local.testing import ScriptedParser
from app.llm.testing import Fail, FakeLLMServer
from tests.llm.local.chat import SHIPPED_ORDER, success, tool_call, tool_result, user

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
    p.add("我的订单到哪了", "order_status")
    p.add(f"我的订单{ORDER}到哪了", "order_status", order_id=ORDER)
    p.add(f"Where is order {ORDER}?", "order_status", order_id=ORDER)
    return p


@pytest.fixture
def local(parser: ScriptedParser) -> Iterator[HermesLocalLLM]:
    yield register(parser)


@pytest.fixture
def gateway(local: HermesLocalLLM) -> LiteLLMGateway:
    return LiteLLMGateway(ModelConfig(LOCAL_MODEL), retries=0)


async def stream(
    gateway: LiteLLMGateway, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> list[StreamItem]:
    return [item async for item in gateway.stream(ModelRequest(messages=messages, tools=tools))]


def prompt_estimate(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    total = sum(estimate_message(m) for m in messages)
    return total + (estimate_tokens(json.dumps(tools, ensure_ascii=False)) if tools else 0)


async def test_streams_text_in_several_chunks_with_usage(gateway: LiteLLMGateway) -> None:
    messages = [user("我的订单到哪了")]
    items = await stream(gateway, messages, TOOLS)
    pieces = [i.text for i in items if isinstance(i, TextDelta)]
    expected = t.ASK["order_status"]["order_id"]["zh"]
    assert len(pieces) >= 2
    assert "".join(pieces) == expected
    end = items[-1]
    assert isinstance(end, StreamEnd) and end.finish_reason == "stop"
    assert end.prompt_tokens == prompt_estimate(messages, TOOLS)
    assert end.completion_tokens == estimate_tokens(expected)


async def test_streams_a_tool_call_in_the_openai_shape(gateway: LiteLLMGateway) -> None:
    messages = [user(f"我的订单{ORDER}到哪了")]
    items = await stream(gateway, messages, TOOLS)
    assert not [i for i in items if isinstance(i, TextDelta) and i.text]
    calls = [i for i in items if isinstance(i, ToolCallDelta)]
    assert len(calls) == 1
    call = calls[0]
    assert call.id and call.id.startswith("call_")
    assert call.name == "query_order_status"
    assert json.loads(call.arguments) == {"order_id": ORDER}
    end = items[-1]
    assert isinstance(end, StreamEnd) and end.finish_reason == "tool_calls"
    assert end.prompt_tokens == prompt_estimate(messages, TOOLS)
    assert end.completion_tokens > 0


async def test_answers_a_tool_result_through_the_gateway(gateway: LiteLLMGateway) -> None:
    messages = [
        user(f"Where is order {ORDER}?"),
        tool_call("query_order_status", {"order_id": ORDER}),
        tool_result("call_1", success(SHIPPED_ORDER)),
    ]
    reply = await collect(gateway.stream(ModelRequest(messages=messages, tools=TOOLS)))
    assert reply.tool_calls == []
    assert reply.text.startswith(f"Your order {ORDER} is shipped.")
    assert "SF123456789CN" in reply.text


async def test_a_tool_that_is_not_offered_is_not_called(gateway: LiteLLMGateway) -> None:
    reply = await collect(gateway.stream(ModelRequest(messages=[user(f"Where is order {ORDER}?")])))
    assert reply.tool_calls == []
    assert reply.text == t.HANDOFF["tool_not_offered"]["en"]


async def test_non_streaming_answers_carry_the_tool_call_model_and_usage(
    local: HermesLocalLLM,
) -> None:
    router = litellm.Router(
        model_list=[{"model_name": "m", "litellm_params": {"model": LOCAL_MODEL}}]
    )
    messages = [user(f"我的订单{ORDER}到哪了")]
    response = await router.acompletion(model="m", messages=messages, tools=TOOLS)
    assert response.model == LOCAL_MODEL
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "query_order_status"
    assert json.loads(call.function.arguments) == {"order_id": ORDER}
    assert response.usage.prompt_tokens == prompt_estimate(messages, TOOLS)


async def test_streamed_answers_name_the_model_in_the_hidden_params(
    local: HermesLocalLLM,
) -> None:
    router = litellm.Router(
        model_list=[{"model_name": "m", "litellm_params": {"model": LOCAL_MODEL}}]
    )
    response = await router.acompletion(
        model="m",
        messages=[user("我的订单到哪了")],
        stream=True,
        stream_options={"include_usage": True},
    )
    assert response._hidden_params["litellm_model_name"] == LOCAL_MODEL
    chunks = [chunk async for chunk in response]
    assert chunks[-1].usage.completion_tokens == estimate_tokens(
        t.ASK["order_status"]["order_id"]["zh"]
    )


def test_sync_completion_and_streaming_work(local: HermesLocalLLM) -> None:
    router = litellm.Router(
        model_list=[{"model_name": "m", "litellm_params": {"model": LOCAL_MODEL}}]
    )
    messages = [user("我的订单到哪了")]
    expected = t.ASK["order_status"]["order_id"]["zh"]
    full = router.completion(model="m", messages=messages)
    assert full.choices[0].message.content == expected
    streamed = router.completion(model="m", messages=messages, stream=True)
    pieces = [
        c.choices[0].delta.content for c in streamed if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) >= 2 and "".join(pieces) == expected


async def test_register_replaces_the_handler_instead_of_adding_one(parser: ScriptedParser) -> None:
    register(parser)
    other = ScriptedParser()
    other.add("我的订单到哪了", "human_handoff")
    handler = register(other)
    entries = [e for e in litellm.custom_provider_map if e["provider"] == "hermes"]
    assert len(entries) == 1 and entries[0]["custom_handler"] is handler
    gateway = LiteLLMGateway(ModelConfig(LOCAL_MODEL), retries=0)
    reply = await collect(gateway.stream(ModelRequest(messages=[user("我的订单到哪了")])))
    assert reply.text == t.HANDOFF["human_handoff"]["zh"]


async def test_the_threshold_comes_from_the_config(parser: ScriptedParser) -> None:
    parser.add("呃", "order_status", 0.6)
    register(parser, LocalModelConfig(min_confidence=0.7))
    gateway = LiteLLMGateway(ModelConfig(LOCAL_MODEL), retries=0)
    reply = await collect(gateway.stream(ModelRequest(messages=[user("呃")])))
    assert reply.text == t.HANDOFF["low_confidence"]["zh"]


async def test_an_unknown_hermes_model_fails(local: HermesLocalLLM) -> None:
    gateway = LiteLLMGateway(ModelConfig("hermes/other"), retries=0)
    with pytest.raises(UpstreamLLMError):
        await collect(gateway.stream(ModelRequest(messages=[user("我的订单到哪了")])))


async def test_the_local_model_answers_when_the_remote_model_fails(
    local: HermesLocalLLM, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(*[Fail(500)] * 5, model="remote-model")
    gateway = LiteLLMGateway(
        ModelConfig("openai/remote-model", fake_llm.url, "sk-test"),
        [ModelConfig(LOCAL_MODEL)],
        retries=0,
    )
    reply = await collect(gateway.stream(ModelRequest(messages=[user("我的订单到哪了")])))
    assert fake_llm.requests_for("remote-model"), "the remote model was never tried"
    assert reply.text == t.ASK["order_status"]["order_id"]["zh"]


def test_split_text_keeps_every_character() -> None:
    for text in (t.GREETING["zh"], t.GREETING["en"], "x" * 50, "", "短"):
        pieces = split_text(text, 12)
        assert "".join(pieces) == text
        assert all(0 < len(p) <= 24 for p in pieces)


def test_unregister_removes_only_its_own_handler(parser: ScriptedParser) -> None:
    old = register(parser)
    new = register(parser)
    unregister(old)
    assert [
        e["custom_handler"] for e in litellm.custom_provider_map if e["provider"] == "hermes"
    ] == [new]
    unregister(new)
    assert not [e for e in litellm.custom_provider_map if e["provider"] == "hermes"]


def test_the_local_model_is_appended_as_the_last_fallback_once() -> None:
    remote, backup = ModelConfig("openai/a"), ModelConfig("openai/b")
    assert [f.model for f in with_local_fallback(remote, [backup])] == ["openai/b", LOCAL_MODEL]
    assert with_local_fallback(ModelConfig(LOCAL_MODEL), []) == []
    chain = [backup, ModelConfig(LOCAL_MODEL)]
    assert with_local_fallback(remote, chain) == chain
