"""The name the model sees for an MCP tool: `mcp__<server>__<tool>`, at most 64 characters.

Model APIs accept `[A-Za-z0-9_-]{1,64}`. A tool name that fits is used as is. One that does not
(too long, or with other characters such as dots) is cut and given a short hash of the server
and the original tool name, so the result is stable across restarts and two different tools
never end up with the same name.
"""

from __future__ import annotations

import hashlib
import re

MAX_LENGTH = 64
PREFIX = "mcp__"
SEPARATOR = "__"
_ALLOWED = re.compile(r"^[A-Za-z0-9_-]+$")
_DISALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LEN = 8


def tool_name(server: str, tool: str) -> str:
    plain = f"{PREFIX}{server}{SEPARATOR}{tool}"
    if len(plain) <= MAX_LENGTH and _ALLOWED.match(tool):
        return plain
    suffix = "_" + hashlib.sha256(f"{server}\x1f{tool}".encode()).hexdigest()[:_HASH_LEN]
    cleaned = f"{PREFIX}{server}{SEPARATOR}{_DISALLOWED.sub('_', tool)}"
    return cleaned[: MAX_LENGTH - len(suffix)] + suffix
