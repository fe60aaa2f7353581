"""Every SQL statement that reads memories (through the database's read connections).

Each statement filters by tenant and user. Recall's full-text search is additionally bounded
to the user's primary-key range, so the trigram index only walks that user's postings.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.memory.lexicon import QueryTerms, fts_query
from app.memory.records import HistoryEntry, MemoryItem, Scope
from app.memory.store import COLUMNS, SEQ_BITS
from app.storage.port import Database

_OWNED = "tenant_id = ? AND user_id = ?"
_CANDIDATES = 64


@dataclass(frozen=True)
class Candidates:
    items: list[MemoryItem]
    active_count: int  # the user's active memories, for term statistics


@dataclass(frozen=True)
class ListFilter:
    tier: str | None = None
    status: str | None = None
    key: str | None = None
    text: str | None = None
    limit: int = 100


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class MemoryQueries:
    def __init__(self, db: Database, *, owners_cached: int = 4096) -> None:
        self.db = db
        # Owner ids of recently seen users, least recently used first: a process serves
        # every user in time, so the cache is bounded rather than one entry per user ever seen.
        self._owners: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.owners_max = owners_cached

    async def get(self, scope: Scope, memory_id: str) -> MemoryItem | None:
        row = await self.db.fetchone(
            f"SELECT {COLUMNS} FROM memories WHERE id = ? AND {_OWNED}",
            (memory_id, scope.tenant_id, scope.user_id),
        )
        return None if row is None else MemoryItem.from_row(row)

    async def list_items(self, scope: Scope, filters: ListFilter) -> list[MemoryItem]:
        where, params = [_OWNED], [scope.tenant_id, scope.user_id]
        for column in ("tier", "status", "key"):
            value = getattr(filters, column)
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if filters.text:
            pattern = f"%{_escape_like(filters.text)}%"
            where.append("(value LIKE ? ESCAPE '\\' OR search_text LIKE ? ESCAPE '\\')")
            params.extend([pattern, pattern])
        rows = await self.db.fetchall(
            f"SELECT {COLUMNS} FROM memories WHERE {' AND '.join(where)}"
            " ORDER BY updated_at DESC, pk DESC LIMIT ?",
            (*params, filters.limit),
        )
        return [MemoryItem.from_row(row) for row in rows]

    async def history(self, scope: Scope, memory_id: str) -> list[HistoryEntry] | None:
        """The item's changes, oldest first; None when the user has no such memory."""
        if await self.get(scope, memory_id) is None:
            return None
        rows = await self.db.fetchall(
            "SELECT h.* FROM memory_history h JOIN memories m ON m.pk = h.memory_pk"
            " WHERE m.id = ? AND m.tenant_id = ? AND m.user_id = ? ORDER BY h.id",
            (memory_id, scope.tenant_id, scope.user_id),
        )
        return [HistoryEntry.from_row(row) for row in rows]

    async def candidates(
        self,
        scope: Scope,
        terms: QueryTerms,
        keys: Iterable[str] = (),
        entities: Iterable[str] = (),
        kinds: Iterable[str] = (),
    ) -> Candidates:
        """Active memories of the user that share a term, key, entity or kind with the query."""
        owner = await self._owner(scope)
        if owner is None:
            return Candidates([], 0)
        lo, hi = owner << SEQ_BITS, (owner + 1) << SEQ_BITS
        owned = [scope.tenant_id, scope.user_id]
        kinds = list(kinds)
        keys, entities = list(keys), list(entities)
        # The user's rows are the primary-key range [lo, hi); on SQLite "+column" keeps the
        # planner on that range (and on the index's rowids) instead of an index over every
        # user's rows. Each source gives at most 64 candidates, newest first.
        postgres = self.db.dialect == "postgres"
        mine = (
            "tenant_id = ? AND user_id = ? AND status = 'active'"
            if postgres
            else "+tenant_id = ? AND +user_id = ? AND +status = 'active'"
        )
        parts: list[str] = []
        params: list[Any] = []
        if terms.fts and postgres:
            # pg_trgm's GIN index serves ILIKE '%term%': the same case-insensitive substring
            # match as FTS5's trigram MATCH, Chinese included.
            matches = " OR ".join("search_text ILIKE ? ESCAPE '\\'" for _ in terms.fts)
            parts.append(
                f"SELECT * FROM (SELECT {COLUMNS} FROM memories WHERE pk >= ? AND pk < ?"
                f" AND {mine} AND ({matches}) ORDER BY pk DESC LIMIT {_CANDIDATES}) AS fts"
            )
            params += [lo, hi, *owned, *(f"%{_escape_like(t)}%" for t in terms.fts)]
        elif terms.fts:
            parts.append(
                f"SELECT {COLUMNS} FROM memories WHERE pk IN (SELECT rowid FROM memory_fts"
                " WHERE memory_fts MATCH ? AND rowid >= ? AND rowid < ?"
                f" ORDER BY rowid DESC LIMIT {_CANDIDATES}) AND {mine}"
            )
            params += [fts_query(terms.fts), lo, hi, *owned]
        likes = [f"%{_escape_like(word)}%" for word in terms.short]
        ors = [f"key IN ({', '.join('?' for _ in keys)})"] if keys else []
        ors += [f"entity IN ({', '.join('?' for _ in entities)})"] if entities else []
        ors += [f"fact_type IN ({', '.join('?' for _ in kinds)})"] if kinds else []
        ors += ["search_text LIKE ? ESCAPE '\\'" for _ in likes]
        # A fact's key name is words too ("format" finds `report_format`): its value alone
        # ("PDF") may share nothing with the question. Latin words only; keys are ASCII.
        named = [f"%{_escape_like(t)}%" for t in terms.fts if t.isascii() and t.isalpha()]
        ors += ["(tier = 'fact' AND key LIKE ? ESCAPE '\\')" for _ in named]
        if ors:
            parts.append(
                f"SELECT * FROM (SELECT {COLUMNS} FROM memories WHERE pk >= ? AND pk < ?"
                f" AND {mine} AND ({' OR '.join(ors)}) ORDER BY pk DESC LIMIT {_CANDIDATES})"
                " AS known"
            )
            params += [lo, hi, *owned, *keys, *entities, *kinds, *likes, *named]
        if not parts:
            return Candidates([], 0)
        rows = await self.db.fetchall(
            f"WITH hits AS ({' UNION '.join(parts)})"
            " SELECT hits.*, (SELECT count(*) FROM memories WHERE pk >= ? AND pk < ?"
            f" AND {mine}) AS active_count FROM hits",
            (*params, lo, hi, *owned),
        )
        items = [MemoryItem.from_row(row) for row in rows]
        return Candidates(items, int(rows[0]["active_count"]) if rows else 0)

    async def _owner(self, scope: Scope) -> int | None:
        """The user's owner id (its key range). Ids never change once given: cache them."""
        key = (scope.tenant_id, scope.user_id)
        owner = self._owners.get(key)
        if owner is not None:
            self._owners.move_to_end(key)
            return owner
        row = await self.db.fetchone(
            f"SELECT id FROM memory_owners WHERE {_OWNED}", (scope.tenant_id, scope.user_id)
        )
        if row is None:
            return None
        owner = self._owners[key] = int(row[0])
        if len(self._owners) > self.owners_max:
            self._owners.popitem(last=False)
        return owner

    def owners_cached(self) -> int:
        return len(self._owners)

    async def vectors(self, scope: Scope) -> list[MemoryItem]:
        """The user's active memories that carry an embedding."""
        rows = await self.db.fetchall(
            f"SELECT {COLUMNS}, embedding FROM memories WHERE {_OWNED} AND status = 'active'"
            " AND embedding IS NOT NULL LIMIT 2000",
            (scope.tenant_id, scope.user_id),
        )
        return [MemoryItem.from_row(row) for row in rows]

    async def audit(self, scope: Scope) -> list[dict[str, Any]]:
        rows = await self.db.fetchall(
            "SELECT memory_id, key_hash, action, actor, reason, at FROM memory_audit"
            f" WHERE {_OWNED} ORDER BY id",
            (scope.tenant_id, scope.user_id),
        )
        return [dict(row) for row in rows]
