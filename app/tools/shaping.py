"""Shape tool data before it goes anywhere: mask sensitive values, then cut to a token budget.

Masking runs first, so a cut never splits a value before it was masked. What leaves here is
what the model, the events, the stored messages and the logs see.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.text.detectors import DETECTORS, Detector
from app.text.tokens import estimate_tokens

__all__ = ["DETECTORS", "SENSITIVE_KEYS", "Detector", "Redactor", "Shaped", "truncate"]


# Fields whose whole value is masked, whatever it looks like.
SENSITIVE_KEYS = re.compile(
    r"(?i)^(password|passwd|secret|token|api[_-]?key|access[_-]?key|id[_-]?card|"
    r"bank[_-]?(account|card)|card[_-]?number|cvv)$"
)


@dataclass
class Redactor:
    """Masks id cards, bank accounts, phones, emails, keys, and configured extra patterns."""

    extra: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def with_patterns(cls, patterns: Iterable[str]) -> Redactor:
        return cls(tuple(re.compile(p) for p in patterns))

    def text(self, value: str) -> str:
        for detector in DETECTORS:
            value = detector.pattern.sub(detector.mask, value)
        for pattern in self.extra:
            value = pattern.sub("****", value)
        return value

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                k: (
                    "****" if SENSITIVE_KEYS.match(str(k)) and v not in (None, "") else self.data(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def arguments(self, raw: str) -> str:
        """A tool call's arguments as the model wrote them (JSON text), masked the way an
        approval masks them: field by field when they parse, as text when they do not."""
        try:
            parsed = json.loads(raw)
        except ValueError:
            return self.text(raw)
        if not isinstance(parsed, dict | list):
            return self.text(raw)
        masked = self.data(parsed)
        return raw if masked == parsed else json.dumps(masked, ensure_ascii=False)


@dataclass(frozen=True)
class Shaped:
    data: Any
    truncated: bool
    original_tokens: int


def truncate(data: Any, max_tokens: int) -> Shaped:
    """Keep data whole if it fits the budget; otherwise keep the head and tail of its JSON text."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    tokens = estimate_tokens(text)
    if tokens <= max_tokens:
        return Shaped(data, False, tokens)
    # Characters per token of this text, so the cut lands near the budget for CJK and Latin.
    ratio = len(text) / max(tokens, 1)
    room = int(max_tokens * ratio) - 40
    head, tail = int(room * 0.7), int(room * 0.3)
    omitted = tokens - max_tokens
    cut = (
        f"{text[:head]}\n…[truncated: about {omitted} tokens omitted]…\n{text[len(text) - tail :]}"
    )
    return Shaped(cut, True, tokens)
