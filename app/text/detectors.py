"""Sensitive values in text: what each kind looks like and how it is masked.

One detection for everything that hides values: the Redactor (app/tools/shaping.py) masks
them in tool data, events and logs; app/tools/sensitive.py names them to operators; the model
masking policy (app/llm/pseudonyms.py) masks or pseudonymises them before text goes to a
remote model. It lives down here, below every layer that uses it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


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
