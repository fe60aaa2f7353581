"""Shape tool data before it goes anywhere: mask sensitive values, then cut to a token budget.

Masking runs first, so a cut never splits a value before it was masked. What leaves here is
what the model, the events, the stored messages and the logs see.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from app.text.tokens import estimate_tokens


def _keep_ends(value: str, head: int, tail: int) -> str:
    if len(value) <= head + tail:
        return "*" * len(value)
    return value[:head] + "*" * (len(value) - head - tail) + value[len(value) - tail :]


def _mask_email(match: re.Match[str]) -> str:
    local, domain = match[1], match[2]
    return f"{local[0]}***@{domain}"


_DIGITS_NOT_AROUND = r"(?<![\d\w]){}(?![\d\w])"


@dataclass(frozen=True)
class Detector:
    """One kind of sensitive value: how to find it and how to mask it.

    `kind` is what the value is (several detectors may share one); app.tools.sensitive reports
    kinds to operators with the same detectors the masking uses.
    """

    kind: str
    pattern: re.Pattern[str]
    mask: Callable[[re.Match[str]], str]


# In the order they are applied: a value masked by one is no longer seen by the next.
DETECTORS: tuple[Detector, ...] = (
    Detector(
        "api_key",
        re.compile(
            r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}\b|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}\b"
        ),
        lambda m: m[0][:3] + "****",
    ),
    Detector(
        "api_key",
        re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/-]{8,}=*"),
        lambda _m: "Bearer ****",
    ),
    Detector(
        "secret",
        re.compile(r"(?i)\b(password|passwd|secret|api[_-]?key|token)\b(\s*[:=]\s*)([^\s,;\"']+)"),
        lambda m: f"{m[1]}{m[2]}****",
    ),
    Detector(
        "email", re.compile(r"\b([A-Za-z0-9._%+-]+)@([A-Za-z0-9.-]+\.[A-Za-z]{2,})\b"), _mask_email
    ),
    Detector(
        "id_card",
        re.compile(
            _DIGITS_NOT_AROUND.format(r"\d{6}(?:19|20)\d{2}(?:0[1-9]|1[0-2])\d{2}\d{3}[\dXx]")
        ),
        lambda m: _keep_ends(m[0], 3, 4),
    ),
    Detector(
        "bank_card",
        re.compile(_DIGITS_NOT_AROUND.format(r"(?:\d[ -]?){15,18}\d")),
        lambda m: "****" + re.sub(r"\D", "", m[0])[-4:],
    ),
    Detector(
        "phone",
        re.compile(_DIGITS_NOT_AROUND.format(r"(?:\+?86[ -]?)?1[3-9]\d[ -]?\d{4}[ -]?\d{4}")),
        lambda m: _keep_ends(re.sub(r"[ -]", "", m[0]), 3, 4),
    ),
    Detector("phone", re.compile(r"(?<![\w+])\+\d{8,15}(?!\d)"), lambda m: _keep_ends(m[0], 3, 2)),
)

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
