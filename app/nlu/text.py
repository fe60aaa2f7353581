"""Text folding, tokens with character offsets, and language detection.

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

Kind = Literal["email", "num", "word", "cjk", "other"]

# CJK Unified Ideographs (and extension A, compatibility ideographs).
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

# Order matters: an email swallows its dots and digits; a bare number keeps its decimal point
# and thousands separators unless letters follow ("300rmb" stays one word token).
_TOKEN = re.compile(
    r"(?P<email>[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,})"
    r"|(?P<num>[0-9]+(?:[.,][0-9]+)*(?![a-z0-9]))"
    r"|(?P<word>[a-z0-9]+(?:'[a-z]+)?)"
    r"|(?P<cjk>[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])"
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


def is_cjk(ch: str) -> bool:
    return _CJK.match(ch) is not None


def detect_language(text: str) -> str:
    """ "zh" when Chinese characters carry the sentence, else "en".

    Ids and tracking numbers are Latin in both languages, so only alphabetic words count
    against the Chinese characters."""
    cjk = len(_CJK.findall(text))
    if cjk == 0:
        return "en"
    words = sum(1 for t in tokenize(text) if t.kind == "word" and t.text.isalpha())
    return "zh" if cjk >= words else "en"
