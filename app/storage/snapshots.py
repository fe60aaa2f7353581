"""The per-session snapshot: summary, active goal, state dict, pending/completed steps.

Written only inside a turn's own transactions (`update_snapshot`; see app/conversation/snapshot.py).
"""

from __future__ import annotations

from typing import Any

from app.storage.records import Snapshot, dumps
from app.storage.tx import Store, Tx

_JSON_FIELDS = {"state", "pending_steps", "completed_steps"}
_FIELDS = _JSON_FIELDS | {"summary", "summary_version", "summarized_turns", "active_goal"}


def update_snapshot(tx: Tx, session_id: str, **fields: Any) -> None:
    unknown = set(fields) - _FIELDS
    if unknown:
        raise ValueError(f"unknown snapshot fields: {sorted(unknown)}")
    if not fields:
        return
    assignments = ", ".join(f"{name} = ?" for name in fields)
    values = [dumps(v) if name in _JSON_FIELDS else v for name, v in fields.items()]
    tx.execute(
        f"UPDATE session_snapshots SET {assignments}, updated_at = ? WHERE session_id = ?",
        (*values, tx.now, session_id),
    )


class SnapshotStore(Store):
    async def get(self, session_id: str) -> Snapshot | None:
        row = await self.db.fetchone(
            "SELECT * FROM session_snapshots WHERE session_id = ?", (session_id,)
        )
        return None if row is None else Snapshot.from_row(row)
