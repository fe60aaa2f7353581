"""Provider error text, cut down to what a client or a log may see.

A provider's error says what went wrong, and often also where and with what: gateway hosts,
URLs, addresses, the key that was refused, LiteLLM's deployment hashes and cooldown lists. The
masker keeps the first line's words and replaces those. Hermes' own redactor (emails, phones,
configured patterns) runs on top, where the chain is built.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# LiteLLM wraps the provider's words: "litellm.AuthenticationError: AuthenticationError:
# OpenAIException - Incorrect API key ...". The wrappers say nothing the code doesn't.
_PREFIX = re.compile(r"^(?:litellm\.)?[A-Za-z]*(?:Error|Exception|Timeout)(?: Error)?\s*[:-]\s*")
# Router and deployment bookkeeping: everything from the first such word on is dropped.
_BOOKKEEPING = re.compile(
    r"(?i)[\s,;.]*\b(?:cooldown[_ ]list|deployment[_ ]?ids?|model[_ ]ids?|litellm_params|"
    r"received model group|available model group|model_group)\b.*$"
)

_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>)\]]+"), "[url]"),
    (re.compile(r"(?i)\bBearer\s+\S+"), "Bearer ****"),
    (re.compile(r"\b(?:sk|pk|rk)-[^\s,;'\"`)]+"), lambda m: m[0][:3] + "****"),
    (
        re.compile(
            r"(?i)\b(api[_-]?key|token|secret|password|authorization)(\s*[:=]\s*)[^\s,;'\"]+"
        ),
        lambda m: f"{m[1]}{m[2]}****",
    ),
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "****",
    ),
    (re.compile(r"\[[0-9a-fA-F:]*:[0-9a-fA-F:]*\](?::\d+)?"), "[address]"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b"), "[address]"),
    (re.compile(r"(?i)\b[a-z0-9][\w.-]*:\d{2,5}\b"), "[address]"),
    (re.compile(r"(?i)\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,63}\b"), "[host]"),
    (re.compile(r"\b[0-9a-fA-F]{16,}\b"), "****"),
    (re.compile(r"\b(?=[\w-]*\d)[\w-]{32,}\b"), "****"),
    # Hermes reads its key and base URL from its own variables, whatever the provider says.
    (
        re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_KEY|ADMIN_KEY)\b"),
        "HERMES_MODEL_API_KEY",
    ),
    (re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_API_BASE\b"), "HERMES_MODEL_API_BASE"),
]


def mask_provider_text(text: str, limit: int = 160) -> str:
    """The first line of `text` without hosts, URLs, addresses, keys or ids, at most `limit`
    characters long."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    previous = None
    while previous != line:
        previous, line = line, _PREFIX.sub("", line)
    line = _BOOKKEEPING.sub("", line)
    for pattern, replacement in _RULES:
        line = pattern.sub(replacement, line)
    line = " ".join(line.split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return line


Redact = Callable[[str], str]
