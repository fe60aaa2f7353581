"""Cheap token estimates for budgeting (no tokenizer download, no per-call model lookups).

CJK characters are about one token each in current tokenizers; other text runs about four
characters a token. Estimates err on the high side so budgets hold.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str | None) -> int:
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    # CJK characters take three bytes in UTF-8, ASCII one: the difference counts them without
    # a regex pass over the text (close enough for a budget; other scripts count a bit high).
    wide = min(len(text), (len(text.encode("utf-8")) - len(text)) // 2)
    return wide + (len(text) - wide + 3) // 4


def estimate_message(message: Mapping[str, Any]) -> int:
    total = _MESSAGE_OVERHEAD + estimate_tokens(message.get("content"))
    if message.get("tool_calls"):
        total += estimate_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    return total
