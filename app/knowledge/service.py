"""The knowledge base: what the CLI, the start-up load, the API and the turn call.

`add` reads a document whole before it writes anything (a document that cannot be read, or is
too large, leaves nothing behind), then stores it and its chunks in one transaction. `search`
asks the engine's index for candidates (the chunks best covering the question's terms by their
weights, app/knowledge/selection.py) and ranks them with the one scorer
(app/knowledge/scoring.py); with an embedding model it also ranks the tenant's chunks by
cosine and fuses the two rankings (reciprocal rank fusion). Every method takes the tenant and
sees only its documents.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from app.errors import DocumentNotFound, DocumentTooLarge, InvalidDocument
from app.knowledge import lexicon, store
from app.knowledge.analysis import terms_column
from app.knowledge.chunking import chunk
from app.knowledge.gaps import KnowledgeGaps
from app.knowledge.parsing import Format, parse
from app.knowledge.passages import Passage, section_path
from app.knowledge.records import Added, Document, DocumentPage
from app.knowledge.scoring import own_heading, question_terms, score
from app.knowledge.selection import absent, needed, weighed
from app.settings import KnowledgeSettings
from app.storage.session_writer import NO_SESSION
from app.storage.tx import Store, Tx
from app.text.language import detect_language

log = logging.getLogger(__name__)

Clock = Callable[[], float]
# Chunks the index hands the scorer at most. 100, not 200: each costs a search the same to
# fetch and score, and more did not find more: recall@3 (en/zh) of the labelled questions among
# 10,000 generated chunks was 0.616/0.447 with 100 and 0.607/0.390 with 200; the demo documents'
# figures are the same either way (bench/knowledge.py, hermes kb eval).
CANDIDATES = 100
VECTORS = 5000  # chunks compared by cosine at most
RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al.)


class Embedder(Protocol):
    """What knowledge needs of an embedding model: the memory layer's `Embedder` fits."""

    model: str

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


def content_hash(content: bytes, **meta: Any) -> str:
    """The document's identity as stored: its bytes and the metadata given with them (a new
    `valid_until` for the same text is a change too)."""
    digest = hashlib.sha256(content)
    digest.update(json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str).encode())
    return digest.hexdigest()


