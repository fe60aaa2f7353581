"""Text folding and tokens with character offsets.

Both models and every normaliser see the same folded text: full-width forms become ASCII and
letters are lower-cased, one character at a time, so an offset into the folded text is the
same offset into what the caller wrote.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from app.text.script import HAN

Kind = Literal["email", "num", "word", "cjk", "other"]

# Order matters: an email swallows its dots and digits; a bare number keeps its decimal point
# and thousands separators unless letters follow ("300rmb" stays one word token).
_TOKEN = re.compile(
    r"(?P<email>[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,})"
    r"|(?P<num>[0-9]+(?:[.,][0-9]+)*(?![a-z0-9]))"
    r"|(?P<word>[a-z0-9]+(?:'[a-z]+)?)"
    rf"|(?P<cjk>[{HAN}])"
    r"|(?P<other>\S)"
)


@dataclass(frozen=True, slots=True)
class Token:
    text: str  # folded (lower-case, half-width)
    start: int
    end: int
    kind: Kind


@lru_cache(maxsize=4096)
def _fold_char(ch: str) -> str:
    folded = unicodedata.normalize("NFKC", ch)
    if len(folded) != 1:
        folded = ch  # e.g. a ligature: keep it rather than shift every later offset
    lowered = folded.lower()
    return lowered if len(lowered) == 1 else folded


def fold(text: str) -> str:
    """Half-width, lower-case, same length as `text`."""
    if text.isascii():
        return text.lower()
    return "".join(_fold_char(ch) for ch in text)


def tokenize(text: str) -> list[Token]:
    """Tokens of the folded text: CJK one per character, Latin words, numbers, emails, symbols."""
    folded = fold(text)
    return [
        Token(m.group(), m.start(), m.end(), m.lastgroup)  # type: ignore[arg-type]
        for m in _TOKEN.finditer(folded)
    ]
