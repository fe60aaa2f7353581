"""Which chunks the scorer sees: the candidate query's terms and their weights.

The scorer (app/knowledge/scoring.py) ranks at most CANDIDATES chunks; which ones decides what a
search can find once many chunks share the question's words. They are the chunks covering the
most of the question by the scorer's own weights (each term's inverse document frequency),
counted by the index alone: the tenant's document frequencies are kept per unit (migration
0022), so the weights are known before any chunk is fetched. Ranking every chunk that shares a
unit by FTS5's bm25 or PostgreSQL's ts_rank read each one's positions or rebuilt its tsvector,
and was most of a search's time at 10,000 chunks and more (bench/knowledge.py).

A term of one unit weighs what the scorer will weigh it. A glossary term's chunks are those
having any of its forms: its frequency is taken as its most common form's (a form as common as
its rarest unit), a lower bound of the true one, so the term never weighs less here than there.
A term no chunk has is left out: nothing can be found by it.

Nor is every term searched for (MaxScore's cut, relative to the threshold): a passage's score is
at most its weighted share of the question raised to CALIBRATION, so a chunk that has only the
most common terms, together worth less than the threshold's share of the whole, cannot pass it.
The candidate query looks for the other, rarer terms only, and ranks chunks by those: reading
the postings of the most common words ("how long", 的-like characters) was the rest of the time.
The whole a chunk's share is taken of includes the least the question's words no chunk has will
weigh in the scorer (`absent`): "Can I pay in Bitcoin?" is half about something no document
mentions, so a chunk needs more of the rest to pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.knowledge.lexicon import is_word
from app.knowledge.scoring import CALIBRATION, Term, idf, term_df
from app.knowledge.store import Wanted


def weighed(terms: Sequence[Term], frequencies: Mapping[str, int]) -> list[Wanted]:
    """The terms the index can find, each with its weight; `frequencies` as
    `KnowledgeQueries.frequencies` gives them (the chunk count under "")."""
    total = frequencies.get("", 0)
    out: list[Wanted] = []
    for term in terms:
        df = term_df(term, frequencies)
        if df and total:
            out.append(Wanted(term.forms, idf(df, total) * term.share, df))
    return out


def absent(terms: Sequence[Term], frequencies: Mapping[str, int], candidates: int) -> float:
    """The least the terms no chunk has add to the weight of the whole question in the scorer
    (app/knowledge/scoring.py): a word no passage has weighs as one chunk's; one the scorer may
    take for a misspelling weighs at least as a word all `candidates` have; a Chinese pair that
    is no dictionary word may be noise and weigh nothing."""
    total = frequencies.get("", 0)
    if not total:
        return 0.0
    out = 0.0
    for term in terms:
        if term_df(term, frequencies):
            continue
        unit = term.forms[0][0]
        if term.word is not None or (term.han_pair and is_word(unit)):
            out += idf(min(candidates, total), total) * term.share
        elif not term.han_pair:
            out += idf(1, total) * term.unknown_share
    return out


def needed(wanted: Sequence[Wanted], threshold: float, absent: float = 0.0) -> list[Wanted]:
    """The terms a chunk must have one of to reach `threshold`: all but the commonest, while
    those together weigh less than the threshold's share of the question (of the terms the
    index has, and `absent`, the least the others weigh)."""
    whole = sum(w.weight for w in wanted) + absent
    share = max(0.0, threshold - 0.00005) ** (1 / CALIBRATION)  # a score is shown to 4 places
    order = sorted(wanted, key=lambda w: w.weight)
    common = 0.0
    for i, want in enumerate(order):
        if common + want.weight >= share * whole:
            return order[i:]
        common += want.weight
    return []
