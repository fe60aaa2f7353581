"""Hybrid recall scoring. Pure: candidates in, ranked and thresholded memories out.

score = 0.35 * lexical + 0.30 * match + 0.10 * recency + 0.25 * decayed confidence

- lexical: BM25 (k1 1.2, b 0.75) over the query's units (latin words, CJK bigrams), normalised
  by the score of a memory that holds each unit once, so it lies in [0, 1]. Term statistics
  come from the user's own memories only: another tenant's data never moves a ranking. With an
  embedding model configured, lexical is max(lexical, cosine).
- match: 1 when the memory's key or entity is the one the query names, 0.6 when the intent or
  a type word ("方案", "plan") points at its kind.
- recency: halves every two weeks since the last update.
Each fact type has its own threshold around the configured one; at most top_k survive.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.memory.decay import DecayPolicy, current_confidence, recallable, recency
from app.memory.lexicon import normalize
from app.memory.records import MemoryItem

W_LEXICAL, W_MATCH, W_RECENCY, W_CONFIDENCE = 0.35, 0.30, 0.10, 0.25
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
    kinds: frozenset[str] = frozenset()  # fact types the intent or wording points at


@dataclass(frozen=True)
class ScoringConfig:
    threshold: float = 0.55
    top_k: int = 5
    thresholds: Mapping[str, float] = field(default_factory=dict)

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
    units = [normalize(u) for u in units if u]
    if not units or not texts:
        return [0.0] * len(texts)
    lowered = [normalize(t) for t in texts]
    n = max(collection_size, len(texts))
    avgdl = sum(len(t) for t in lowered) / len(lowered) or 1.0
    idf = {}
    for unit in units:
        df = sum(1 for t in lowered if unit in t)
        idf[unit] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    out = []
    for text in lowered:
        norm = _K1 * (1 - _B + _B * len(text) / avgdl)
        got = sum(idf[u] * (tf * (_K1 + 1)) / (tf + norm) for u in units if (tf := text.count(u)))
        ideal = sum(idf[u] * (_K1 + 1) / (1 + norm) for u in units)
        out.append(min(1.0, got / ideal) if ideal > 0 else 0.0)
    return out


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
    lexical = lexical_scores(query.units, [i.search_text for i in live], collection_size)
    scored = []
    for item, lex in zip(live, lexical, strict=True):
        if semantic:
            lex = max(lex, semantic.get(item.pk, 0.0))
        if item.key in query.keys or (item.entity is not None and item.entity in query.entities):
            match = 1.0
        elif item.fact_type in query.kinds or item.key in query.kinds:
            match = 0.6
        else:
            match = 0.0
        fresh = recency(item.updated_at, now, policy)
        confidence = current_confidence(item.confidence, item.last_confirmed_at, now, policy)
        total = W_LEXICAL * lex + W_MATCH * match + W_RECENCY * fresh + W_CONFIDENCE * confidence
        if total >= config.threshold_for(item.fact_type):
            scored.append(Scored(item, total, lex, match, fresh, confidence))
    scored.sort(key=lambda s: (-s.score, -s.item.updated_at))
    return scored[: config.top_k]
