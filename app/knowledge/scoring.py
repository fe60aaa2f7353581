"""The one scorer of knowledge search, the same on SQLite and PostgreSQL.

The engines only find candidates (chunks sharing a unit with the question, see
app/knowledge/analysis.py); this module ranks them, so a score and the threshold mean the same
on both. A passage's score is the share of the question it covers, each question term weighted
by how rare it is among the tenant's chunks (BM25's inverse document frequency):

    coverage = sum(weight(t) * match(t, passage)) / sum(weight(t))    in 0..1

of which 30 % depends on the terms also being in the passage's title or section path (the
heading says what a passage is about; half of that on its own section heading, which tells
the passages of one document apart), raised to a calibrating power (see CALIBRATION).

A term is a question unit (a Latin word stem, a Chinese bigram; function and question words
left out, app/knowledge/analysis.py) or a glossary group the question names
(app/knowledge/glossary.py: "send back" meets "return", "退款" meets "refund", a duration meets
"how long"). A unit weighs its idf times how specific it is in everyday language
(app/knowledge/lexicon.py: "time" and "take" keep 15-25 %, "refund" all of it), since a
collection of a hundred passages is too small to tell a common word it happens to hold once
from the question's point; the idf counts PSEUDO_COUNT more chunks for every term, for the
same reason. A Chinese pair across a dictionary word's edge (我朋 in 我朋友) is no term at all.
A term matches fully when the passage (with its document's title and tags) has one of its
forms, and 0.8 when the question misspelt it: a Latin word one or two edits away ("retrun" ->
"return") or sharing a long prefix, a Chinese pair read alike (积份 -> 积分). A term the
documents never use weighs as a term only one chunk has, in full however common: "Can I pay in
Bitcoin?" covers half of itself at most, and a question whose words are all unknown scores 0.
A Chinese pair no passage has is such a word when the dictionary has it (天气 in 明天上海天气,
though 天 is found), noise when it is no word and both its characters belong to found words,
and otherwise an unknown character.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

from app.knowledge.analysis import (
    HAN_STOP_CHARS,
    Units,
    bigrams,
    latin_words,
    normalize,
    question_units,
    text_units,
)
from app.knowledge.glossary import ANSWERS, GROUPS
from app.knowledge.lexicon import is_word, sounds_like, specificity, straddling
from app.knowledge.passages import SECTION_SEPARATOR
from app.text.script import HAN

_HAN_RUN = re.compile(f"[{HAN}]+")
FUZZY = 0.8  # what a misspelt term's near match is worth
GAP = 2  # words a glossary phrase may have inside it in a question
HAN_CHAR = 0.5  # a single Chinese character's share of the weight a word would have
HEADING = 0.3  # the share of the score that depends on the passage's title and section
# Of that share, what depends on the passage's own section heading (its path below the
# document's title): every passage of a document has the title's words, so only its own
# heading tells which of them a question is about ("怎么取消订单" -> "取消订单 › 发货前取消",
# not "取消订单 › 定制商品", which merely says "不能取消" in its text).
OWN_HEADING = 0.5
# The coverage is raised to this power, so that the articles' threshold of 0.55 falls where
# the labelled questions (data/knowledge/eval/questions.jsonl) put the line: at 0.55, 1 of the
# 24 unanswerable questions gets a source (the target allows 5 %). A power keeps the order of
# passages and 0 and 1 where they are.
CALIBRATION = 0.55
# Passages a term is counted in beyond its own: in a collection of a hundred passages a word
# found in one ("下单", "many") otherwise weighs as much as the question's point.
PSEUDO_COUNT = 2


@dataclass(frozen=True)
class Term:
    forms: tuple[tuple[str, ...], ...]  # the passage matches when it has all units of a form
    word: str | None = None  # a Latin word that may be misspelt
    share: float = 1.0  # of its weight: a single Chinese character says less than a word

    @property
    def han_pair(self) -> bool:
        return (
            len(self.forms) == 1
            and len(self.forms[0]) == 1
            and len(self.forms[0][0]) == 2
            and not self.forms[0][0].isascii()
        )

    @property
    def unknown_share(self) -> float:
        """Its share when no passage has it: a word's in full however common (a question about
        "students" that no document mentions is not answered by one about discounts), a
        single Chinese character's HAN_CHAR."""
        unit = self.forms[0][0]
        return HAN_CHAR if len(unit) == 1 and not unit.isascii() else 1.0

    @property
    def units(self) -> set[str]:
        return {unit for form in self.forms for unit in form}

    def matches(self, units: Container[str]) -> bool:
        return any(all(u in units for u in form) for form in self.forms)


@dataclass(frozen=True)
class _Form:
    latin: tuple[str, ...]  # stems in order ("send", "back"); empty for a Chinese form
    han: str  # the Chinese text; empty for a Latin form

    @property
    def units(self) -> tuple[str, ...]:
        if self.latin:
            return self.latin
        return tuple(bigrams(self.han)) or (self.han,)


