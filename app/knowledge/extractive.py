"""What the offline model says to a policy question: the passage's own words that answer it.

`answer` cuts the best passage into pieces (sentences, list items, table rows), scores each
against the question by the terms they share (English word stems, Chinese character bigrams,
a word one typo away, weighted by how rare the term is within the passage), and returns the
best one or two in reading order. A piece is kept verbatim, so every figure of the answer is in
the passage and the grounding check passes by construction; only Markdown syntax goes, and a
table row is read with its header ("Credit card: 7-15 working days").
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import zip_longest

from app.knowledge.chunking import sentences
from app.knowledge.grounding import claims
from app.knowledge.passages import SECTION_SEPARATOR
from app.text.fold import fold
from app.text.script import HAN

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_HAN_RUN = re.compile(f"[{HAN}]+")
_TABLE_RULE = re.compile(r"^\|?[\s:|-]*-[\s:|-]*\|?$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)、])\s+")
_MARKUP = (
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),  # an image: its alt text
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)"), r"\1 (\2)"),  # a link keeps its address
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])"), r"\1"),
    (re.compile(r"`([^`]+)`"), r"\1"),
    (re.compile(r"^\s*(?:#{1,6}|>)\s*"), ""),
)
_STOP_WORDS = frozenset(
    "a an the is are was be been do does did to of for on in at by with my your you i we our us"
    " it its how what when where who which can could will would should and or if me about there"
    " this that from much many long any get have has please tell know want time take need".split()
)
_STOP_HAN = frozenset("的了吗呢么吧啊呀我你他她们怎什请问这那是个有")
# Chinese pairs that any question or rule may hold: they tell no piece from another
_STOP_BIGRAMS = frozenset(
    "时间 可以 需要 什么 怎么 多久 多少 如何 哪些 是否 能否 一下 我们 你们 您的 请问 几点".split()
)
_END = ("。", "！", "？", ".", "!", "?", "；", ";")

# What a question asks for, and the kinds of figure that answer it: a piece that states one
# wins over a piece that only shares words ("How long…" wants the row with the duration).
_ASKS = (
    (
        re.compile(
            r"how (?:long|soon|many days)|多久|多长时间|几天|多少天|几个工作日|时效|什么时候到"
        ),
        ("duration",),
    ),
    (re.compile(r"how much|cost|fee|price|charge|多少钱|费用|收费|多少元|运费多少"), ("amount",)),
    (re.compile(r"what time|opening|open|hours|几点|营业时间|工作时间"), ("time",)),
    (re.compile(r"phone|call|hotline|number|电话|热线|号码"), ("phone",)),
    (re.compile(r"e-?mail|邮箱|邮件"), ("email",)),
    (re.compile(r"percent|%|比例|百分之"), ("percentage",)),
    (re.compile(r"when|date|expire|什么时候|哪天|日期|过期"), ("date", "duration")),
)


@dataclass(frozen=True)
class _Piece:
    text: str  # as the customer will read it
    item: bool  # a list item, read under its section's heading
    terms: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()  # kinds of figure it states


def answer(
    question: str, passage_text: str, language: str, max_sentences: int = 2, section: str = ""
) -> str:
    """The sentences (or list items, or table rows) of `passage_text` that answer `question`,
    at most `max_sentences`, in the passage's order, Markdown removed. `language` is the
    passage's ("zh" or "en"): how pieces are joined. `section` is the passage's section path:
    a list item is read under its last heading ("Regions we do not serve: Hong Kong"). With
    nothing in common with the question (an empty one), the passage's first pieces; "" for an
    empty passage."""
    pieces = _pieces(passage_text)
    if not pieces or max_sentences < 1:
        return ""
    weights = _weights(pieces)
    wanted = _wanted(_terms(question), weights)
    asks = {kind for pattern, kinds in _ASKS if pattern.search(fold(question)) for kind in kinds}
    scores = [_score(piece, wanted, asks, weights) for piece in pieces]
    best = max(scores)
    if best <= 0:
        chosen = list(range(min(max_sentences, len(pieces))))
    else:
        # the best pieces, and of the rest only those nearly as good: an answer, not the chunk
        ranked = sorted(range(len(pieces)), key=lambda i: (-scores[i], i))
        chosen = [i for i in ranked[:max_sentences] if scores[i] >= best * 2 / 3]
    heading = section.rsplit(SECTION_SEPARATOR, 1)[-1].strip()
    return _joined(_read(heading, [pieces[i] for i in sorted(chosen)], language), language)


def _read(heading: str, pieces: list[_Piece], language: str) -> list[str]:
    """The pieces' texts; list items one after another as one, under their heading."""
    texts: list[str] = []
    items: list[str] = []
    for piece in [*pieces, _Piece("", item=False)]:
        if piece.item:
            items.append(piece.text)
            continue
        if items:
            comma, colon = ("、", "：") if language == "zh" else (", ", ": ")
            texts.append(f"{heading}{colon}" * bool(heading) + comma.join(items))
            items = []
        if piece.text:
            texts.append(piece.text)
    return texts


