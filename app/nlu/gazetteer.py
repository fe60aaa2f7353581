"""Where a rule sees a date or an amount in running text: a feature for the CRF.

Date and money expressions are open-ended ("三天以后", "the 20th of May", "八十九块九"); a few
hundred training sentences cannot show every form, but the normalisers' patterns know them.
Marking the tokens such a pattern covers lets the CRF learn "trust the pattern, except in
contexts like 'within 30 days'", so tagging generalises to forms the templates never wrote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.nlu.dates import SCAN_PATTERNS
from app.text.fold import Token

_CN_NUM = r"[零〇一二两三四五六七八九十百千万点]+"
_AR_NUM = r"[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?(?:\s*[千万kw])?"
_EN_NUM = (
    r"(?:(?:a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    r"|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy"
    r"|eighty|ninety|hundred|thousand)(?:[\s-]+(?:and\s+)?|(?=\s)))+"
)
_NUM = rf"(?:{_AR_NUM}|{_CN_NUM}|{_EN_NUM})"
_AMOUNT = re.compile(
    rf"(?<![a-z0-9])(?:(?:¥|\$|us\$|rmb|cny|usd|人民币)\s*{_NUM}(?:\s*(?:元|块钱|块))?"
    rf"|{_NUM}\s*(?:块钱|块|元钱|元|圆|yuan|rmb|cny|usd|dollars?|bucks?|刀|美元)"
    r"(?:[0-9一二两三四五六七八九](?:毛|角)?)?)(?![a-z0-9])"
)


def _longest(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Leftmost-longest, non-overlapping."""
    chosen: list[tuple[int, int]] = []
    for start, end in sorted(spans, key=lambda s: (s[0], s[0] - s[1])):
        if not chosen or start >= chosen[-1][1]:
            chosen.append((start, end))
    return chosen


def date_spans(folded: str) -> list[tuple[int, int]]:
    found = []
    for pattern in SCAN_PATTERNS:
        for m in pattern.finditer(folded):
            if m.end() > m.start() and not m.group().strip().isdigit():
                found.append((m.start(), m.end()))
    return _longest(found)


def amount_spans(folded: str) -> list[tuple[int, int]]:
    return _longest([(m.start(), m.end()) for m in _AMOUNT.finditer(folded) if m.group().strip()])


def marks(folded: str, tokens: Sequence[Token]) -> list[list[str]]:
    """Per token: "gz=date:B", "gz=amount:I", ... for the candidates it lies in."""
    out: list[list[str]] = [[] for _ in tokens]
    for name, spans in (("date", date_spans(folded)), ("amount", amount_spans(folded))):
        for start, end in spans:
            first = True
            for i, token in enumerate(tokens):
                if token.start >= start and token.end <= end:
                    out[i].append(f"gz={name}:{'B' if first else 'I'}")
                    first = False
    return out
