"""From an MCP `CallToolResult` to the data a tool call returns.

Structured content wins when there is some. Otherwise the text blocks, each trimmed of stray
whitespace, joined by newlines; images, audio and resources are described in one line each,
never inlined (base64 in the context costs tokens and tells the model nothing). A result the
server marks as an error becomes `ToolHandlerError("mcp_tool_error")` with its text.

Every string a server returns has the configuration's secrets (`SecretMasker`: declared env
and header secrets) masked here, before it is stored, logged or shown to the model: a server
that echoes its own API key gives nobody that key.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from app.errors import ToolHandlerError
from app.tools.mcp.secrets import SecretMasker


def adapt_result(result: CallToolResult, masker: SecretMasker | None = None) -> Any:
    masker = masker or SecretMasker()
    if result.is_error:
        text = masker.mask(content_text(result.content))
        raise ToolHandlerError("mcp_tool_error", text or "the tool reported an error")
    if result.structured_content is not None:
        return masker.data(result.structured_content)
    return masker.mask(content_text(result.content))


def content_text(blocks: list[ContentBlock]) -> str:
    lines = [line for line in (_describe(b) for b in blocks) if line]
    return "\n".join(lines)


def _describe(block: ContentBlock) -> str:
    match block:
        case TextContent():
            return block.text.strip()
        case ImageContent() | AudioContent():
            kind = "image" if isinstance(block, ImageContent) else "audio"
            return f"[{kind}: {block.mime_type}, {_size(block.data)}, not shown]"
        case EmbeddedResource():
            res = block.resource
            mime = res.mime_type or "unknown type"
            if isinstance(res, BlobResourceContents):
                return f"[resource {res.uri}: {mime}, {_size(res.blob)}, not shown]"
            return f"[resource {res.uri}: {mime}, {len(res.text)} characters, not shown]"
        case ResourceLink():
            return f"[link to resource {block.name}: {block.uri}]"
    return f"[{getattr(block, 'type', 'unknown')} content, not shown]"


def _size(data: str) -> str:
    try:
        n = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        n = len(data)
    return f"{n} bytes"
