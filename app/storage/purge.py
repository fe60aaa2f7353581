"""The retention purge: every `interval_s`, the rules of `app.storage.retention` in small
batches, then the space they freed given back (SQLite) — in the background, like the memory
sweeper, never holding the writer long enough for a turn to notice.

Each batch is one write job of at most `batch_rows` rows, through the same writer as the
turns' writes (one lane on SQLite; on PostgreSQL the first lane, the one writes of no
session take), and the purge waits `pause_s` after each, so a turn's write waits behind at
most one batch. A run is audited per tenant (`retention.purged`, counts only) and reported
to `on_report` (metrics).

After deleting, SQLite gets the freed pages back in steps (`Database.reclaim`: incremental
vacuum) and the WAL checkpointed (`Database.checkpoint`); PostgreSQL's autovacuum reuses the
space by itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from app.settings import RetentionSettings
from app.storage import audit
from app.storage.periodic import Periodic
from app.storage.port import Database
from app.storage.retention import (
    AGE_RULES,
    EXPIRY_RULES,
    SESSION_RULES,
    Batch,
    purge_age_batch,
    purge_expired_batch,
    purge_sessions_batch,
)
from app.storage.session_writer import NO_SESSION
from app.storage.tx import Store, Tx

log = logging.getLogger(__name__)

DAY = 86400.0
_RECLAIM_PAGES = 64  # pages an incremental-vacuum step frees: 256 KiB, about a millisecond


@dataclass(frozen=True)
class RetentionPolicy:
    """Days each kind of row is kept; 0 keeps it for ever (as long as its session is kept:
    a session's deletion takes everything of it)."""

    events_days: float  # finished sessions' events
    steps_days: float  # finished sessions' steps
    idempotency_days: float  # finished sessions' idempotency records (tool_calls)
    approvals_days: float  # finished sessions' approvals and confirmations
    messages_days: float  # archived sessions: messages, and the session with the rest
    audit_days: float  # audit_log, memory_audit, mcp_tool_decisions
    batch_rows: int
    pause_s: float
    interval_s: float  # between purges

    @classmethod
    def from_settings(cls, settings: RetentionSettings) -> RetentionPolicy:
        return cls(
            events_days=settings.events_days,
            steps_days=settings.steps_days,
            idempotency_days=settings.idempotency_days,
            approvals_days=settings.approvals_days,
            messages_days=settings.messages_days,
            audit_days=settings.audit_days,
            batch_rows=settings.batch_rows,
            pause_s=settings.pause_ms / 1000,
            interval_s=settings.interval_s,
        )

    def cutoffs(self, now: float) -> dict[str, float]:
        """rule -> rows older than this go, in the order the purge runs them; rules kept for
        ever are left out. Steps go before events: a tool step's result may be held by one.
        Rows past their own end (`expired`) always go: nothing may use them any more."""
        days = {
            "steps": self.steps_days,
            "events": self.events_days,
            "idempotency": self.idempotency_days,
            "approvals": self.approvals_days,
            "sessions": self.messages_days,
            "audit": self.audit_days,
        }
        kept = {rule: now - d * DAY for rule, d in days.items() if d > 0}
        return {**kept, **dict.fromkeys(EXPIRY_RULES, now)}


@dataclass
class PurgeReport:
    started_at: float = 0.0
    duration_s: float = 0.0
    batches: int = 0
    deleted: Counter[tuple[str, str]] = field(default_factory=Counter)  # (table, tenant)
    max_batch_rows: int = 0
    reclaimed_pages: int = 0
    wal_bytes: int = 0

    def by_table(self) -> dict[str, int]:
        totals: Counter[str] = Counter()
        for (table, _tenant), n in self.deleted.items():
            totals[table] += n
        return dict(totals)

    def by_tenant(self) -> dict[str, dict[str, int]]:
        tenants: dict[str, dict[str, int]] = {}
        for (table, tenant), n in sorted(self.deleted.items()):
            tenants.setdefault(tenant, {})[table] = n
        return tenants

    @property
    def rows(self) -> int:
        return sum(self.deleted.values())


class Purger(Periodic[PurgeReport]):
    """Runs `purge()` every `policy.interval_s` seconds until stopped."""

    name = "retention purge"

    def __init__(
        self,
        db: Database,
        policy: RetentionPolicy,
        *,
        on_report: Callable[[PurgeReport], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(policy.interval_s)
        self.store = Store(db)
        self.policy = policy
        self.on_report = on_report
        self.clock = clock

    async def once(self) -> PurgeReport:
        return await self.purge()

    def note(self, report: PurgeReport) -> None:
        if report.rows:
            log.info(
                "retention purge: %d rows in %d batches, %.1f s: %s",
                report.rows,
                report.batches,
                report.duration_s,
                ", ".join(f"{t} {n}" for t, n in sorted(report.by_table().items())),
            )

    async def purge(self, now: float | None = None) -> PurgeReport:
        """One pass: every rule to its cutoff, the audit rows, the space given back."""
        report = PurgeReport(started_at=self.clock())
        started = time.perf_counter()
        now = report.started_at if now is None else now
        for rule, cutoff in self.policy.cutoffs(now).items():
            batch_fn = _BATCHES[rule]
            while True:
                batch = await self._batch(batch_fn, rule, cutoff)
                report.batches += 1
                report.deleted.update(batch.deleted)
                report.max_batch_rows = max(report.max_batch_rows, batch.rows)
                if batch.done:
                    break
                await asyncio.sleep(self.policy.pause_s)  # queued turns' writes first
        if report.deleted:
            await self.store.transact(NO_SESSION, lambda tx: _audit(tx, report, now))
            report.reclaimed_pages = await self.store.db.reclaim(_RECLAIM_PAGES)
        report.wal_bytes = await self.store.db.checkpoint()
        report.duration_s = time.perf_counter() - started
        if self.on_report is not None:
            self.on_report(report)
        return report

    async def _batch(
        self, batch_fn: Callable[[Tx, str, float, int], Batch], rule: str, cutoff: float
    ) -> Batch:
        limit = self.policy.batch_rows
        return await self.store.transact(NO_SESSION, lambda tx: batch_fn(tx, rule, cutoff, limit))


_BATCHES: dict[str, Callable[[Tx, str, float, int], Batch]] = {
    **dict.fromkeys(SESSION_RULES, purge_sessions_batch),
    **dict.fromkeys(AGE_RULES, purge_age_batch),
    **dict.fromkeys(EXPIRY_RULES, purge_expired_batch),
}


def _audit(tx: Tx, report: PurgeReport, now: float) -> None:
    """One `retention.purged` row per tenant whose rows went: how many, per table."""
    for tenant, tables in report.by_tenant().items():
        audit.record(
            tx,
            tenant_id=tenant or "-",
            actor="retention",
            role="system",
            action="retention.purged",
            details={"rows": tables, "at": now},
        )


async def keep_wal_bounded(
    db: Database, interval_s: float, on_wal: Callable[[int], None] | None = None
) -> None:
    """Checkpoint every `interval_s` (`Database.checkpoint`: a no-op on PostgreSQL), and
    say how large the WAL is after it."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            size = await db.checkpoint()
        except Exception:
            log.exception("WAL checkpoint failed")
            continue
        if on_wal is not None:
            on_wal(size)
