"""Assembling a streamed answer: text deltas in order, tool calls from fragments."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.errors import UpstreamLLMError
from app.llm.gateway import StreamEnd, StreamItem, TextDelta, ToolCallDelta, collect


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
