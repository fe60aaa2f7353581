"""The demo database before and after a scenario, row by row, and what a scenario's `db`
expectation makes of the difference: expected rows, missing rows, forbidden writes.

Rows are keyed by their table's primary key; a row is created, changed or deleted. Values are
compared as text, so YAML's `8900` and `"8900"` mean the same, and `null` is NULL.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.evaluation.scenario import DbExpect

Row = dict[str, Any]
Key = tuple[Any, ...]
Snapshot = dict[str, tuple[tuple[str, ...], dict[Key, Row]]]

# The demo world's tables (app/demo/schema.py) except `meta`, which no tool writes.
TABLES = ("customers", "orders", "order_items", "shipments", "tracking_events", "tickets",
          "refunds", "returns", "contact_changes", "password_resets", "emails")  # fmt: skip
# Columns a change may touch without being named: bookkeeping that moves with any change.
BOOKKEEPING = frozenset({"updated_at"})


def snapshot(path: Path) -> Snapshot:
    """Every row of the demo tables, by primary key. Read-only; fine while a service writes
    (WAL readers see the last commit)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        out: Snapshot = {}
        for table in TABLES:
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()
            pk = tuple(r["name"] for r in sorted(info, key=lambda r: r["pk"]) if r["pk"])
            rows = {}
            for row in conn.execute(f"SELECT * FROM {table}"):
                record = dict(row)
                rows[tuple(record[c] for c in pk)] = record
            out[table] = (pk, rows)
        return out
    finally:
        conn.close()


@dataclass
class Change:
    key: Row  # the primary key columns
    before: Row
    after: Row

    @property
    def columns(self) -> list[str]:
        return [c for c in self.after if self.after[c] != self.before.get(c)]


@dataclass
class Diff:
    created: dict[str, list[Row]] = field(default_factory=dict)
    changed: dict[str, list[Change]] = field(default_factory=dict)
    deleted: dict[str, list[Row]] = field(default_factory=dict)

    def empty(self) -> bool:
        return not (self.created or self.changed or self.deleted)


def diff(before: Snapshot, after: Snapshot) -> Diff:
    out = Diff()
    for table, (pk, new_rows) in after.items():
        old_rows = before.get(table, (pk, {}))[1]
        created = [r for k, r in new_rows.items() if k not in old_rows]
        changed = [
            Change(dict(zip(pk, k, strict=True)), old_rows[k], r)
            for k, r in new_rows.items()
            if k in old_rows and old_rows[k] != r
        ]
        deleted = [r for k, r in old_rows.items() if k not in new_rows]
        if created:
            out.created[table] = created
        if changed:
            out.changed[table] = changed
        if deleted:
            out.deleted[table] = deleted
    return out


def _same(expected: Any, actual: Any) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool):
        expected = int(expected)
    return str(expected) == str(actual)


def _matches(expected: Row, actual: Row) -> bool:
    return all(c in actual and _same(v, actual[c]) for c, v in expected.items())


def _show(row: Row, limit: int = 6) -> str:
    shown = {k: v for k, v in row.items() if k not in ("idempotency_key", "body")}
    parts = [f"{k}={v}" for k, v in list(shown.items())[:limit]]
    return "{" + ", ".join(parts) + ("" if len(shown) <= limit else ", …") + "}"


@dataclass
class Verdict:
    forbidden: list[str] = field(default_factory=list)  # writes the scenario does not list
    missing: list[str] = field(default_factory=list)  # listed writes that did not happen


def judge(found: Diff, expect: DbExpect) -> Verdict:
    verdict = Verdict()
    tables = set(found.created) | set(found.changed) | set(found.deleted)
    tables |= set(expect.created) | set(expect.changed)
    for table in sorted(tables - expect.ignore):
        _created(table, found.created.get(table, []), expect.created.get(table, ()), verdict)
        _changed(table, found.changed.get(table, []), expect.changed.get(table, ()), verdict)
        for row in found.deleted.get(table, []):
            verdict.forbidden.append(f"{table}: row deleted {_show(row)}")
    return verdict


def _created(table: str, rows: list[Row], wanted: tuple[Row, ...], verdict: Verdict) -> None:
    left = list(rows)
    for want in wanted:
        hit = next((r for r in left if _matches(want, r)), None)
        if hit is None:
            verdict.missing.append(f"{table}: no created row {_show(want)}")
        else:
            left.remove(hit)
    for row in left:
        verdict.forbidden.append(f"{table}: unexpected row created {_show(row)}")


def _changed(table: str, changes: list[Change], wanted: tuple[Row, ...], verdict: Verdict) -> None:
    left = list(changes)
    for want in wanted:
        # the primary key columns name the row; the other columns are its new values
        change = next(
            (c for c in left if all(k in want and _same(want[k], v) for k, v in c.key.items())),
            None,
        )
        if change is None:
            verdict.missing.append(f"{table}: row {_show(want)} not changed")
            continue
        left.remove(change)
        wrong = [
            c for c, v in want.items() if c not in change.key and not _same(v, change.after.get(c))
        ]
        if wrong:
            got = _show({c: change.after.get(c) for c in wrong})
            expected = _show({c: want[c] for c in wrong})
            verdict.missing.append(f"{table}: row {_show(change.key)} has {got}, not {expected}")
        extra = [c for c in change.columns if c not in want and c not in BOOKKEEPING]
        if extra:
            verdict.forbidden.append(
                f"{table}: row {_show(change.key)} changed {_moves(change, extra)}"
            )
    for change in left:
        verdict.forbidden.append(
            f"{table}: unexpected change of {_show(change.key)}: {_moves(change, change.columns)}"
        )


def _moves(change: Change, columns: list[str]) -> str:
    return ", ".join(f"{c} {change.before.get(c)!r} -> {change.after[c]!r}" for c in columns)
