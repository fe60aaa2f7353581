"""Assembling a streamed answer: text deltas in order, tool calls from fragments, and a real
stream from the fake server assembled alike on the direct path and through LiteLLM."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.errors import UpstreamLLMError
from app.llm.build import build_chain
from app.llm.catalog import ModelApi, ModelConfig
from app.llm.gateway import (
    ModelRequest,
    StreamEnd,
    StreamItem,
    TextDelta,
    ToolCallDelta,
    collect,
)
from app.llm.testing import FakeLLMServer, ToolCall, ToolCalls
from tests.llm.paths import MODEL_APIS, chain_options


async def items(*values: StreamItem) -> AsyncIterator[StreamItem]:
    for value in values:
        yield value


async def test_text_and_fragmented_tool_calls() -> None:
    seen: list[str] = []

    async def on_text(piece: str) -> None:
        seen.append(piece)

    reply = await collect(
        items(
            TextDelta("Let me "),
            TextDelta("check."),
            ToolCallDelta(0, "c1", "query_order_status", ""),
            ToolCallDelta(1, "c2", "track_shipment", '{"tracking'),
            ToolCallDelta(0, None, None, '{"order_id": '),
            ToolCallDelta(0, None, None, '"202405201234"}'),
            ToolCallDelta(1, None, None, '_number": "SF123456789CN"}'),
            StreamEnd("tool_calls", "m", 12, 7),
        ),
        on_text,
    )
    assert seen == ["Let me ", "check."]
    assert reply.text == "Let me check."
    assert [(c.id, c.name) for c in reply.tool_calls] == [
        ("c1", "query_order_status"),
        ("c2", "track_shipment"),
    ]
    assert reply.tool_calls[0].arguments == '{"order_id": "202405201234"}'
    assert reply.tool_calls[1].arguments == '{"tracking_number": "SF123456789CN"}'
    assert (reply.prompt_tokens, reply.completion_tokens, reply.model) == (12, 7, "m")


async def test_a_tool_call_without_a_name_is_a_bad_response() -> None:
    with pytest.raises(UpstreamLLMError) as info:
        await collect(items(ToolCallDelta(0, "c1", None, "{}"), StreamEnd()))
    assert info.value.code == "llm_bad_response"


@pytest.mark.parametrize("api", MODEL_APIS)
async def test_a_real_stream_is_assembled_the_same_on_both_paths(
    fake_llm: FakeLLMServer, api: ModelApi
) -> None:
    """The fake server sends each call's name first and its arguments in two fragments."""
    fake_llm.enqueue(
        ToolCalls(
            ToolCall("query_order_status", {"order_id": "202405201234"}, id="c1"),
            ToolCall("track_shipment", '{"tracking_number": "SF1', id="c2"),  # malformed
            text="Checking.",
        ),
        model="m",
    )
    chain = build_chain([ModelConfig("openai/m", fake_llm.url, "sk-test")], chain_options(api))
    try:
        reply = await collect(
            chain.stream(ModelRequest(messages=[{"role": "user", "content": "?"}]))
        )
    finally:
        await chain.aclose()
    assert reply.text == "Checking."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("c1", "query_order_status", '{"order_id": "202405201234"}'),
        ("c2", "track_shipment", '{"tracking_number": "SF1'),
    ]
    assert (reply.finish_reason, reply.model, reply.prompt_tokens) == ("tool_calls", "m", 10)
