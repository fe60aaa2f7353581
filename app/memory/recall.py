"""Recall: from a user's words (and the parsed intent) to at most top_k scored memories.

Candidates come from the trigram index (terms of three or more characters), from substring
matches of two-character Chinese words, and from the keys, entities and fact types the turn
points at; with an embedding model, also from cosine similarity. `scoring.rank` decides.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.memory.cues import recall_reason
from app.memory.decay import DecayPolicy
from app.memory.embeddings import Embedder, cosine, embed_one, unpack
from app.memory.lexicon import (
    find_entities,
    intent_keys,
    keys_cued,
    kinds_asked,
    kinds_cued,
    query_terms,
)
from app.memory.port import Recall
from app.memory.queries import MemoryQueries
from app.memory.records import MemoryItem, Scope
from app.memory.scoring import RecallQuery, ScoringConfig, rank

SEMANTIC_FLOOR = 0.35  # below this cosine a memory is not a candidate on meaning alone


class Recaller:
    def __init__(
        self,
        queries: MemoryQueries,
        *,
        policy: DecayPolicy,
        scoring: ScoringConfig,
        embedder: Embedder | None = None,
    ) -> None:
        self.queries = queries
        self.policy = policy
        self.scoring = scoring
        self.embedder = embedder

    async def recall(
        self,
        scope: Scope,
        text: str,
        *,
        now: float,
        intent: str | None = None,
        entities: Iterable[str] = (),
        force: bool = False,
    ) -> Recall:
        reason = recall_reason(text, intent) or ("forced" if force else None)
        if reason is None:
            return Recall()
        terms = query_terms(text)
        keys = keys_cued(text)
        implied = intent_keys(intent) - keys
        kinds = kinds_cued(text, intent)
        named = {e.value for e in find_entities(text)} | set(entities)
        found = await self.queries.candidates(
            scope, terms, keys=keys | implied, entities=named, kinds=kinds
        )
        items = found.items
        semantic = await self._semantic(scope, text, items)
        if semantic:
            known = {i.pk for i in items}
            items = items + [i for i in semantic[1] if i.pk not in known]
        query = RecallQuery(
            units=terms.units,
            keys=frozenset(keys),
            entities=frozenset(named),
            implied=frozenset(implied),
            kinds=frozenset(kinds),
            asked=frozenset(kinds_asked(text)),
        )
        scored = rank(
            items,
            query,
            now=now,
            collection_size=found.active_count,
            policy=self.policy,
            config=self.scoring,
            semantic=semantic[0] if semantic else None,
        )
        return Recall(scored, reason)

    async def _semantic(
        self, scope: Scope, text: str, lexical: list[MemoryItem]
    ) -> tuple[dict[int, float], list[MemoryItem]] | None:
        if self.embedder is None:
            return None
        blob = await embed_one(self.embedder, text)
        if blob is None:
            return None
        stored = await self.queries.vectors(scope)
        if not stored:
            return None
        sims = cosine(unpack(blob), [i.embedding or b"" for i in stored])
        by_pk = {i.pk: max(0.0, float(s)) for i, s in zip(stored, sims, strict=True)}
        extra = [i for i, s in zip(stored, sims, strict=True) if s >= SEMANTIC_FLOOR]
        return by_pk, extra