def _form(surface: str) -> _Form:
    text = normalize(surface)
    return _Form((), text) if not text.isascii() else _Form(tuple(latin_words(text)), "")


@cache
def _groups() -> tuple[tuple[tuple[_Form, ...], tuple[_Form, ...]], ...]:
    """Each glossary group: the forms a question names it by, and every form that meets it
    (those and what answers it, ANSWERS)."""
    out = []
    for group in GROUPS:
        asked = tuple(_form(surface) for surface in group)
        answered = tuple(_form(surface) for surface in ANSWERS.get(group[0], ()))
        out.append((asked, asked + answered))
    return tuple(out)


def _has_phrase(words: list[str], phrase: tuple[str, ...]) -> bool:
    """Whether `words` say `phrase`: in order, with at most GAP words inside it ("send it all
    back" says "send back"), or its words run together ("hongkong" says "hong kong")."""
    if len(phrase) > 1 and "".join(phrase) in words:
        return True
    starts = [i for i, w in enumerate(words) if w == phrase[0]]
    for start in starts:
        at = start
        for word in phrase[1:]:
            window = words[at + 1 : at + 2 + GAP]
            if word not in window:
                break
            at += 1 + window.index(word)
        else:
            return True
    return False


def question_terms(question: str) -> list[Term]:
    """The terms of a question: glossary groups it names, then its other units."""
    words = latin_words(question)
    lowered = normalize(question)
    terms: list[Term] = []
    covered: set[str] = set()
    for asked, meets in _groups():
        hit: set[str] = set()
        for form in asked:
            if form.latin and _has_phrase(words, form.latin):
                hit.update(form.latin)
                hit.add("".join(form.latin))
            elif form.han and form.han in lowered:
                hit.update(form.units)
        if hit:
            covered |= hit
            terms.append(Term(tuple(form.units for form in meets)))
    covered_chars = {ch for unit in covered if not unit.isascii() for ch in unit}
    # A Chinese pair across a dictionary word's edge is not a word the question says (我朋 and
    # 友的 in 我朋友的账户); one inside a word, or between two characters no word holds, is.
    across: set[str] = set()
    inside: set[str] = set()
    for run in _HAN_RUN.findall(lowered):
        edges = straddling(run)
        across |= edges
        inside.update(pair for pair in bigrams(run) if pair not in edges)
    for unit in question_units(question):
        if unit in covered or unit in covered_chars or (unit in across and unit not in inside):
            continue
        if unit.isascii():
            word = unit if unit.isalpha() and len(unit) >= 4 else None
            terms.append(Term(((unit,),), word, share=specificity(unit)))
        elif len(unit) > 1:
            terms.append(Term(((unit,),), share=specificity(unit)))
        else:
            terms.append(Term(((unit,),), share=HAN_CHAR))
    return terms


def term_df(term: Term, frequencies: Mapping[str, int]) -> int:
    """How many chunks have `term` by the index's unit counts: its most common form's count, a
    form as common as its rarest unit (a lower bound of the true count)."""
    return max(min(frequencies.get(u, 0) for u in form) for form in term.forms)


def idf(df: int, total: int) -> float:
    """BM25's inverse document frequency, as if PSEUDO_COUNT more chunks had every term; a
    term no chunk has counts as one only one has."""
    df = max(1, min(df, total))
    return math.log(1 + (total - df + 0.5) / (df + PSEUDO_COUNT + 0.5))


def _osa(a: str, b: str, limit: int) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment), cut at limit+1."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        if min(row) > limit:
            return limit + 1
        prev2, prev = prev, row
    return prev[-1]


def homophones(pair: str, candidates: Sequence[Units]) -> set[str]:
    """The Chinese pairs in the text of `candidates` a miswritten `pair` may mean: one
    character the same, the other read alike, tones aside (积份 -> 积分, 到帐 -> 到账). Only the
    pairs sharing a character are read, found by `str.find` (a search's candidates have tens
    of thousands of units; their headings' are left out: a heading's words are in its text)."""
    starts, ends = f" {pair[0]}", f"{pair[1]} "  # a unit beginning / ending like `pair`
    found: set[str] = set()
    for units in candidates:
        text = units.padded
        at = text.find(starts)
        while at >= 0:
            if text[at + 3 : at + 4] == " ":
                found.add(text[at + 1 : at + 3])
            at = text.find(starts, at + 2)
        at = text.find(ends)
        while at >= 0:
            if at >= 2 and text[at - 2] == " ":
                found.add(text[at - 1 : at + 1])
            at = text.find(ends, at + 2)
    return {unit for unit in found if sounds_like(pair, unit)}


