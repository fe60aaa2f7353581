"""SQL that removes or retires memories: hard deletes with a content-free audit, the
selections "forget" works on, and the sweeper's batches (archive, expire, purge).

A hard delete removes the row; its history goes with it (foreign key cascade) and the FTS
trigger writes the index's delete entry. FTS5 (SQLite 3.40 has no `secure-delete`) keeps the
old postings in their segment until that segment is merged, so callers that erase content
merge the index (`merge_step`, in bounded steps) before they report success.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.memory.records import MemoryItem, Scope
from app.memory.store import COLUMNS, key_hash
from app.storage.tx import Tx

_OWNED = "tenant_id = ? AND user_id = ?"


@dataclass(frozen=True)
class Erased:
    id: str
    tenant_id: str
    user_id: str


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def delete_items(
    tx: Tx, items: Iterable[MemoryItem], *, action: str, actor: str, reason: str, now: float
) -> list[Erased]:
    out = []
    for item in items:
        scope = Scope(item.tenant_id, item.user_id)
        tx.execute("DELETE FROM memories WHERE pk = ?", (item.pk,))
        tx.execute(
            "INSERT INTO memory_audit (tenant_id, user_id, memory_id, key_hash, action, actor,"
            " reason, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                item.tenant_id,
                item.user_id,
                item.id,
                key_hash(scope, item.key),
                action,
                actor,
                reason,
                now,
            ),
        )
        out.append(Erased(item.id, item.tenant_id, item.user_id))
    return out


def merge_step(tx: Tx, pages: int, *, start: bool) -> int:
    """One bounded step of merging the FTS index. `start` begins a full merge (every segment
    into one, so deleted postings leave the file); later steps continue it. Returns the
    number of changes: fewer than 2 means there was nothing left to merge."""
    if tx.dialect == "postgres":  # the trigram index is PostgreSQL's own (autovacuum)
        return 0
    before = tx.conn.total_changes  # type: ignore[attr-defined]  # sqlite3's writer
    tx.execute(
        "INSERT INTO memory_fts (memory_fts, rank) VALUES ('merge', ?)",
        (-pages if start else pages,),
    )
    return int(tx.conn.total_changes - before)  # type: ignore[attr-defined]


def matching(tx: Tx, scope: Scope, *, key: str | None, query: str | None) -> list[MemoryItem]:
    """Every memory of the user (any status) with this key, or whose text contains `query`."""
    where, params = [_OWNED], [scope.tenant_id, scope.user_id]
    if key is not None:
        where.append("key = ?")
        params.append(key)
    if query is not None:
        pattern = f"%{_escape_like(query.strip())}%"
        where.append(
            "(value LIKE ? ESCAPE '\\' OR search_text LIKE ? ESCAPE '\\' OR key LIKE ? ESCAPE '\\')"
        )
        params.extend([pattern, pattern, pattern])
    rows = tx.execute(f"SELECT {COLUMNS} FROM memories WHERE {' AND '.join(where)}", params)
    return [MemoryItem.from_row(row) for row in rows.fetchall()]


def last_referenced(tx: Tx, scope: Scope, session_id: str) -> list[MemoryItem]:
    """What this session stored or recalled most recently (the target of "forget that")."""
    rows = tx.execute(
        f"SELECT {COLUMNS} FROM memories WHERE {_OWNED} AND last_ref_session_id = ?"
        " AND last_ref_at = (SELECT max(last_ref_at) FROM memories"
        f" WHERE {_OWNED} AND last_ref_session_id = ?)",
        (scope.tenant_id, scope.user_id, session_id, scope.tenant_id, scope.user_id, session_id),
    )
    return [MemoryItem.from_row(row) for row in rows.fetchall()]


# -- the sweeper's batches --------------------------------------------------------------------


def _listed(tx: Tx) -> str:
    """A subquery over the primary keys in a JSON array parameter."""
    if tx.dialect == "postgres":
        return "SELECT value::bigint FROM json_array_elements_text(?::json)"
    return "SELECT value FROM json_each(?)"


def _retire(tx: Tx, pks: list[int], status: str, reason: str, now: float) -> None:
    """Set `status` on a batch of rows with one history row each, in two statements."""
    batch = json.dumps(pks)
    tx.execute(
        "INSERT INTO memory_history (memory_pk, tenant_id, user_id, action, old_status,"
        " new_status, actor, reason, at) SELECT pk, tenant_id, user_id, ?, status, ?,"
        f" 'sweeper', ?, ? FROM memories WHERE pk IN ({_listed(tx)})",
        (status, status, reason, now, batch),
    )
    tx.execute(
        f"UPDATE memories SET status = ?, updated_at = ? WHERE pk IN ({_listed(tx)})",
        (status, now, batch),
    )


def _pks(tx: Tx, sql: str, params: Sequence[Any]) -> list[int]:
    return [int(row[0]) for row in tx.execute(sql, params).fetchall()]


def archive_due(tx: Tx, now: float, limit: int) -> tuple[int, int]:
    """Archive up to `limit` active memories that decayed or expired; (decayed, expired)."""
    expired = _pks(
        tx,
        "SELECT pk FROM memories WHERE status = 'active' AND valid_until <= ? LIMIT ?",
        (now, limit),
    )
    seen = set(expired)
    decayed = [
        pk
        for pk in _pks(
            tx,
            "SELECT pk FROM memories WHERE status = 'active' AND decay_at <= ? LIMIT ?",
            (now, max(0, limit - len(expired))),
        )
        if pk not in seen
    ]
    _retire(tx, expired, "archived", "expired", now)
    _retire(tx, decayed, "archived", "decayed", now)
    return len(decayed), len(expired)


def reject_stale(tx: Tx, before: float, now: float, limit: int) -> int:
    """Proposals nobody verified in time are rejected (kept for audit, never recalled)."""
    pks = _pks(
        tx,
        "SELECT pk FROM memories WHERE status = 'pending' AND updated_at < ? LIMIT ?",
        (before, limit),
    )
    _retire(tx, pks, "rejected", "unverified", now)
    return len(pks)


def purge_due(
    tx: Tx, archived_before: float, rejected_before: float, now: float, limit: int
) -> list[Erased]:
    """Hard-delete archived and rejected memories past their retention."""
    pks = _pks(
        tx,
        "SELECT pk FROM memories WHERE status = 'archived' AND updated_at < ? LIMIT ?",
        (archived_before, limit),
    )
    pks += _pks(
        tx,
        "SELECT pk FROM memories WHERE status = 'rejected' AND updated_at < ? LIMIT ?",
        (rejected_before, max(0, limit - len(pks))),
    )
    batch = json.dumps(pks)
    rows = tx.execute(
        f"SELECT id, tenant_id, user_id, key FROM memories WHERE pk IN ({_listed(tx)})",
        (batch,),
    ).fetchall()
    tx.conn.executemany(
        "INSERT INTO memory_audit (tenant_id, user_id, memory_id, key_hash, action, actor,"
        " reason, at) VALUES (?, ?, ?, ?, 'purged', 'sweeper', 'retention', ?)",
        [(t, u, i, key_hash(Scope(t, u), k), now) for i, t, u, k in rows],
    )
    tx.execute(f"DELETE FROM memories WHERE pk IN ({_listed(tx)})", (batch,))
    return [Erased(i, t, u) for i, t, u, _ in rows]
