"""MCP results as tool data: structured first, trimmed text, described media, errors."""

from __future__ import annotations

import base64

import pytest
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from app.errors import ToolHandlerError
from app.tools.mcp.results import adapt_result
from app.tools.mcp.secrets import MASK, SecretMasker


def text(value: str) -> TextContent:
    return TextContent(text=value)


def test_structured_content_wins_over_text() -> None:
    result = CallToolResult(content=[text('{"a": 1}')], structured_content={"a": 1})
    assert adapt_result(result) == {"a": 1}


def test_text_blocks_are_trimmed_and_joined() -> None:
    result = CallToolResult(content=[text("  \n first \t"), text(""), text(" second\n")])
    assert adapt_result(result) == "first\nsecond"
    assert adapt_result(CallToolResult(content=[])) == ""


def test_media_and_resources_are_described_not_inlined() -> None:
    png = base64.b64encode(b"0123456789").decode()
    result = CallToolResult(
        content=[
            text("the chart:"),
            ImageContent(data=png, mime_type="image/png"),
            AudioContent(data="not base64!", mime_type="audio/wav"),
            EmbeddedResource(
                resource=TextResourceContents(uri="file:///a.txt", mime_type=None, text="hello")
            ),
            EmbeddedResource(resource=BlobResourceContents(uri="file:///b.bin", blob=png)),
            ResourceLink(uri="https://example.com/doc", name="doc"),
        ]
    )
    assert adapt_result(result).splitlines() == [
        "the chart:",
        "[image: image/png, 10 bytes, not shown]",
        "[audio: audio/wav, 11 bytes, not shown]",
        "[resource file:///a.txt: unknown type, 5 characters, not shown]",
        "[resource file:///b.bin: unknown type, 10 bytes, not shown]",
        "[link to resource doc: https://example.com/doc]",
    ]
    assert png not in adapt_result(result)


def test_error_results_raise_with_their_text() -> None:
    with pytest.raises(ToolHandlerError) as info:
        adapt_result(CallToolResult(content=[text("  no such order \n")], is_error=True))
    assert (info.value.code, info.value.message) == ("mcp_tool_error", "no such order")
    assert not info.value.retryable
    with pytest.raises(ToolHandlerError, match="reported an error"):
        adapt_result(CallToolResult(content=[], is_error=True))


def test_declared_secrets_are_masked_in_everything_a_server_returns() -> None:
    secret = "crm-token-5f2a9c"
    masker = SecretMasker([secret])
    structured = CallToolResult(
        content=[text(secret)],
        structured_content={"token": secret, "items": [f"Bearer {secret}"], secret: 1},
    )
    assert adapt_result(structured, masker) == {
        "token": MASK,
        "items": [f"Bearer {MASK}"],
        MASK: 1,
    }
    linked = CallToolResult(
        content=[text(f"key={secret}"), ResourceLink(uri=f"https://crm/x?t={secret}", name="x")]
    )
    assert secret not in adapt_result(linked, masker)
    with pytest.raises(ToolHandlerError) as info:
        adapt_result(CallToolResult(content=[text(f"bad token {secret}")], is_error=True), masker)
    assert info.value.message == f"bad token {MASK}"