@lru_cache(maxsize=4096)
def _pieces(text: str) -> tuple[_Piece, ...]:
    """What a passage says, piece by piece. Kept per text: the same passages answer question
    after question, and reading one (its sentences, terms and figures) is most of an answer's
    cost."""
    out: list[_Piece] = []
    table: list[list[str]] = []  # the rows of the table being read, its header first
    for line in [*text.splitlines(), ""]:
        line = line.strip()
        if _TABLE_RULE.match(line):
            continue  # |---|---| says nothing
        if line.startswith("|"):
            table.append([_plain(cell) for cell in line.strip("|").split("|")])
            continue
        if table:
            header, *rows = table
            read = [_row(header, row) for row in rows] if rows else [" ".join(header)]
            out.extend(_Piece(row, item=False) for row in read)
            table = []
        if _LIST_ITEM.match(line):
            out.append(_Piece(_plain(_LIST_ITEM.sub("", line, count=1)), item=True))
        elif line:
            out.extend(_Piece(_plain(sentence), item=False) for sentence in sentences(line))
    return tuple(
        _Piece(p.text, p.item, _terms(p.text), frozenset(c.kind for c in claims(p.text)))
        for p in out
        if p.text
    )


def _row(header: list[str], cells: list[str]) -> str:
    """A table row read with its header: "Credit card: 7-15 working days"; with more columns,
    "Region: Standard 1-2 days, Express next day"."""
    chinese = bool(_HAN_RUN.search("".join(cells)))
    colon, comma = ("：", "，") if chinese else (": ", ", ")
    if len(cells) < 2:
        return cells[0] if cells else ""
    if len(cells) == 2:
        return f"{cells[0]}{colon}{cells[1]}"
    space = "" if chinese else " "
    named = [
        f"{name}{space}{cell}" if name else cell
        for name, cell in zip_longest(header[1:], cells[1:], fillvalue="")
        if cell
    ]
    return cells[0] + colon + comma.join(named)


def _plain(text: str) -> str:
    for pattern, replacement in _MARKUP:
        text = pattern.sub(replacement, text)
    return text.strip()


def _stem(word: str) -> str:
    """A crude English stem, enough for "refunds", "refunded", "refunding" to meet."""
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", "e"), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: len(word) - len(suffix)] + keep
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # shipp(ing) -> ship
    return word.removesuffix("e") if len(word) > 3 else word


def _terms(text: str) -> frozenset[str]:
    folded = fold(text)
    terms = {_stem(w) for w in _WORD.findall(folded) if w not in _STOP_WORDS}
    for run in _HAN_RUN.findall(folded):
        if len(run) == 1 and run not in _STOP_HAN:
            terms.add(run)
        terms.update(
            run[i : i + 2]
            for i in range(len(run) - 1)
            if not (run[i] in _STOP_HAN and run[i + 1] in _STOP_HAN)
            and run[i : i + 2] not in _STOP_BIGRAMS
        )
    return frozenset(terms)


def _weights(pieces: Sequence[_Piece]) -> dict[str, float]:
    """Rarer terms within the passage weigh more: the word that sets one row apart counts."""
    counts: dict[str, int] = {}
    for piece in pieces:
        for term in piece.terms:
            counts[term] = counts.get(term, 0) + 1
    return {term: math.log(1 + len(pieces) / n) for term, n in counts.items()}


def _wanted(terms: frozenset[str], weights: dict[str, float]) -> dict[str, float]:
    """The question's terms as the passage spells them, each with how much a match counts: a
    word one typo away ("refnd") or two words run together ("creditcard") a little less than
    the word itself."""
    out: dict[str, float] = {}
    for term in terms:
        if term in weights:
            out[term] = 1.0
        elif term.isascii() and term.isalpha() and len(term) >= 5:
            for known in _spelled(term, weights):
                out.setdefault(known, 0.7)
    return out


def _spelled(word: str, vocabulary: dict[str, float]) -> list[str]:
    for cut in range(3, len(word) - 2):
        if word[:cut] in vocabulary and _stem(word[cut:]) in vocabulary:
            return [word[:cut], _stem(word[cut:])]
    return [term for term in vocabulary if term.isascii() and _one_edit(word, term)][:1]


def _one_edit(a: str, b: str) -> bool:
    """Whether `a` and `b` differ by one insertion, deletion, substitution or swap."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) < len(b):
        return a[i:] == b[i + 1 :]
    swapped = a[i + 1 : i + 2] + a[i : i + 1] == b[i : i + 2] and a[i + 2 :] == b[i + 2 :]
    return a[i + 1 :] == b[i + 1 :] or swapped


def _score(
    piece: _Piece, wanted: dict[str, float], asks: set[str], weights: dict[str, float]
) -> float:
    score = sum(weights[term] * factor for term, factor in wanted.items() if term in piece.terms)
    if score > 0 and asks & piece.kinds:
        score += 1.0
    return score


def _joined(texts: list[str], language: str) -> str:
    if len(texts) == 1:
        return texts[0]
    stop = "。" if language == "zh" else "."
    ended = [text if text.endswith(_END) else text + stop for text in texts]
    return ("" if language == "zh" else " ").join(ended)
