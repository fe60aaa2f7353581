"""Every SQL statement of the knowledge base, for both engines.

Writes take a `Tx` (the service runs them as one transaction on the writer); reads go through
the database's read connections. Every statement filters by tenant. A document's chunks are
replaced or deleted in the transaction that changes the document, and the full-text index
follows in that transaction too (SQLite: the triggers of migration 0020; PostgreSQL: the
tsvector index over the chunk's terms), so a search never sees a half-changed document.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.knowledge.analysis import Units, text_units
from app.knowledge.records import Document
from app.storage.paging import newest_first
from app.storage.port import Database
from app.storage.records import new_id
from app.storage.tx import Tx

_DOCUMENT = (
    "id, tenant_id, source, title, language, format, tags, source_url, version, content_hash,"
    " valid_from, valid_until, trusted, created_by, chunk_count, created_at, updated_at"
)
_VALID = (
    "(d.valid_from IS NULL OR d.valid_from <= ?) AND (d.valid_until IS NULL OR d.valid_until > ?)"
)
# The expression PostgreSQL's GIN index is built on (migrations 0020 and 0023).
_LEXEMES = "knowledge_lexemes(c.terms)"
_PASSAGE = (
    "c.id AS chunk_id, c.document_id, c.ordinal, c.section, c.text, c.terms, d.title, d.tags,"
    " d.language,"
    " d.trusted, d.version, d.source_url, d.source"
)


@dataclass(frozen=True)
class NewDocument:
    """What `save` stores: the document's fields and its chunks, analysed."""

    tenant_id: str
    source: str
    title: str
    language: str
    format: str
    tags: tuple[str, ...]
    source_url: str | None
    content_hash: str
    valid_from: float | None
    valid_until: float | None
    trusted: bool
    created_by: str
    chunks: tuple[NewChunk, ...]


@dataclass(frozen=True)
class NewChunk:
    ordinal: int
    section: str
    text: str
    terms: str
    embedding: bytes | None = None
    embedding_model: str | None = None


_BATCH = 500  # units per statement, under SQLite's bound-parameter limit
PRE_RANKED = 2  # chunks checked per candidate asked for, when the index ranks first


@dataclass(frozen=True)
class Wanted:
    """A question term as the index finds it: a chunk has it when it has every unit of one of
    its forms; `weight` is what having it is worth to the candidate query's ranking."""

    forms: tuple[tuple[str, ...], ...]
    weight: float
    chunks: int = 0  # of the tenant's chunks, how many have it (a lower bound: see term_df)

    def fts5(self) -> str:
        return " OR ".join(
            "(" + " AND ".join('"' + u.replace('"', '""') + '"' for u in form) + ")"
            for form in self.forms
        )

    def tsquery(self) -> str:
        return " | ".join(
            "("
            + " & ".join("'" + u.replace("\\", "\\\\").replace("'", "''") + "'" for u in form)
            + ")"
            for form in self.forms
        )


@dataclass(frozen=True)
class Candidate:
    """A chunk the index found for a question, with what a passage needs of its document."""

    chunk_id: str
    document_id: str
    ordinal: int  # its place in the document
    section: str
    text: str
    units: Units  # its own and its heading's
    heading: frozenset[str]  # the units of its document's title and tags and its section path
    title: str
    language: str
    trusted: bool
    version: int
    source_url: str | None
    source: str

    @classmethod
    def from_row(cls, row: Any) -> Candidate:
        heading = _heading(row["title"], row["tags"], row["section"])
        return cls(
            chunk_id=row["chunk_id"],
            document_id=row["document_id"],
            ordinal=int(row["ordinal"]),
            section=row["section"],
            text=row["text"],
            units=Units(row["terms"], heading),
            heading=heading,
            title=row["title"],
            language=row["language"],
            trusted=bool(row["trusted"]),
            version=int(row["version"]),
            source_url=row["source_url"],
            source=row["source"],
        )


@lru_cache(maxsize=16384)
def _heading(title: str, tags: str, section: str) -> frozenset[str]:
    """The units of a chunk's title, tags (JSON) and section path. Cached: the same chunks are
    candidates for many questions, and cutting their headings was a third of a search's time
    (bench/knowledge.py)."""
    return frozenset(text_units(" ".join([title, *json.loads(tags), section])))


def by_source(tx: Tx, tenant_id: str, source: str) -> Document | None:
    row = tx.one(
        f"SELECT {_DOCUMENT} FROM knowledge_documents WHERE tenant_id = ? AND source = ?"
        f"{tx.for_update}",
        (tenant_id, source),
    )
    return None if row is None else Document.from_row(row)


def by_source_url(tx: Tx, tenant_id: str, source_url: str) -> Document | None:
    """The tenant's first document with this source URL (a page loaded from a file names its
    URL in its front matter; the API names a document by it)."""
    row = tx.one(
        f"SELECT {_DOCUMENT} FROM knowledge_documents WHERE tenant_id = ? AND source_url = ?"
        f" ORDER BY created_at, id LIMIT 1{tx.for_update}",
        (tenant_id, source_url),
    )
    return None if row is None else Document.from_row(row)


