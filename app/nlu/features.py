"""Intent features as a space-separated "document" of feature tokens.

skl2onnx converts only word-analyzer TF-IDF, so character n-grams cannot be left to the
vectoriser. This module does the language-aware part in Python, for training and serving
alike: Chinese characters and character bigrams, Latin words, word bigrams and the character
trigrams of each word (which keep "pasword" close to "password"), and placeholder tokens
for ids, numbers and emails (the intent does not depend on which order it is). The ONNX
graph then only has to split on spaces, look tokens up, weight and classify.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.text.fold import Token, tokenize

_TRACKING = re.compile(r"[a-z]{2}[0-9]{9,12}[a-z]{0,2}")
_KEEP_PUNCT = frozenset("?？!！")


def _placeholder(token: Token) -> str | None:
    if token.kind == "email":
        return "<email>"
    if token.kind == "num":
        digits = sum(ch.isdigit() for ch in token.text)
        if digits == 12:
            return "<num12>"
        if digits == 11 and token.text.startswith("1"):
            return "<num11>"
        return "<dec>" if "." in token.text else "<num>"
    if token.kind == "word":
        if _TRACKING.fullmatch(token.text):
            return "<trk>"
        if any(ch.isdigit() for ch in token.text):
            return "<alnum>"
    return None


def intent_document(text: str) -> str:
    return document(tokenize(text))


def document(tokens: Sequence[Token]) -> str:
    feats: list[str] = []
    prev_cjk: Token | None = None
    prev_word: str | None = None
    for token in tokens:
        if token.kind == "cjk":
            feats.append("z:" + token.text)
            if prev_cjk is not None and prev_cjk.end == token.start:
                feats.append("zz:" + prev_cjk.text + token.text)
            prev_cjk, prev_word = token, None
            continue
        prev_cjk = None
        if token.kind == "other":
            if token.text in _KEEP_PUNCT:
                feats.append("p:?" if token.text in "?？" else "p:!")
            continue
        shape = _placeholder(token)
        word = shape or token.text
        feats.append(shape or "w:" + word)
        if prev_word is not None:
            feats.append("ww:" + prev_word + "_" + word)
        if shape is None and len(word) >= 3:
            padded = f"#{word}#"
            feats.extend("c:" + padded[i : i + 3] for i in range(len(padded) - 2))
        prev_word = word
    return " ".join(feats) if feats else "<empty>"
