"""What the retention purge will delete, read out first (`hermes export`): every row the
configured rules make due by a given time, as (table, row) pairs, one tenant or all.

It reads through the database's reader pool only, so it runs beside a live service. A
session is visited once, with every table whose rule makes it due, so no row comes out
twice; rows of a session that is resumed meanwhile come out too (a superset of what the
purge will take, never less).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from app.storage.event_log import SELECT_EVENTS, payloads
from app.storage.port import Database
from app.storage.purge import RetentionPolicy
from app.storage.records import dumps
from app.storage.retention import (
    AGE_RULES,
    BY_AGE,
    BY_EXPIRY,
    EXPIRY_RULES,
    SESSION_RULES,
    archived_index,
)
from app.storage.steps import held_result, referenced_event

_PAGE = 500


async def rows_due(
    db: Database, policy: RetentionPolicy, when: float, tenant: str | None = None
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Every row a purge at `when` would delete, (table, {column: value})."""
    cutoffs = policy.cutoffs(when)
    session_cutoffs = {rule: at for rule, at in cutoffs.items() if rule in SESSION_RULES}
    if session_cutoffs:
        async for item in _session_rows(db, session_cutoffs, tenant):
            yield item
    for rule, cutoff in cutoffs.items():
        for table in AGE_RULES.get(rule, ()):  # audit rows: integer keys
            async for row in _rows_before(db, table, *BY_AGE[table], cutoff, tenant, first=-1):
                yield table, row
        for table in EXPIRY_RULES.get(rule, ()):  # text keys
            async for row in _rows_before(db, table, *BY_EXPIRY[table], cutoff, tenant, first=""):
                yield table, row


async def _session_rows(
    db: Database, cutoffs: dict[str, float], tenant: str | None
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    latest = max(cutoffs.values())
    after: tuple[float, str] = (-1.0, "")
    mine, params = ("", []) if tenant is None else (" AND tenant_id = ?", [tenant])
    while True:
        sessions = await db.fetchall(
            f"SELECT id, archived_at FROM sessions{archived_index(db.dialect)}"
            " WHERE status = 'archived' AND archived_at < ?"
            f" AND (archived_at, id) > (?, ?){mine} ORDER BY archived_at, id LIMIT ?",
            (latest, after[0], after[1], *params, _PAGE),
        )
        for session_id, archived_at in sessions:
            due = [r for r, cutoff in cutoffs.items() if archived_at < cutoff]
            tables = dict.fromkeys(t for rule in due for t in SESSION_RULES[rule])
            for table in tables:
                rows = [_as_dict(row) for row in await db.fetchall(_select(table), (session_id,))]
                if table == "steps":
                    rows = await _results_inline(db, session_id, rows)
                for row in rows:
                    yield table, row
        if len(sessions) < _PAGE:
            return
        after = (sessions[-1][1], sessions[-1][0])


def _select(table: str) -> str:
    """A session's rows of `table`; events with their session, tenant and turn ids (the row
    itself has integer keys: app/storage/event_log.py), in order."""
    if table == "events":
        return f"{SELECT_EVENTS} ORDER BY e.seq"
    column = "id" if table == "sessions" else "session_id"
    return f"SELECT * FROM {table} WHERE {column} = ?"


async def _rows_before(
    db: Database, table: str, key: str, at: str, cutoff: float, tenant: str | None, first: object
) -> AsyncIterator[dict[str, Any]]:
    """The rows of `table` whose `at` is before `cutoff`, in pages by `key` (after `first`, a
    value below every key)."""
    mine, params = ("", []) if tenant is None else (" AND tenant_id = ?", [tenant])
    last = first
    while True:
        rows = await db.fetchall(
            f"SELECT * FROM {table} WHERE {at} < ? AND {key} > ?{mine} ORDER BY {key} LIMIT ?",
            (cutoff, last, *params, _PAGE),
        )
        for row in rows:
            yield _as_dict(row)
        if len(rows) < _PAGE:
            return
        last = rows[-1][key]


async def _results_inline(
    db: Database, session_id: str, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Steps whose result is a reference to an event (`app.storage.steps`) come out with the
    result itself: the event may be kept longer, and come out in a later export."""
    refs = {}
    for row in rows:
        seq = None if row["result"] is None else referenced_event(json.loads(row["result"]))
        if seq is not None:
            refs[row["id"]] = seq
    if not refs:
        return rows
    held = await payloads(db, session_id, refs.values())
    return [
        {**row, "result": dumps(held_result(refs[row["id"]], held.get(refs[row["id"]])))}
        if row["id"] in refs
        else row
        for row in rows
    ]


def _as_dict(row: Any) -> dict[str, Any]:
    return {name: row[name] for name in row.keys()}
