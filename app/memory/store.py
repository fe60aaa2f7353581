"""Every SQL statement that changes memories. Functions take a `Tx` so the service can put
several of them in one transaction on the writer thread (e.g. a turn's writes and the
verification of pending facts it proves).

Newer wins: a write for a key that already has a current (active or archived) row updates
that row, so an insert can never be silently dropped (the article's lost-email bug).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from app.errors import OwnerFull
from app.memory.decay import DecayPolicy, decay_at
from app.memory.fence import neutral
from app.memory.lexicon import describe, normalize
from app.memory.origin import Origin, classify
from app.memory.records import Draft, MemoryItem, Scope, Written
from app.storage.records import new_id
from app.storage.tx import Tx

COLUMNS = (
    "pk, id, tenant_id, user_id, tier, key, value, entity, fact_type, search_text, confidence,"
    " status, source, source_session_id, valid_until, created_at, updated_at,"
    " last_confirmed_at, last_accessed_at, origin"
)
SEQ_BITS = 24  # each user owns primary keys [owner << 24, (owner + 1) << 24)
_OWNED = "tenant_id = ? AND user_id = ?"


def same_value(a: str, b: str) -> bool:
    return normalize(a).strip() == normalize(b).strip()


def key_hash(scope: Scope, key: str) -> str:
    raw = f"{scope.tenant_id}\x1f{scope.user_id}\x1f{key}"
    return hashlib.sha256(raw.encode()).hexdigest()


def _items(tx: Tx, sql: str, params: Sequence[Any]) -> list[MemoryItem]:
    return [MemoryItem.from_row(row) for row in tx.execute(sql, params).fetchall()]


def _one(tx: Tx, where: str, params: Sequence[Any]) -> MemoryItem | None:
    found = _items(tx, f"SELECT {COLUMNS} FROM memories WHERE {where} LIMIT 1", params)
    return found[0] if found else None


def by_pk(tx: Tx, pk: int) -> MemoryItem:
    item = _one(tx, "pk = ?", (pk,))
    assert item is not None
    return item


def by_id(tx: Tx, scope: Scope, memory_id: str) -> MemoryItem | None:
    return _one(tx, f"id = ? AND {_OWNED}", (memory_id, scope.tenant_id, scope.user_id))


def current(tx: Tx, scope: Scope, key: str) -> MemoryItem | None:
    return _one(
        tx,
        f"{_OWNED} AND key = ? AND status IN ('active', 'archived')",
        (scope.tenant_id, scope.user_id, key),
    )


def proposals(tx: Tx, scope: Scope, key: str | None = None) -> list[MemoryItem]:
    """Pending rows of the user (of one key when given)."""
    where, params = f"{_OWNED} AND status = 'pending'", [scope.tenant_id, scope.user_id]
    if key is not None:
        where += " AND key = ?"
        params.append(key)
    return _items(tx, f"SELECT {COLUMNS} FROM memories WHERE {where}", params)


def history(tx: Tx, item: MemoryItem, action: str, now: float, **fields: Any) -> None:
    names = ["memory_pk", "tenant_id", "user_id", "action", "at", *fields]
    values = [item.pk, item.tenant_id, item.user_id, action, now, *fields.values()]
    tx.execute(
        f"INSERT INTO memory_history ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
        values,
    )


def _origin(draft: Draft) -> Origin:
    return classify(draft.tier, draft.key, draft.value, draft.source)


def _allocate_pk(tx: Tx, scope: Scope) -> int:
    row = tx.one(
        "INSERT INTO memory_owners (tenant_id, user_id) VALUES (?, ?)"
        " ON CONFLICT (tenant_id, user_id) DO UPDATE SET next_seq = memory_owners.next_seq + 1"
        " RETURNING id, next_seq",
        (scope.tenant_id, scope.user_id),
    )
    assert row is not None
    owner, seq = row
    if seq >= 1 << SEQ_BITS:
        raise OwnerFull(f"user has used all {1 << SEQ_BITS} memory ids")
    return int(owner) << SEQ_BITS | int(seq)


def _insert(
    tx: Tx, scope: Scope, draft: Draft, now: float, session_id: str | None, policy: DecayPolicy
) -> MemoryItem:
    pk = _allocate_pk(tx, scope)
    live = draft.status == "active"
    tx.execute(
        "INSERT INTO memories (pk, id, tenant_id, user_id, tier, key, value, entity, fact_type,"
        " search_text, confidence, status, source, source_session_id, valid_until, decay_at,"
        " created_at, updated_at, last_confirmed_at, last_ref_session_id, last_ref_at,"
        " embedding, embedding_model, origin)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            pk,
            new_id("mem"),
            scope.tenant_id,
            scope.user_id,
            draft.tier,
            draft.key,
            draft.value,
            draft.entity,
            draft.kind,
            describe(draft.key, draft.value, draft.entity),
            draft.confidence,
            draft.status,
            draft.source,
            session_id,
            draft.valid_until,
            decay_at(draft.confidence, now, policy) if live else None,
            now,
            now,
            now,
            session_id,
            now if session_id else None,
            draft.embedding,
            draft.embedding_model,
            _origin(draft),
        ),
    )
    return by_pk(tx, pk)


def _set_value(
    tx: Tx,
    item: MemoryItem,
    draft: Draft,
    now: float,
    session_id: str | None,
    policy: DecayPolicy,
) -> MemoryItem:
    tx.execute(
        "UPDATE memories SET value = ?, entity = ?, fact_type = ?, search_text = ?,"
        " confidence = ?, status = 'active', source = ?, origin = ?, source_session_id = ?,"
        " valid_until = ?, decay_at = ?, updated_at = ?, last_confirmed_at = ?,"
        " last_ref_session_id = coalesce(?, last_ref_session_id),"
        " last_ref_at = CASE WHEN CAST(? AS TEXT) IS NULL THEN last_ref_at ELSE ? END,"
        " embedding = coalesce(?, embedding), embedding_model = coalesce(?, embedding_model)"
        " WHERE pk = ?",
        (
            draft.value,
            draft.entity,
            draft.kind,
            describe(draft.key, draft.value, draft.entity),
            draft.confidence,
            draft.source,
            _origin(draft),
            session_id,
            draft.valid_until,
            decay_at(draft.confidence, now, policy),
            now,
            now,
            session_id,
            session_id,
            now,
            draft.embedding if not same_value(item.value, draft.value) else None,
            draft.embedding_model,
            item.pk,
        ),
    )
    return by_pk(tx, item.pk)


def write_draft(
    tx: Tx,
    scope: Scope,
    draft: Draft,
    *,
    now: float,
    session_id: str | None,
    actor: str,
    policy: DecayPolicy,
) -> Written:
    """Upsert one draft: create, update (newer wins), confirm, or file as a proposal.
    The value is stored neutralised (see `app.memory.fence`): nothing in it reads as a role,
    a fence or a markup tag when it is recalled later."""
    draft = replace(draft, value=neutral(draft.value))
    existing = current(tx, scope, draft.key)
    if draft.status == "pending":
        return _propose(tx, scope, draft, existing, now, session_id, actor, policy)
    if existing is None:
        item = _insert(tx, scope, draft, now, session_id, policy)
        history(
            tx,
            item,
            "created",
            now,
            new_value=item.value,
            new_status="active",
            confidence=item.confidence,
            source=item.source,
            actor=actor,
            session_id=session_id,
        )
        action = "created"
    else:
        same = same_value(existing.value, draft.value) and existing.status == "active"
        if same:  # a repeat confirms: refresh the clock, keep the higher confidence
            draft = replace(draft, confidence=max(existing.confidence, draft.confidence))
        item = _set_value(tx, existing, draft, now, session_id, policy)
        action = "confirmed" if same else "updated"
        history(
            tx,
            item,
            action,
            now,
            old_value=existing.value,
            new_value=item.value,
            old_status=existing.status,
            new_status=item.status,
            confidence=item.confidence,
            source=item.source,
            actor=actor,
            session_id=session_id,
        )
    for proposal in proposals(tx, scope, draft.key):
        if same_value(proposal.value, item.value):
            absorb(tx, proposal, item, now)  # proven by this write
        else:
            set_status(tx, proposal, "rejected", now=now, actor=actor, reason="contradicted")
    return Written(item, action)  # type: ignore[arg-type]


def _propose(
    tx: Tx,
    scope: Scope,
    draft: Draft,
    existing: MemoryItem | None,
    now: float,
    session_id: str | None,
    actor: str,
    policy: DecayPolicy,
) -> Written:
    if (
        existing is not None
        and existing.status == "active"
        and same_value(existing.value, draft.value)
    ):
        return Written(existing, "unchanged")
    for row in _items(
        tx,
        f"SELECT {COLUMNS} FROM memories WHERE {_OWNED} AND key = ?"
        " AND status IN ('pending', 'rejected')",
        (scope.tenant_id, scope.user_id, draft.key),
    ):
        if same_value(row.value, draft.value):  # already proposed, or rejected for good
            return Written(row, "unchanged")
    item = _insert(tx, scope, draft, now, session_id, policy)
    history(
        tx,
        item,
        "proposed",
        now,
        new_value=item.value,
        new_status="pending",
        confidence=item.confidence,
        source=item.source,
        actor=actor,
        session_id=session_id,
    )
    return Written(item, "proposed")


def verify(
    tx: Tx,
    scope: Scope,
    pending: MemoryItem,
    *,
    now: float,
    actor: str,
    reason: str,
    confidence: float,
    policy: DecayPolicy,
) -> Written:
    """A pending proposal was proven: it becomes (or replaces) the key's current value."""
    draft = Draft(
        key=pending.key,
        value=pending.value,
        tier=pending.tier,
        entity=pending.entity,
        fact_type=pending.fact_type,
        confidence=max(confidence, pending.confidence),
        source="rule",
        valid_until=pending.valid_until,
    )
    existing = current(tx, scope, pending.key)
    target = existing if existing is not None else pending
    item = _set_value(tx, target, draft, now, pending.source_session_id, policy)
    if existing is not None:
        absorb(tx, pending, item, now)
    history(
        tx,
        item,
        "verified",
        now,
        old_value=target.value if existing else None,
        new_value=item.value,
        old_status=target.status,
        new_status="active",
        confidence=item.confidence,
        source="rule",
        actor=actor,
        reason=reason,
    )
    return Written(item, "verified")