class KnowledgeBase(Store):
    def __init__(
        self,
        db: Any,
        settings: KnowledgeSettings | None = None,
        *,
        embedder: Embedder | None = None,
        clock: Clock = time.time,
    ) -> None:
        super().__init__(db)
        self.settings = settings or KnowledgeSettings()
        self.embedder = embedder
        self.clock = clock
        self.queries = store.KnowledgeQueries(db)
        self.gaps = KnowledgeGaps(db)  # what the documents did not answer (app/knowledge/gaps.py)

    # -- documents --------------------------------------------------------------------------

    async def add(
        self,
        tenant_id: str,
        *,
        source: str,
        content: bytes,
        format: Format,
        title: str | None = None,
        language: str | None = None,
        tags: Sequence[str] = (),
        source_url: str | None = None,
        valid_from: float | None = None,
        valid_until: float | None = None,
        trusted: bool = False,
        created_by: str = "operator",
    ) -> Added:
        self.check_size(len(content))
        if not source.strip():
            raise InvalidDocument("a document needs a source (file name, URL or title)")
        parsed = parse(content, format)  # raises InvalidDocument before anything is written
        chunks = chunk(parsed)
        if not chunks:
            raise InvalidDocument("the document has no text")
        title = (title or parsed.title or source).strip()
        if language is None:
            language = detect_language(" ".join(c.text for c in chunks[:20]))
        meta: dict[str, Any] = {
            "title": title,
            "language": language,
            "tags": list(tags),
            "source_url": source_url,
            "valid_from": valid_from,
            "valid_until": valid_until,
            "trusted": trusted,
        }
        digest = content_hash(content, format=format, **meta)
        vectors = await self._embed(
            [f"{title}\n{section_path(c.section)}\n{c.text}" for c in chunks]
        )
        new = store.NewDocument(
            tenant_id=tenant_id,
            source=source,
            title=title,
            language=language,
            format=format,
            tags=tuple(tags),
            source_url=source_url,
            content_hash=digest,
            valid_from=valid_from,
            valid_until=valid_until,
            trusted=trusted,
            created_by=created_by,
            chunks=tuple(
                store.NewChunk(
                    ordinal=c.ordinal,
                    section=section_path(c.section),
                    text=c.text,
                    terms=terms_column(title, *c.section, c.text),
                    embedding=vector,
                    embedding_model=None if vector is None else self._model,
                )
                for c, vector in zip(chunks, vectors, strict=True)
            ),
        )

        def job(tx: Tx) -> Added:
            existing = store.by_source(tx, tenant_id, source)
            if existing is None and source_url:
                # the same page under another source: the demo's file, now sent by its URL
                existing = store.by_source_url(tx, tenant_id, source_url)
            if existing is not None and existing.content_hash == digest:
                return Added(existing, "unchanged")
            saved = store.save(tx, new, existing)
            return Added(saved, "added" if existing is None else "updated")

        return await self.transact(NO_SESSION, job)

    def check_size(self, size: int) -> None:
        """Refuse a document of `size` bytes over the limit (413), before it is read."""
        limit = self.settings.max_document_bytes
        if size > limit:
            raise DocumentTooLarge(
                f"the document is {size} bytes, over the limit of {limit}", size=size, limit=limit
            )

    async def get(self, tenant_id: str, document_id: str) -> Document:
        document = await self.queries.get(tenant_id, document_id)
        if document is None:
            raise DocumentNotFound("no such document", document_id=document_id)
        return document

    async def list_documents(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 50
    ) -> DocumentPage:
        items, next_cursor = await self.queries.page(tenant_id, cursor, limit)
        return DocumentPage(items, next_cursor)

    async def count(self, tenant_id: str) -> int:
        return await self.queries.count(tenant_id)

    async def delete(self, tenant_id: str, document_id: str) -> None:
        """The document and its chunks, gone from search when this returns."""
        deleted = await self.transact(
            NO_SESSION, lambda tx: store.delete(tx, tenant_id, document_id)
        )
        if not deleted:
            raise DocumentNotFound("no such document", document_id=document_id)

    # -- search -----------------------------------------------------------------------------

    async def search(
        self,
        tenant_id: str,
        query: str,
        *,
        language: str | None = None,
        limit: int | None = None,
    ) -> list[Passage]:
        """Passages scoring at least the threshold, best first, at most `limit` (the top-k
        setting); those in `language`, when given, before those in another."""
        ranked = await self.rank(tenant_id, query)
        threshold = self.settings.threshold
        passing = [(c, shown) for c, value in ranked if (shown := _shown(value)) >= threshold]
        if language is not None:
            passing.sort(key=lambda pair: pair[0].language != language)  # stable: keeps ranks
        return [_passage(c, shown) for c, shown in passing[: limit or self.settings.top_k]]

    async def rank(self, tenant_id: str, query: str) -> list[tuple[store.Candidate, float]]:
        """Every candidate passage for `query`, best first, with its score (no threshold)."""
        now = self.clock()
        if not lexicon.loaded():  # the first search of the process: ~0.1 s, off the loop
            await asyncio.to_thread(lexicon.load)
        terms = question_terms(query)
        units = sorted({u for term in terms for u in term.units})
        frequencies = await self.queries.frequencies(tenant_id, units) if units else {}
        least = absent(terms, frequencies, CANDIDATES)
        wanted = needed(weighed(terms, frequencies), self.settings.threshold, least)
        candidates = await self.queries.candidates(tenant_id, wanted, now, CANDIDATES)
        # The collection size the weights are taken against is the index's, as the unit
        # counts are: every stored chunk, a policy out of its validity dates included.
        scores = score(
            terms,
            [c.units for c in candidates],
            [c.heading for c in candidates],
            frequencies.get("", 0),
            [own_heading(c.title, c.section) for c in candidates],
            frequencies,
        )
        # Passages that score the same are in document order: a question about a whole
        # document ("What is your return policy?" of "Return policy") is answered by what
        # the document says first, its general rule, before the special cases after it.
        # Between documents the index's order stands (the older document first).
        first: dict[str, int] = {}
        for c in candidates:
            first.setdefault(c.document_id, len(first))
        lexical = sorted(
            zip(candidates, scores, strict=True),
            key=lambda pair: (-pair[1], first[pair[0].document_id], pair[0].ordinal),
        )
        lexical = [(c, s) for c, s in lexical if s > 0]
        semantic = await self._semantic(tenant_id, query, now)
        if not semantic:
            return lexical
        return _fused(lexical, semantic)

    async def _semantic(
        self, tenant_id: str, query: str, now: float
    ) -> list[tuple[store.Candidate, float]]:
        if self.embedder is None:
            return []
        vectors = await self._embed([query])
        if vectors[0] is None:
            return []
        stored = await self.queries.vectors(tenant_id, self._model, now, VECTORS)
        if not stored:
            return []
        query_vector = np.frombuffer(vectors[0], dtype=np.float32)
        kept = [(c, blob) for c, blob in stored if len(blob) == query_vector.nbytes]
        if not kept:
            return []
        matrix = np.vstack([np.frombuffer(blob, dtype=np.float32) for _, blob in kept])
        cosines = np.clip(matrix @ query_vector, 0.0, 1.0)
        order = np.argsort(-cosines, kind="stable")[:CANDIDATES]
        return [(kept[i][0], float(cosines[i])) for i in order if cosines[i] > 0]

    @property
    def _model(self) -> str:
        return "" if self.embedder is None else self.embedder.model

    async def _embed(self, texts: list[str]) -> list[bytes | None]:
        """Unit-length float32 vectors; None for each when there is no model or it failed (a
        failing model never fails an add or a search: they go on lexically)."""
        if self.embedder is None or not texts:
            return [None] * len(texts)
        try:
            vectors = await self.embedder.embed(texts)
        except Exception:
            log.warning("embedding failed; continuing without vectors", exc_info=True)
            return [None] * len(texts)
        out: list[bytes | None] = []
        for vector in vectors:
            array = np.asarray(vector, dtype=np.float32)
            norm = float(np.linalg.norm(array))
            out.append((array / norm).astype(np.float32).tobytes() if norm > 0 else None)
        return out


