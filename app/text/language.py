"""Which language, Chinese or English, a customer writes in: the one rule set for Hermes.

Two questions, two functions. `detect_language` reads one utterance (the NLU parse): Chinese
when Han characters carry it. `latest_language` reads a conversation (the reply language):
the latest message that shows a script decides, so a bare order number or tracking number
says nothing and an earlier message answers instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from app.text.fold import tokenize
from app.text.script import count_han, has_cjk

Language = Literal["en", "zh"]


def detect_language(text: str) -> Language:
    """ "zh" when Chinese characters carry the sentence, else "en".

    Ids and tracking numbers are Latin in both languages, so only alphabetic words count
    against the Chinese characters."""
    han = count_han(text)
    if han == 0:
        return "en"
    words = sum(1 for t in tokenize(text) if t.kind == "word" and t.text.isalpha())
    return "zh" if han >= words else "en"


def latest_language(texts: Iterable[str]) -> Language:
    """Chinese if the first text (latest first) that shows a script is CJK, else English.

    A text shows a script when it has a CJK character (see `has_cjk`) or an ASCII letter;
    callers may cut slot values out first so that ids do not count as English. One text on its
    own is `latest_language([text])`: "zh" exactly when it shows CJK script."""
    for text in texts:
        if has_cjk(text):
            return "zh"
        if any(c.isascii() and c.isalpha() for c in text):
            return "en"
    return "en"
