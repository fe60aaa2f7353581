"""Hybrid recall scoring. Pure: candidates in, ranked and thresholded memories out.

score = 0.30 * lexical + 0.35 * match + 0.10 * recency + 0.25 * decayed confidence

- lexical: over the query's units (latin words, CJK bigrams), half coverage and half BM25
  (k1 1.2, b 0.75) normalised by the score of a memory holding each unit once; in [0, 1].
  Term statistics come from the user's own memories only: another user's or tenant's data
  never moves a ranking. A fact's text includes its key name's words. With an embedding model,
  lexical is max(lexical, cosine).
- match: 1 when the memory's key or entity is the one the query names (also when the query
  holds every word of a fact's key name: "format" and "report" for `report_format`), 0.8
  when the intent implies its key (a return implies the courier) or the question asks for its
  fact type ("do you remember …?" asks for notes), 0.5 when the intent or a
  type word ("方案", "plan") points at its fact type.
- recency: halves every two weeks since the last update.
Each fact type has its own threshold around the configured one; at most top_k survive.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.memory.decay import DecayPolicy, current_confidence, recallable, recency
from app.memory.lexicon import normalize
from app.memory.records import MemoryItem
from app.settings import MemorySettings

W_LEXICAL, W_MATCH, W_RECENCY, W_CONFIDENCE = 0.30, 0.35, 0.10, 0.25
_K1, _B = 1.2, 0.75


def thresholds_around(base: float) -> dict[str, float]:
    """Per-type thresholds: stated preferences recall a little easier, free notes harder."""
    return {
        "preference": base - 0.05,
        "contact": base,
        "decision": base,
        "profile": base,
        "event": base + 0.05,
        "note": base + 0.05,
    }


@dataclass(frozen=True)
class RecallQuery:
    units: tuple[str, ...]
    keys: frozenset[str] = frozenset()  # keys the text names: a strong match
    entities: frozenset[str] = frozenset()
    implied: frozenset[str] = frozenset()  # keys the intent implies
    kinds: frozenset[str] = frozenset()  # fact types the intent or wording points at
    asked: frozenset[str] = frozenset()  # fact types the question asks for ("do you remember")


@dataclass(frozen=True)
class ScoringConfig:
    threshold: float
    top_k: int
    # Per fact type, over those `threshold` implies (not settings: tests and calibration).
    thresholds: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: MemorySettings) -> ScoringConfig:
        return cls(settings.recall_threshold, settings.recall_top_k)

    def threshold_for(self, fact_type: str) -> float:
        merged = {**thresholds_around(self.threshold), **self.thresholds}
        return merged.get(fact_type, self.threshold)


@dataclass(frozen=True)
class Scored:
    item: MemoryItem
    score: float
    lexical: float
    match: float
    recency: float
    confidence: float

    def parts(self) -> dict[str, float]:
        return {
            "lexical": round(self.lexical, 3),
            "match": round(self.match, 3),
            "recency": round(self.recency, 3),
            "confidence": round(self.confidence, 3),
        }


def lexical_scores(units: Iterable[str], texts: list[str], collection_size: int) -> list[float]:
    """Half coverage (share of the query's units the text holds), half BM25 normalised over
    the units some candidate holds: Chinese queries make bigrams that span two words ("诉快"),
    which match nothing and would otherwise swamp the normalisation."""
    units = list(dict.fromkeys(normalize(u) for u in units if u))
    if not units or not texts:
        return [0.0] * len(texts)
    lowered = [normalize(t) for t in texts]
    n = max(collection_size, len(texts))
    avgdl = sum(len(t) for t in lowered) / len(lowered) or 1.0
    idf = {}
    for unit in units:
        df = sum(1 for t in lowered if unit in t)
        if df:
            idf[unit] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    out = []
    for text in lowered:
        norm = _K1 * (1 - _B + _B * len(text) / avgdl)
        held = [u for u in idf if u in text]
        got = sum(idf[u] * (text.count(u) * (_K1 + 1)) / (text.count(u) + norm) for u in held)
        ideal = sum(idf[u] * (_K1 + 1) / (1 + norm) for u in idf)
        bm25 = min(1.0, got / ideal) if ideal > 0 else 0.0
        out.append(0.5 * len(held) / len(units) + 0.5 * bm25)
    return out


def key_words(item: MemoryItem) -> tuple[str, ...]:
    """The words of a fact's own key name (`report_format` -> report, format; the namespace
    of `preference.courier` left out); none for nodes, whose keys are hashes."""
    if item.tier != "fact" or not item.key:
        return ()
    name = item.key.rsplit(".", 1)[-1]
    return tuple(w for w in re.split(r"[_\-\s]+", normalize(name)) if len(w) >= 3)


def rank(
    items: list[MemoryItem],
    query: RecallQuery,
    *,
    now: float,
    collection_size: int,
    policy: DecayPolicy,
    config: ScoringConfig,
    semantic: Mapping[int, float] | None = None,
) -> list[Scored]:
    """Recallable items scored, above their type's threshold, best first, at most top_k."""
    live = [
        i
        for i in items
        if recallable(i.confidence, i.last_confirmed_at, i.valid_until, now, policy)
    ]
    # A fact's key is words too: `report_format = PDF` answers "same format for the report",
    # though its value alone ("PDF") shares no word with the question.
    texts = [" ".join((i.search_text, *key_words(i))) for i in live]
    lexical = lexical_scores(query.units, texts, collection_size)
    units = {normalize(u) for u in query.units}
    # "Do you remember …?" is about one note: the closest of the asked type (ties kept), so a
    # customer's other notes are not all pulled in by the question's form.
    asked_lex = [
        lex for item, lex in zip(live, lexical, strict=True) if item.fact_type in query.asked
    ]
    closest = max(asked_lex, default=0.0)
    scored = []
    for item, lex in zip(live, lexical, strict=True):
        if semantic:
            lex = max(lex, semantic.get(item.pk, 0.0))
        words = key_words(item)
        if item.key in query.keys or (item.entity is not None and item.entity in query.entities):
            match = 1.0
        elif words and all(w in units for w in words):  # the question names the key's words
            match = 1.0
        elif item.key in query.implied or (item.fact_type in query.asked and lex >= closest):
            match = 0.8
        elif item.fact_type in query.kinds:
            match = 0.5
        else:
            match = 0.0
        fresh = recency(item.updated_at, now, policy)
        confidence = current_confidence(item.confidence, item.last_confirmed_at, now, policy)
        total = W_LEXICAL * lex + W_MATCH * match + W_RECENCY * fresh + W_CONFIDENCE * confidence
        if total >= config.threshold_for(item.fact_type):
            scored.append(Scored(item, total, lex, match, fresh, confidence))
    scored.sort(key=lambda s: (-s.score, -s.item.updated_at))
    return scored[: config.top_k]