def _by_id(tx: Tx, tenant_id: str, document_id: str) -> Document:
    row = tx.one(
        f"SELECT {_DOCUMENT} FROM knowledge_documents WHERE id = ? AND tenant_id = ?",
        (document_id, tenant_id),
    )
    assert row is not None
    return Document.from_row(row)


def save(tx: Tx, new: NewDocument, existing: Document | None) -> Document:
    """Insert the document, or make it the next version of `existing` (same tenant and
    source): its old chunks go, with their index entries, in this transaction."""
    fields = (
        new.title,
        new.language,
        new.format,
        json.dumps(list(new.tags), ensure_ascii=False),
        new.source_url,
        new.content_hash,
        new.valid_from,
        new.valid_until,
        int(new.trusted),
        new.created_by,
        len(new.chunks),
    )
    if existing is None:
        document_id = new_id("doc")
        tx.execute(
            "INSERT INTO knowledge_documents (id, tenant_id, source, title, language, format,"
            " tags, source_url, content_hash, valid_from, valid_until, trusted, created_by,"
            " chunk_count, version, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (document_id, new.tenant_id, new.source, *fields, tx.now, tx.now),
        )
    else:
        document_id = existing.id
        _drop_chunks(tx, new.tenant_id, document_id, [c.terms for c in new.chunks])
        tx.execute(
            "UPDATE knowledge_documents SET title = ?, language = ?, format = ?, tags = ?,"
            " source_url = ?, content_hash = ?, valid_from = ?, valid_until = ?, trusted = ?,"
            " created_by = ?, chunk_count = ?, version = version + 1, updated_at = ?"
            " WHERE id = ? AND tenant_id = ?",
            (*fields, tx.now, document_id, new.tenant_id),
        )
    tx.conn.executemany(
        "INSERT INTO knowledge_chunks (id, document_id, tenant_id, ordinal, section, text, terms,"
        " embedding, embedding_model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                new_id("chk"),
                document_id,
                new.tenant_id,
                c.ordinal,
                c.section,
                c.text,
                c.terms,
                c.embedding,
                c.embedding_model,
            )
            for c in new.chunks
        ],
    )
    if existing is None:
        _count_units(tx, new.tenant_id, [c.terms for c in new.chunks], [])
    return _by_id(tx, new.tenant_id, document_id)


def delete(tx: Tx, tenant_id: str, document_id: str) -> bool:
    """The document and its chunks (out of the index with them); False when the tenant has no
    such document."""
    found = tx.one(
        f"SELECT id FROM knowledge_documents WHERE id = ? AND tenant_id = ?{tx.for_update}",
        (document_id, tenant_id),
    )
    if found is None:
        return False
    _drop_chunks(tx, tenant_id, document_id, [])
    tx.execute("DELETE FROM knowledge_documents WHERE id = ?", (document_id,))
    return True


def _drop_chunks(tx: Tx, tenant_id: str, document_id: str, replacing: Sequence[str]) -> None:
    """Delete the document's chunks; the unit counts lose theirs and gain `replacing`'s."""
    old = tx.execute(
        "SELECT terms FROM knowledge_chunks WHERE document_id = ?", (document_id,)
    ).fetchall()
    tx.execute("DELETE FROM knowledge_chunks WHERE document_id = ?", (document_id,))
    _count_units(tx, tenant_id, replacing, [row["terms"] for row in old])


def _count_units(tx: Tx, tenant_id: str, added: Iterable[str], removed: Iterable[str]) -> None:
    """Keep migration 0022's document frequencies: each chunk's units (its `terms`) count one
    more when it is added, one less when it goes; the empty unit counts the chunks. In unit
    order, so that two writers on PostgreSQL lock the shared rows in the same order."""
    delta: Counter[str] = Counter()
    for sign, chunks in ((1, added), (-1, removed)):
        for terms in chunks:
            delta[""] += sign
            for unit in terms.split():
                delta[unit] += sign
    changed = sorted((unit, n) for unit, n in delta.items() if n)
    if not changed:
        return
    upsert = " ON CONFLICT (tenant_id, unit) DO UPDATE SET df = knowledge_units.df + excluded.df"
    if tx.dialect == "postgres":  # one statement: a round trip per unit halved ingestion
        tx.execute(
            "INSERT INTO knowledge_units (tenant_id, unit, df) SELECT ?, u, n"
            f" FROM unnest(CAST(? AS text[]), CAST(? AS bigint[])) AS t (u, n){upsert}",
            (tenant_id, [unit for unit, _ in changed], [n for _, n in changed]),
        )
    else:
        tx.conn.executemany(
            f"INSERT INTO knowledge_units (tenant_id, unit, df) VALUES (?, ?, ?){upsert}",
            [(tenant_id, unit, n) for unit, n in changed],
        )
    fallen = [unit for unit, n in changed if n < 0]
    for start in range(0, len(fallen), _BATCH):  # only the units that lost a chunk: a
        batch = fallen[start : start + _BATCH]  # large tenant has hundreds of thousands
        marks = ", ".join("?" * len(batch))
        tx.execute(
            f"DELETE FROM knowledge_units WHERE tenant_id = ? AND unit IN ({marks}) AND df <= 0",
            (tenant_id, *batch),
        )


