"""Token and cost usage, for budgets: per session (on its row) and per tenant per UTC day.

A turn adds what it used in the transaction that ends it (`complete_turn`,
`TurnStore.fail`), so usage is counted exactly once, with the turn's end,
and every process sharing the database sees the same totals.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from app.storage.tx import Store, Tx

DAY_S = 86400


@dataclass
class Usage:
    """Tokens (prompt + completion, as the model reported them) and cost (price units)."""

    tokens: int = 0
    cost: float = 0.0

    def __bool__(self) -> bool:
        return self.tokens > 0 or self.cost > 0


def utc_day(now: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(now))


def seconds_to_next_day(now: float) -> float:
    """Until the next UTC midnight, when the daily counts start again."""
    return DAY_S - now % DAY_S


# Set in the statement that already touches the session's row when a turn ends.
SESSION_USAGE = "used_tokens = used_tokens + ?, used_cost = used_cost + ?"


def add_tenant_usage(tx: Tx, tenant_id: str, usage: Usage) -> None:
    """Add a turn's usage to its tenant's count of the day (the session's count is set with
    `SESSION_USAGE` in the turn's own update of the session)."""
    if not usage:
        return
    tx.execute(
        "INSERT INTO tenant_usage (tenant_id, day, tokens, cost, turns) VALUES (?, ?, ?, ?, 1)"
        " ON CONFLICT (tenant_id, day) DO UPDATE SET"
        " tokens = tenant_usage.tokens + excluded.tokens,"
        " cost = tenant_usage.cost + excluded.cost, turns = tenant_usage.turns + 1",
        (tenant_id, utc_day(tx.now), usage.tokens, usage.cost),
    )


class UsageStore(Store):
    async def of_session(self, tenant_id: str, session_id: str) -> Usage:
        row = await self.db.fetchone(
            "SELECT used_tokens, used_cost FROM sessions WHERE id = ? AND tenant_id = ?",
            (session_id, tenant_id),
        )
        return Usage() if row is None else Usage(int(row[0]), float(row[1]))

    async def of_tenant_day(self, tenant_id: str, now: float) -> Usage:
        row = await self.db.fetchone(
            "SELECT tokens, cost FROM tenant_usage WHERE tenant_id = ? AND day = ?",
            (tenant_id, utc_day(now)),
        )
        return Usage() if row is None else Usage(int(row[0]), float(row[1]))
