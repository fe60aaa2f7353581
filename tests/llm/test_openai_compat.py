"""The direct OpenAI-compatible client against the real fake model server, side by side with
the LiteLLM path: the same stream items, the same failure codes, one shared client per server."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.llm.catalog import Direct, ModelConfig, route
from app.llm.clients import ModelClients
from app.llm.failures import ModelFailure
from app.llm.gateway import ChatModel, ModelRequest, StreamItem, TextDelta, collect
from app.llm.litellm_gateway import LiteLLMModel
from app.llm.openai_compat import OpenAICompatModel
from app.llm.testing import (
    BreakStream,
    Fail,
    FakeLLMServer,
    MalformedStream,
    Reply,
    Step,
    ToolCall,
    ToolCalls,
)
from app.settings import ModelSettings

REQUEST = ModelRequest(messages=[{"role": "user", "content": "where is my order?"}])
MODEL = ModelSettings()  # a service's defaults: timeouts, connections per server


@pytest.fixture
async def clients() -> AsyncIterator[ModelClients]:
    pool = ModelClients(max_connections=MODEL.max_connections, timeout_s=MODEL.timeout_s)
    yield pool
    assert pool.open_clients == 0, "a model kept its client open after aclose"


@pytest.fixture
async def models(
    fake_llm: FakeLLMServer, clients: ModelClients
) -> AsyncIterator[dict[str, ChatModel]]:
    """`openai/m` on the fake server, direct and through LiteLLM."""
    config = ModelConfig("openai/m", fake_llm.url, "sk-test")
    target = route(config)
    assert isinstance(target, Direct)
    both: dict[str, ChatModel] = {
        "direct": OpenAICompatModel("openai/m", target, clients),
        "litellm": LiteLLMModel(config, timeout_s=MODEL.timeout_s),
    }
    yield both
    for model in both.values():
        await model.aclose()


async def items_of(model: ChatModel, request: ModelRequest = REQUEST) -> list[StreamItem]:
    return [item async for item in model.stream(request)]


async def failure_of(model: ChatModel, request: ModelRequest = REQUEST) -> ModelFailure:
    with pytest.raises(ModelFailure) as info:
        await items_of(model, request)
    return info.value


@pytest.mark.parametrize(
    "step",
    [
        Reply("Your order has shipped, it arrives tomorrow.", usage=(21, 9)),
        ToolCalls(
            ToolCall("query_order_status", {"order_id": "202405201234"}, id="call_a"),
            ToolCall("track_shipment", {"tracking_number": "SF123456789CN"}, id="call_b"),
            text="Let me look.",
        ),
        ToolCalls(ToolCall("query_order_status", '{"order_id": "2024', id="call_bad")),
    ],
    ids=["text", "two-tool-calls", "malformed-arguments"],
)
async def test_both_paths_stream_the_same_items(
    fake_llm: FakeLLMServer, models: dict[str, ChatModel], step: Step
) -> None:
    seen = {}
    for path, model in models.items():
        fake_llm.enqueue(step, model="m")
        seen[path] = await items_of(model)
    assert seen["direct"] == seen["litellm"]
    reply = await collect(_replay(seen["direct"]))
    if isinstance(step, Reply):
        assert reply.text == step.text and reply.finish_reason == "stop"
        assert (reply.prompt_tokens, reply.completion_tokens) == (21, 9)
    else:
        assert isinstance(step, ToolCalls)
        assert reply.finish_reason == "tool_calls"
        assert [(c.id, c.name) for c in reply.tool_calls] == [(c.id, c.name) for c in step.calls]
        raw = [c.arguments if isinstance(c.arguments, str) else None for c in step.calls]
        if raw[0] is not None:  # malformed arguments reach the caller verbatim
            assert reply.tool_calls[0].arguments == raw[0]
    assert reply.model == "m"


async def _replay(items: list[StreamItem]) -> AsyncIterator[StreamItem]:
    for item in items:
        yield item


async def test_the_request_names_the_model_its_phase_settings_tools_and_key(
    fake_llm: FakeLLMServer, models: dict[str, ChatModel]
) -> None:
    tools = [{"type": "function", "function": {"name": "get_current_time", "parameters": {}}}]
    request = ModelRequest(REQUEST.messages, tools=tools, temperature=0.1, max_tokens=77)
    await items_of(models["direct"], request)
    (sent,) = fake_llm.requests_for("m")
    assert sent.body["model"] == "m"  # without the provider
    assert sent.body["messages"] == REQUEST.messages
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert (sent.body["temperature"], sent.body["max_tokens"]) == (0.1, 77)
    assert sent.body["tools"] == tools
    assert sent.headers["authorization"] == "Bearer sk-test"
    await items_of(models["direct"], REQUEST)
    assert "temperature" not in fake_llm.requests_for("m")[-1].body


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "llm_bad_request"),
        (401, "llm_auth_failed"),
        (403, "llm_auth_failed"),
        (404, "llm_model_not_found"),
        (408, "llm_timeout"),
        (409, "llm_unavailable"),
        (413, "llm_bad_request"),
        (429, "llm_rate_limited"),
        (500, "llm_unavailable"),
        (502, "llm_unavailable"),
        (503, "llm_unavailable"),
    ],
)
async def test_http_failures_get_the_same_codes_on_both_paths(
    fake_llm: FakeLLMServer, models: dict[str, ChatModel], status: int, code: str
) -> None:
    for path, model in models.items():
        fake_llm.enqueue(Fail(status, "no"), model="m")
        failure = await failure_of(model)
        assert (path, failure.code) == (path, code)
        if path == "direct":  # LiteLLM reports a 408 as its own timeout, without the status
            assert failure.provider_status == status


async def test_a_request_too_long_for_the_model_is_named_so_on_both_paths(
    fake_llm: FakeLLMServer, models: dict[str, ChatModel]
) -> None:
    message = "This model's maximum context length is 8192 tokens. However, you requested 9100."
    for path, model in models.items():
        fake_llm.enqueue(Fail(400, message), model="m")
        failure = await failure_of(model)
        assert (path, failure.code, failure.retryable) == (path, "llm_context_too_long", False)


async def test_retry_after_is_read_on_both_paths(
    fake_llm: FakeLLMServer, models: dict[str, ChatModel]
) -> None:
    for path, model in models.items():
        fake_llm.enqueue(Fail(429, headers={"retry-after": "7"}), model="m")
        failure = await failure_of(model)
        assert (path, failure.code, failure.retry_after) == (path, "llm_rate_limited", 7.0)


async def test_a_malformed_event_is_a_failed_answer_on_both_paths(
    fake_llm: FakeLLMServer, models: dict[str, ChatModel]
) -> None:
    for path, model in models.items():
        fake_llm.enqueue(MalformedStream(), model="m")
        failure = await failure_of(model)
        assert (path, failure.code) == (path, "llm_unavailable")
        assert failure.retryable


async def test_an_error_inside_the_stream_is_a_failure(
    fake_llm: FakeLLMServer, models: dict[str, ChatModel]
) -> None:
    error = json.dumps({"error": {"message": "overloaded at gpu-7.corp.internal", "code": 503}})
    fake_llm.enqueue(MalformedStream(data=error), model="m")
    failure = await failure_of(models["direct"])
    assert (failure.code, failure.provider_status) == ("llm_unavailable", 503)
    assert "corp.internal" not in failure.message


async def test_a_stream_that_breaks_after_text_is_interrupted(
    fake_llm: FakeLLMServer, models: dict[str, ChatModel]
) -> None:
    fake_llm.enqueue(BreakStream("half "), model="m")
    seen: list[StreamItem] = []
    with pytest.raises(ModelFailure) as info:
        async for item in models["direct"].stream(REQUEST):
            seen.append(item)
    assert seen == [TextDelta("half ")]
    assert info.value.code == "llm_stream_interrupted"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_unreachable_server_is_unreachable_on_both_paths(clients: ModelClients) -> None:
    config = ModelConfig("openai/m", f"http://127.0.0.1:{closed_port()}/v1", "sk-test")
    target = route(config)
    assert isinstance(target, Direct)
    direct = OpenAICompatModel("openai/m", target, clients)
    try:
        for model in (direct, LiteLLMModel(config, timeout_s=MODEL.timeout_s)):
            assert (await failure_of(model)).code == "llm_unreachable"
    finally:
        await direct.aclose()


async def test_without_a_key_nothing_is_sent_unless_the_server_needs_none(
    fake_llm: FakeLLMServer, clients: ModelClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("HOSTED_VLLM_API_KEY", raising=False)
    keyless = route(ModelConfig("openai/m", fake_llm.url))
    vllm = route(ModelConfig("hosted_vllm/m", fake_llm.url))
    assert isinstance(keyless, Direct) and isinstance(vllm, Direct)
    openai_model = OpenAICompatModel("openai/m", keyless, clients)
    vllm_model = OpenAICompatModel("hosted_vllm/m", vllm, clients)
    try:
        failure = await failure_of(openai_model)
        assert failure.code == "llm_no_api_key" and "HERMES_MODEL_API_KEY" in failure.message
        assert fake_llm.requests == []
        assert (await collect(vllm_model.stream(REQUEST))).text
        assert "authorization" not in fake_llm.requests_for("m")[0].headers
    finally:
        await openai_model.aclose()
        await vllm_model.aclose()


async def test_models_behind_one_server_share_one_client_closed_with_the_last(
    fake_llm: FakeLLMServer, clients: ModelClients
) -> None:
    first, second = (
        OpenAICompatModel(f"openai/{n}", _direct(fake_llm, n), clients) for n in ("a", "b")
    )
    assert clients.open_clients == 1
    await collect(first.stream(REQUEST))
    await collect(second.stream(REQUEST))
    await first.aclose()
    await first.aclose()  # closing twice gives the lease back once
    assert clients.open_clients == 1
    assert (await collect(second.stream(REQUEST))).text
    await second.aclose()
    assert clients.open_clients == 0


async def test_the_connection_pool_bounds_concurrent_calls(fake_llm: FakeLLMServer) -> None:
    pool = ModelClients(max_connections=1, timeout_s=MODEL.timeout_s)
    model = OpenAICompatModel("openai/m", _direct(fake_llm, "m"), pool)
    fake_llm.enqueue(*[Reply("slow", delay=0.3)] * 2, model="m")
    try:
        await asyncio.gather(*(collect(model.stream(REQUEST)) for _ in range(2)))
    finally:
        await model.aclose()
    first, second = fake_llm.requests_for("m")
    assert second.at - first.at >= 0.25  # the second call waited for the only connection


def _direct(server: FakeLLMServer, name: str, **extra: Any) -> Direct:
    target = route(ModelConfig(f"openai/{name}", server.url, "sk-test", extra))
    assert isinstance(target, Direct)
    return target