class KnowledgeQueries:
    """The reads, through the database's read connections."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, tenant_id: str, document_id: str) -> Document | None:
        row = await self.db.fetchone(
            f"SELECT {_DOCUMENT} FROM knowledge_documents WHERE id = ? AND tenant_id = ?",
            (document_id, tenant_id),
        )
        return None if row is None else Document.from_row(row)

    async def page(
        self, tenant_id: str, cursor: str | None, limit: int
    ) -> tuple[list[Document], str | None]:
        """Newest first; the cursor is the last item's (created_at, id)."""
        select = f"SELECT {_DOCUMENT} FROM knowledge_documents"
        return await newest_first(
            self.db, select, ["tenant_id = ?"], [tenant_id], cursor, limit, Document.from_row
        )

    async def count(self, tenant_id: str) -> int:
        row = await self.db.fetchone(
            "SELECT count(*) FROM knowledge_documents WHERE tenant_id = ?", (tenant_id,)
        )
        return 0 if row is None else int(row[0])

    async def frequencies(self, tenant_id: str, units: Sequence[str]) -> dict[str, int]:
        """How many of the tenant's chunks have each of `units` (absent: none); under the empty
        unit, how many chunks it has (migration 0022)."""
        marks = ", ".join("?" * (len(units) + 1))
        rows = await self.db.fetchall(
            f"SELECT unit, df FROM knowledge_units WHERE tenant_id = ? AND unit IN ({marks})",
            (tenant_id, "", *units),
        )
        return {row["unit"]: int(row["df"]) for row in rows}

    async def candidates(
        self, tenant_id: str, wanted: Sequence[Wanted], now: float, limit: int
    ) -> list[Candidate]:
        """Chunks of documents valid at `now` that have any of `wanted`, ranked by the weights
        of those they have (the index only counts: no chunk's text is read to rank it), the
        best `limit` of them; ties in chunk order."""
        if not wanted:
            return []
        postgres = self.db.dialect == "postgres"
        hits = " UNION ALL ".join(
            "SELECT c.pk, CAST(? AS REAL) AS w FROM knowledge_chunks c"
            f" WHERE {_LEXEMES} @@ CAST(? AS tsquery) AND c.tenant_id = ?"
            if postgres
            else "SELECT rowid AS pk, ? AS w FROM knowledge_fts WHERE knowledge_fts MATCH ?"
            for _ in wanted
        )
        params: list[Any] = []
        for want in wanted:
            params += [want.weight, want.tsquery() if postgres else want.fts5()]
            if postgres:
                params.append(tenant_id)

        # When many chunks have the wanted terms, they are ranked by the index first and only
        # the best few times `limit` are joined to their documents for the tenant and validity
        # checks: joining every one of them was most of the query at 100,000 chunks. If the
        # checks leave fewer than `limit` (another tenant's chunks, or expired ones, ranked
        # high), they are run over every chunk that has a wanted term instead.
        async def best(top: str, *top_params: int) -> list[Any]:
            return await self.db.fetchall(
                f"WITH hits AS ({hits}), ranked AS (SELECT pk, sum(w) AS s FROM hits GROUP BY pk"
                f"{top}) SELECT {_PASSAGE} FROM ranked r JOIN knowledge_chunks c ON c.pk = r.pk"
                " JOIN knowledge_documents d ON d.id = c.document_id"
                f" WHERE c.tenant_id = ? AND {_VALID} ORDER BY r.s DESC, c.pk LIMIT ?",
                (*params, *top_params, tenant_id, now, now, limit),
            )

        rows: list[Any] = []
        if sum(want.chunks for want in wanted) > limit * PRE_RANKED:
            rows = await best(" ORDER BY s DESC, pk LIMIT ?", limit * PRE_RANKED)
        if len(rows) < limit:
            rows = await best("")
        return [Candidate.from_row(row) for row in rows]

    async def vectors(
        self, tenant_id: str, model: str, now: float, limit: int
    ) -> list[tuple[Candidate, bytes]]:
        """Chunks of valid documents embedded by `model`, with their vectors."""
        rows = await self.db.fetchall(
            f"SELECT {_PASSAGE}, c.embedding FROM knowledge_chunks c"
            " JOIN knowledge_documents d ON d.id = c.document_id"
            f" WHERE c.tenant_id = ? AND c.embedding_model = ? AND {_VALID} LIMIT ?",
            (tenant_id, model, now, now, limit),
        )
        return [(Candidate.from_row(row), bytes(row["embedding"])) for row in rows]
