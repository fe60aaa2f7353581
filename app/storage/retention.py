"""What retention deletes, one bounded batch at a time (the purge that runs them:
`app.storage.purge`).

Two kinds of rule:

* **By finished session.** A session is finished when it is archived (idle, or closed by an
  agent) and has no open turn. Its events, steps, idempotency records (`tool_calls`) and
  decided approvals and confirmations go once it has been archived for their number of days;
  the session itself, with its messages and everything else left of it, once it has been
  archived for `sessions` days (the messages' retention). Rows of a live session are never
  touched: the session is picked, and its rows deleted, in one write transaction that sees it
  archived (SQLite's one writer; on PostgreSQL the session row is locked, so a message that
  resumes it waits for the batch, or the batch skips it). A session that is resumed becomes
  active again, and is picked again when it is archived again.
* **By age.** Audit rows (`audit_log`, `memory_audit`, `mcp_tool_decisions`) older than their
  days, in the order they were written; a batch stops at the first row that is not old yet.
* **By expiry.** Rows that carry their own end (`desk_sessions`: desk sign-ins) once it has
  passed, through an index on it; nothing reads them after that, so they are kept no longer.

Each batch deletes at most `limit` rows and returns what it deleted per (table, tenant), so
the purge can count, audit and export metrics without reading anything twice. Rules by
session keep a mark — the (archived_at, id) of the last session they finished — in
`retention_marks`, so a run starts where the last one stopped instead of walking every
archived session again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from app.storage.event_log import SESSION_KEY
from app.storage.tx import Tx

# The tables of a session, children first, each with how to pick some of a session's rows
# (by key: SQLite has no DELETE ... LIMIT) through an index on the session.
BY_SESSION: dict[str, tuple[str, str]] = {
    "events": ("seq", f"session_key = {SESSION_KEY}"),  # keyed by the session's integer
    "steps": ("id", "session_id = ?"),
    "tool_calls": ("idempotency_key", "session_id = ?"),
    "approvals": ("id", "session_id = ?"),
    "confirmations": ("id", "session_id = ?"),
    "messages": ("pk", "session_id = ?"),
    "turns": ("id", "session_id = ?"),
    "handoffs": ("id", "session_id = ?"),
    "session_summaries": ("session_id", "session_id = ?"),
    "session_snapshots": ("session_id", "session_id = ?"),
    "session_leases": ("session_id", "session_id = ?"),
}
# Audit tables: (key, time column).
BY_AGE: dict[str, tuple[str, str]] = {
    "audit_log": ("id", "at"),
    "memory_audit": ("id", "at"),
    "mcp_tool_decisions": ("seq", "decided_at"),
}
# Rows with an end of their own: (key, expiry column).
BY_EXPIRY: dict[str, tuple[str, str]] = {
    "desk_sessions": ("id", "expires_at"),
}
SESSION_RULES: dict[str, tuple[str, ...]] = {
    "events": ("events",),
    "steps": ("steps",),
    "idempotency": ("tool_calls",),
    "approvals": ("approvals", "confirmations"),
    "sessions": (*BY_SESSION, "sessions"),
}
AGE_RULES: dict[str, tuple[str, ...]] = {
    "audit": tuple(BY_AGE),
}
EXPIRY_RULES: dict[str, tuple[str, ...]] = {
    "expired": tuple(BY_EXPIRY),
}
TABLES = tuple(dict.fromkeys([*BY_SESSION, "sessions", *BY_AGE, *BY_EXPIRY]))

# Sessions looked at per batch: a batch of small finished sessions takes several.
_SESSIONS_PER_BATCH = 64
_NO_MARK = (-1.0, "")


@dataclass(frozen=True)
class Batch:
    deleted: Counter[tuple[str, str]]  # (table, tenant) -> rows
    done: bool  # nothing left for this rule up to its cutoff

    @property
    def rows(self) -> int:
        return sum(self.deleted.values())


def purge_sessions_batch(tx: Tx, rule: str, cutoff: float, limit: int) -> Batch:
    """Up to `limit` rows of the `rule`'s tables, of sessions archived before `cutoff`."""
    tables = SESSION_RULES[rule]
    after_at, after_id = _mark(tx, rule)
    rows = tx.execute(
        f"SELECT id, tenant_id, archived_at FROM sessions s{archived_index(tx.dialect)}"
        " WHERE status = 'archived' AND archived_at < ? AND (archived_at, id) > (?, ?)"
        " AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id"
        " AND t.status IN ('queued', 'running'))"
        f" ORDER BY archived_at, id LIMIT ?{tx.for_update}",
        (cutoff, after_at, after_id, _SESSIONS_PER_BATCH),
    ).fetchall()
    deleted: Counter[tuple[str, str]] = Counter()
    budget = limit
    mark = None
    for session_id, tenant_id, archived_at in rows:
        finished = True
        for table in tables:
            if table == "sessions":
                tx.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                deleted[("sessions", tenant_id)] += 1
                budget -= 1
                continue
            n = _delete_some(tx, table, session_id, budget)
            if n:
                deleted[(table, tenant_id)] += n
            budget -= n
            if budget <= 0:
                finished = False
                break
        if not finished:
            break
        mark = (archived_at, session_id)
        if budget <= 0:
            break
    if mark is not None:
        _set_mark(tx, rule, mark)
    return Batch(deleted, len(rows) < _SESSIONS_PER_BATCH and mark == _last(rows))