def _shown(value: float) -> float:
    """A score as a passage carries it (and the threshold reads it): 0..1, to 4 places."""
    return round(min(1.0, max(0.0, value)), 4)


def _passage(candidate: store.Candidate, score: float) -> Passage:
    return Passage(
        document_id=candidate.document_id,
        chunk_id=candidate.chunk_id,
        title=candidate.title,
        section=candidate.section,
        text=candidate.text,
        language=candidate.language,
        score=score,
        trusted=candidate.trusted,
        version=candidate.version,
        source_url=candidate.source_url,
    )


def _fused(
    lexical: list[tuple[store.Candidate, float]], semantic: list[tuple[store.Candidate, float]]
) -> list[tuple[store.Candidate, float]]:
    """Reciprocal rank fusion of the two rankings. A passage's score (what the threshold
    reads) is the better of its lexical score and its cosine: both are 0..1, and a passage
    either ranking is sure of is worth showing."""
    fused: dict[str, float] = {}
    best: dict[str, tuple[store.Candidate, float]] = {}
    for ranking in (lexical, semantic):
        for rank, (candidate, value) in enumerate(ranking):
            key = candidate.chunk_id
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
            if key not in best or value > best[key][1]:
                best[key] = (candidate, value)
    order = sorted(fused, key=lambda key: -fused[key])
    return [best[key] for key in order]
