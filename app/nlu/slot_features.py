"""CRF features for each token, and BIO labels from character spans.

Chinese is tagged one character at a time; its features are the character, its neighbours
and the bigrams around it, plus whether it is a numeral, a date or a currency character.
Latin tokens carry their lower-cased form, affixes and a shape ("sf123456789cn" -> "a2d9a2"),
so an unseen order id or tracking number looks like the ones in training.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.nlu.gazetteer import marks
from app.nlu.numbers import CN_NUMERAL_CHARS, EN_NUMBER_WORDS
from app.text.fold import Token

_DATE_CHARS = frozenset("年月日号周星期礼拜天昨今明后前")
_MONEY_CHARS = frozenset("元块钱毛角分¥$")
_MONTHS = frozenset(
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june "
    "july august september october november december".split()
)
_WEEKDAYS = frozenset(
    "mon tue tues wed thu thur thurs fri sat sun monday tuesday wednesday thursday friday "
    "saturday sunday".split()
)
_RUN = re.compile(r"[a-z]+|[0-9]+|.")
_IDENTITY = ("w=", "p3=", "x3=")
_LEADS = frozenset("+¥$")


def shape(text: str) -> str:
    out = []
    for run in _RUN.findall(text):
        if run.isdigit():
            out.append(f"d{len(run)}")
        elif run.isalpha() and run.isascii():
            out.append(f"a{min(len(run), 4)}")
        else:
            out.append(run)
    return "".join(out)


def _own(token: Token) -> list[str]:
    t = token.text
    feats = [f"w={t}", f"k={token.kind}"]
    if token.kind == "cjk":
        if t in CN_NUMERAL_CHARS:
            feats.append("cnnum")
        if t in _DATE_CHARS:
            feats.append("datech")
        if t in _MONEY_CHARS:
            feats.append("money")
        return feats
    feats.append(f"s={shape(t)}")
    if token.kind in ("word", "num"):
        digits = sum(ch.isdigit() for ch in t)
        if digits:
            feats.append(f"nd={digits}")
        if token.kind == "word" and not digits:
            feats += [f"p3={t[:3]}", f"x3={t[-3:]}"]
            if t in _MONTHS:
                feats.append("month")
            if t in _WEEKDAYS:
                feats.append("weekday")
            if t in EN_NUMBER_WORDS:
                feats.append("numword")
    elif token.kind == "other" and t in _MONEY_CHARS:
        feats.append("money")
    return feats


def _brief(token: Token) -> str:
    """What a neighbour contributes: the character or word itself, but only the shape of a
    number (its exact digits say nothing about the slot)."""
    return token.text if token.kind in ("cjk", "word", "other") else shape(token.text)


def sentence_features(
    folded: str, tokens: Sequence[Token], blind: frozenset[int] = frozenset()
) -> list[list[str]]:
    """Features per token of `folded` (the text as `fold` returns it, which `tokens` index).

    Tokens in `blind` contribute no identity features, to themselves or to their neighbours:
    training adds such copies of sentences with products so the model learns the contexts
    products sit in, the only evidence it has for a product it has never seen."""
    briefs: list[str | None] = [None if i in blind else _brief(t) for i, t in enumerate(tokens)]
    gazette = marks(folded, tokens)
    kinds = [t.kind for t in tokens]
    out: list[list[str]] = []
    n = len(tokens)
    for i, token in enumerate(tokens):
        own = _own(token)
        if i in blind:
            own = [f for f in own if not f.startswith(_IDENTITY)]
        feats = ["bias", *own, *gazette[i]]
        if i > 0:
            feats.extend("-1" + g for g in gazette[i - 1])
        if i < n - 1:
            feats.extend("+1" + g for g in gazette[i + 1])
        if i == 0:
            feats.append("BOS")
        if i == n - 1:
            feats.append("EOS")
        for off in (-2, -1, 1, 2):
            j = i + off
            if 0 <= j < n:
                if briefs[j] is not None:
                    feats.append(f"{off}w={briefs[j]}")
                feats.append(f"{off}k={kinds[j]}")
        if i > 0 and tokens[i - 1].end < token.start:
            feats.append("spacebefore")
        if i < n - 1 and token.end < tokens[i + 1].start:
            feats.append("spaceafter")
        for name, a, b in (("-1|0", i - 1, i), ("0|+1", i, i + 1), ("-1|+1", i - 1, i + 1)):
            if a >= 0 and b < n and briefs[a] is not None and briefs[b] is not None:
                feats.append(f"{name}={briefs[a]}|{briefs[b]}")
        out.append(feats)
    return out


def bio_labels(tokens: Sequence[Token], spans: Sequence[tuple[str, int, int]]) -> list[str]:
    """BIO tag per token; a token belongs to a span when it lies inside it."""
    labels = ["O"] * len(tokens)
    for name, start, end in spans:
        inside = [i for i, t in enumerate(tokens) if t.start >= start and t.end <= end]
        for k, i in enumerate(inside):
            labels[i] = ("B-" if k == 0 else "I-") + name
    return labels


def decode(tokens: Sequence[Token], labels: Sequence[str]) -> list[tuple[str, int, int]]:
    """Character spans from BIO tags; a stray I- opens a span like a B- would. Punctuation
    at either edge is left out (a leading "+", "¥" or "$" belongs to a phone or amount)."""
    groups: list[tuple[str, list[int]]] = []
    open_name: str | None = None
    for i, label in enumerate(labels):
        if label == "O":
            open_name = None
            continue
        kind, name = label.split("-", 1)
        if kind == "I" and open_name == name:
            groups[-1][1].append(i)
        else:
            groups.append((name, [i]))
            open_name = name
    spans = []
    for name, members in groups:
        while members and tokens[members[-1]].kind == "other":
            members.pop()
        while (
            members and tokens[members[0]].kind == "other" and tokens[members[0]].text not in _LEADS
        ):
            members.pop(0)
        if members:
            spans.append((name, tokens[members[0]].start, tokens[members[-1]].end))
    return spans