def purge_age_batch(tx: Tx, rule: str, cutoff: float, limit: int) -> Batch:
    """Up to `limit` rows of the `rule`'s tables older than `cutoff`, oldest first."""
    # The first rows by key, those of them that are old: rows are appended in time order, so
    # this stops at the first young row instead of reading the whole table.
    deletes = {
        table: f"DELETE FROM {table} WHERE {at} < ? AND {key} IN"
        f" (SELECT {key} FROM {table} ORDER BY {key} LIMIT ?) RETURNING tenant_id"
        for table, (key, at) in ((t, BY_AGE[t]) for t in AGE_RULES[rule])
    }
    return _delete_up_to(tx, deletes, cutoff, limit)


def purge_expired_batch(tx: Tx, rule: str, cutoff: float, limit: int) -> Batch:
    """Up to `limit` rows of the `rule`'s tables whose own end is before `cutoff`."""
    deletes = {
        table: f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table}"
        f" WHERE {ends} < ? ORDER BY {ends} LIMIT ?) RETURNING tenant_id"
        for table, (key, ends) in ((t, BY_EXPIRY[t]) for t in EXPIRY_RULES[rule])
    }
    return _delete_up_to(tx, deletes, cutoff, limit)


def _delete_up_to(tx: Tx, deletes: dict[str, str], cutoff: float, limit: int) -> Batch:
    """Each table's delete (taking the cutoff and a row limit, returning each row's tenant) in
    turn, `limit` rows in all."""
    deleted: Counter[tuple[str, str]] = Counter()
    budget = limit
    for table, sql in deletes.items():
        gone = tx.execute(sql, (cutoff, budget)).fetchall()
        for (tenant_id,) in gone:
            deleted[(table, tenant_id or "")] += 1
        if len(gone) == budget:
            return Batch(deleted, False)
        budget -= len(gone)
    return Batch(deleted, True)


def archived_index(dialect: str) -> str:
    """SQLite's planner, without statistics, prefers `sessions_idle` (an equality on status)
    and sorts every archived session; the walk in archiving order needs `sessions_archived`."""
    return " INDEXED BY sessions_archived" if dialect == "sqlite" else ""


def _delete_some(tx: Tx, table: str, session_id: str, limit: int) -> int:
    key, where = BY_SESSION[table]
    cur = tx.execute(
        f"DELETE FROM {table} WHERE {where} AND {key} IN"
        f" (SELECT {key} FROM {table} WHERE {where} LIMIT ?)",
        (session_id, session_id, limit),
    )
    return max(0, cur.rowcount)


def _mark(tx: Tx, rule: str) -> tuple[float, str]:
    row = tx.one("SELECT archived_at, session_id FROM retention_marks WHERE rule = ?", (rule,))
    return _NO_MARK if row is None else (float(row[0]), str(row[1]))


def _set_mark(tx: Tx, rule: str, mark: tuple[float, str]) -> None:
    tx.execute(
        "INSERT INTO retention_marks (rule, archived_at, session_id) VALUES (?, ?, ?)"
        " ON CONFLICT (rule) DO UPDATE SET archived_at = excluded.archived_at,"
        " session_id = excluded.session_id",
        (rule, mark[0], mark[1]),
    )


def _last(rows: list[tuple[str, str, float]]) -> tuple[float, str] | None:
    if not rows:
        return None
    session_id, _tenant, archived_at = rows[-1]
    return (archived_at, session_id)
