"""The CJK character classes, defined once.

Two questions need two classes. "Is this a Chinese character?" (NLU tokens, memory search
terms, counting Chinese against Latin words) means the Han ideographs only. "Was this written
with a CJK input method?" (the reply language when nothing else decides) also takes kana,
hangul, CJK punctuation and full-width forms: "SF123456789CN？" was typed by a Chinese customer.
"""

from __future__ import annotations

import re

# Han ideographs: extension A, the unified block, compatibility ideographs. A character class
# body, for composing into other patterns (the NLU tokenizer, memory's search terms).
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"

_HAN = re.compile(f"[{HAN}]")
_CJK_SCRIPT = re.compile(
    r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


def is_han(ch: str) -> bool:
    """Whether the first character of `ch` is a Han ideograph."""
    return _HAN.match(ch) is not None


def count_han(text: str) -> int:
    return len(_HAN.findall(text))


def has_cjk(text: str | None) -> bool:
    """Whether any character of `text` is CJK script, punctuation or a full-width form."""
    return bool(text) and _CJK_SCRIPT.search(text or "") is not None