def near(word: str, vocabulary: set[str]) -> set[str]:
    """Words of `vocabulary` a misspelt `word` may mean: one edit away (two from 8 letters),
    or sharing a prefix of 5+ letters with it ("cancellation" and "cancel")."""
    limit = 1 if len(word) < 8 else 2
    out = set()
    for candidate in vocabulary:
        if not candidate.isascii() or candidate[:1] != word[:1] or len(candidate) < 4:
            continue
        short, long_ = sorted((word, candidate), key=len)
        if (len(short) >= 5 and long_.startswith(short)) or _osa(word, candidate, limit) <= limit:
            out.add(candidate)
    return out


@lru_cache(maxsize=16384)
def own_heading(title: str, section: str) -> frozenset[str]:
    """The units of a passage's own section heading: its section path without the document's
    title (a path's first heading is usually the title; see passages.source_name)."""
    parts = section.split(SECTION_SEPARATOR)
    if parts and normalize(parts[0]) == normalize(title):
        parts = parts[1:]
    return frozenset(text_units(" ".join(parts)))


def _has(term: Term, containers: Sequence[Container[str]]) -> list[bool]:
    """Whether each of `containers` has `term`; a term of one unit (most are) without the
    generic match's generator per container."""
    if len(term.forms) == 1 and len(term.forms[0]) == 1:
        unit = term.forms[0][0]
        return [unit in c for c in containers]
    return [term.matches(c) for c in containers]


def score(
    terms: Sequence[Term],
    candidates: Sequence[Units],
    headings: Sequence[frozenset[str]],
    total: int,
    own: Sequence[frozenset[str]] | None = None,
    frequencies: Mapping[str, int] | None = None,
) -> list[float]:
    """Each candidate's score (see the module docstring); `candidates` are the units of each
    passage with its heading's (a passage says what its document's title and tags say),
    `headings` the units of each candidate's title and section, `own` of its own section heading
    (see `own_heading`), `total` the tenant's chunk count. With the tenant's unit `frequencies`
    (the index's, app/knowledge/store.py), a term weighs by how many of all its chunks have it,
    so a passage's score does not depend on which others were candidates; without them, or for
    a misspelt word's near matches, by how many candidates have it."""
    if not terms or not candidates:
        return [0.0] * len(candidates)
    total = max(total, len(candidates))
    vocabulary: set[str] | None = None
    columns: list[tuple[float, list[float], Term]] = []
    unknown: list[float] = []  # the shares of terms no candidate has
    strays: list[Term] = []  # Chinese character pairs no candidate has
    for term in terms:
        hits = [1.0 if has else 0.0 for has in _has(term, candidates)]
        close: set[str] = set()
        if not any(hits) and term.word is not None:
            if vocabulary is None:
                vocabulary = set().union(*candidates)
            close = near(term.word, vocabulary)
        elif not any(hits) and term.han_pair:
            close = homophones(term.forms[0][0], candidates)
        if close:
            hits = [FUZZY if any(u in units for u in close) else 0.0 for units in candidates]
        df = sum(1 for h in hits if h)
        indexed = term_df(term, frequencies) if frequencies is not None else 0
        if indexed:  # the tenant's chunks have it, whether or not these candidates do
            columns.append((idf(indexed, total) * term.share, hits, term))
            continue
        if df == 0:
            if term.han_pair:
                strays.append(term)
            else:
                unknown.append(term.unknown_share)
            continue
        columns.append((idf(df, total) * term.share, hits, term))
    if not columns:
        return [0.0] * len(candidates)
    # Two characters no passage has together are noise when both belong to words that were
    # found (or are function words): the pair spans a word's edge ("到香" in "寄到香港"). A
    # character no found word holds is part of a word no document uses ("比特币"): unknown.
    known = HAN_STOP_CHARS.union(*(u for _, _, t in columns for u in t.units if not u.isascii()))
    for stray in strays:
        pair = next(iter(stray.units))
        if is_word(pair):
            unknown.append(stray.unknown_share)
        elif not known.issuperset(pair):
            unknown.append(HAN_CHAR)
    # A word no document uses weighs as a word only one chunk has: the question is partly
    # about something the documents do not cover.
    whole = sum(weight for weight, _, _ in columns) + idf(1, total) * sum(unknown)
    if not whole:
        return [0.0] * len(candidates)
    covered = [0.0] * len(candidates)
    titled = [0.0] * len(candidates)
    headed = [0.0] * len(candidates)
    for weight, hits, term in columns:
        in_title = _has(term, headings)
        in_own = _has(term, own) if own is not None else in_title
        for i, hit in enumerate(hits):
            if hit:
                covered[i] += weight * hit
                titled[i] += weight * in_title[i]
                headed[i] += weight * in_own[i]
    out = []
    for i in range(len(candidates)):
        heading = titled[i] / whole
        if own is not None:
            heading = (1 - OWN_HEADING) * heading + OWN_HEADING * headed[i] / whole
        out.append((covered[i] / whole * (1 - HEADING + HEADING * heading)) ** CALIBRATION)
    return out