def absorb(tx: Tx, proposal: MemoryItem, into: MemoryItem, now: float) -> None:
    """Fold a proven proposal into the current row: its history moves, the row goes."""
    tx.execute(
        "UPDATE memory_history SET memory_pk = ? WHERE memory_pk = ?", (into.pk, proposal.pk)
    )
    tx.execute("DELETE FROM memories WHERE pk = ?", (proposal.pk,))


def set_status(
    tx: Tx, item: MemoryItem, status: str, *, now: float, actor: str, reason: str
) -> None:
    tx.execute(
        "UPDATE memories SET status = ?, updated_at = ? WHERE pk = ?", (status, now, item.pk)
    )
    history(
        tx, item, status, now, old_status=item.status, new_status=status, actor=actor, reason=reason
    )


def touch(tx: Tx, scope: Scope, pks: Iterable[int], session_id: str | None, now: float) -> None:
    """Recall used these: note when, and in which session (for "forget that")."""
    for pk in pks:
        tx.execute(
            "UPDATE memories SET last_accessed_at = ?,"
            " last_ref_session_id = coalesce(?, last_ref_session_id),"
            " last_ref_at = CASE WHEN CAST(? AS TEXT) IS NULL THEN last_ref_at ELSE ? END"
            f" WHERE pk = ? AND {_OWNED}",
            (now, session_id, session_id, now, pk, scope.tenant_id, scope.user_id),
        )
