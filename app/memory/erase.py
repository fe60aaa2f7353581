"""SQL that removes or retires memories: hard deletes with a content-free audit, the
selections "forget" works on, and the sweeper's batches (archive, expire, purge).

A hard delete removes the row; its history goes with it (foreign key cascade) and the FTS
trigger writes the index's delete entry. FTS5 (SQLite 3.40 has no `secure-delete`) keeps the
old postings in their segment until that segment is merged, so callers that erase content
run `optimize_index` before they report success.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.memory.records import MemoryItem, Scope
from app.memory.store import COLUMNS, history, key_hash
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


def optimize_index(tx: Tx) -> None:
    """Merge the FTS index into one segment: deleted postings are gone from the file."""
    tx.execute("INSERT INTO memory_fts (memory_fts) VALUES ('optimize')")


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


def archive_due(tx: Tx, now: float, limit: int) -> tuple[int, int]:
    """Archive up to `limit` active memories that decayed or expired; (decayed, expired)."""
    expired = [
        r[0]
        for r in tx.execute(
            "SELECT pk FROM memories WHERE status = 'active' AND valid_until <= ? LIMIT ?",
            (now, limit),
        ).fetchall()
    ]
    seen = set(expired)
    decayed = [
        r[0]
        for r in tx.execute(
            "SELECT pk FROM memories WHERE status = 'active' AND decay_at <= ? LIMIT ?",
            (now, max(0, limit - len(expired))),
        ).fetchall()
        if r[0] not in seen
    ]
    for reason, pks in (("expired", expired), ("decayed", decayed)):
        for pk in pks:
            row = tx.one(f"SELECT {COLUMNS} FROM memories WHERE pk = ?", (pk,))
            assert row is not None
            item = MemoryItem.from_row(row)
            tx.execute(
                "UPDATE memories SET status = 'archived', updated_at = ? WHERE pk = ?", (now, pk)
            )
            history(
                tx,
                item,
                "archived",
                now,
                old_status="active",
                new_status="archived",
                actor="sweeper",
                reason=reason,
            )
    return len(decayed), len(expired)


def reject_stale(tx: Tx, before: float, now: float, limit: int) -> int:
    """Proposals nobody verified in time are rejected (kept for audit, never recalled)."""
    rows = tx.execute(
        f"SELECT {COLUMNS} FROM memories WHERE status = 'pending' AND updated_at < ? LIMIT ?",
        (before, limit),
    ).fetchall()
    for row in rows:
        item = MemoryItem.from_row(row)
        tx.execute(
            "UPDATE memories SET status = 'rejected', updated_at = ? WHERE pk = ?", (now, item.pk)
        )
        history(
            tx,
            item,
            "rejected",
            now,
            old_status="pending",
            new_status="rejected",
            actor="sweeper",
            reason="unverified",
        )
    return len(rows)


def purge_due(
    tx: Tx, archived_before: float, rejected_before: float, now: float, limit: int
) -> list[Erased]:
    """Hard-delete archived and rejected memories past their retention."""
    rows = tx.execute(
        f"SELECT {COLUMNS} FROM memories WHERE status = 'archived' AND updated_at < ? LIMIT ?",
        (archived_before, limit),
    ).fetchall()
    rows += tx.execute(
        f"SELECT {COLUMNS} FROM memories WHERE status = 'rejected' AND updated_at < ? LIMIT ?",
        (rejected_before, max(0, limit - len(rows))),
    ).fetchall()
    items = [MemoryItem.from_row(row) for row in rows]
    return delete_items(tx, items, action="purged", actor="sweeper", reason="retention", now=now)
