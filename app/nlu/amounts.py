"""Money amounts to a decimal string with two places: "一百二十块" -> "120.00".

Accepts Arabic and Chinese numerals and English number words, thousands separators, the
multipliers 千/万/k, currency marks before (¥ $ RMB CNY USD) or after (元 块 块钱 yuan RMB
dollars bucks), and the spoken "八十九块九" (89.90) / "五块五毛" (5.50) forms.
"""

from __future__ import annotations

import re
from decimal import Decimal

from app.nlu.numbers import CN_DIGITS, parse_decimal
from app.text.fold import fold

_PREFIX = re.compile(r"^(?:¥|\$|us\$|rmb|cny|usd|人民币)\s*")
_SUFFIX = re.compile(
    r"\s*(?:块钱|块|元钱|元整|元|圆|人民币|yuan|rmb|cny|usd|dollars?|bucks?|刀|美元|美金)$"
)
_MULTIPLIER = re.compile(r"^(?P<n>.+?)\s*(?P<x>千|k|万|w)$")
_SCALE = {"千": 1000, "k": 1000, "万": 10_000, "w": 10_000}
# "八十九块九", "5块5毛", "十块零五分": yuan, then jiao (0.1) and fen (0.01) digits.
_SPOKEN = re.compile(
    r"^(?P<yuan>.+?)(?:块|元)(?:零)?(?:(?P<jiao>[0-9一二两三四五六七八九])(?:毛|角)?)?"
    r"(?:(?P<fen>[0-9一二两三四五六七八九])分)?$"
)
_CENT = Decimal("0.01")


def _digit(ch: str | None) -> int:
    return 0 if ch is None else CN_DIGITS[ch]


def _plain(text: str) -> Decimal | None:
    m = _MULTIPLIER.match(text)
    if m is not None and not m.group("n").isalpha():
        base = parse_decimal(m.group("n"))
        return None if base is None else base * _SCALE[m.group("x")]
    return parse_decimal(text)


def normalise_amount(text: str) -> str | None:
    cleaned = fold(text).strip(" \t,.;:!?，。；：！？")
    cleaned = _PREFIX.sub("", cleaned)
    value: Decimal | None = None
    spoken = _SPOKEN.match(cleaned)
    if spoken is not None and (spoken.group("jiao") or spoken.group("fen")):
        yuan = _plain(spoken.group("yuan").strip())
        if yuan is not None:
            value = yuan + Decimal(_digit(spoken.group("jiao"))) / 10
            value += Decimal(_digit(spoken.group("fen"))) / 100
    if value is None:
        value = _plain(_SUFFIX.sub("", cleaned).strip())
    if value is None or value <= 0:
        return None
    return str(value.quantize(_CENT))
