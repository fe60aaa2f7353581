"""Housekeeping: archive decayed and expired memories, reject stale proposals, purge old
archived and rejected rows. Work is done in small batches, each its own short write job,
so turns waiting on the writer are never held up for long.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from app.memory import erase
from app.memory.records import SweepReport
from app.storage.session_writer import NO_SESSION
from app.storage.tx import Store, Tx

DAY = 86400.0


@dataclass(frozen=True)
class Retention:
    archived_days: float = 90.0  # archived rows are kept this long for listing, then purged
    rejected_days: float = 30.0  # rejected proposals are kept this long for audit
    pending_days: float = 7.0  # proposals nobody verifies in this time are rejected
    batch: int = 200  # rows per write job: about 50 ms of writer time at 100k memories


async def sweep(store: Store, now: float, retention: Retention) -> SweepReport:
    batch = retention.batch
    decayed = expired = rejected = batches = 0
    purged: list[str] = []
    while True:
        d, e = await store.transact(NO_SESSION, lambda tx: erase.archive_due(tx, now, batch))
        decayed, expired, batches = decayed + d, expired + e, batches + 1
        if d + e < batch:
            break
        await asyncio.sleep(0)  # let queued turns' writes in between batches
    stale_before = now - retention.pending_days * DAY
    while True:
        n = await store.transact(
            NO_SESSION, lambda tx: erase.reject_stale(tx, stale_before, now, batch)
        )
        rejected, batches = rejected + n, batches + 1
        if n < batch:
            break
        await asyncio.sleep(0)
    archived_before = now - retention.archived_days * DAY
    rejected_before = now - retention.rejected_days * DAY
    while True:
        gone = await store.transact(
            NO_SESSION, lambda tx: erase.purge_due(tx, archived_before, rejected_before, now, batch)
        )
        purged += [g.id for g in gone]
        batches += 1
        if len(gone) < batch:
            break
        await asyncio.sleep(0)
    index_steps = await compact_index(store, full=bool(purged))
    return SweepReport(
        archived=decayed,
        expired=expired,
        rejected=rejected,
        purged=len(purged),
        batches=batches,
        index_steps=index_steps,
        purged_ids=purged,
    )


async def compact_index(store: Store, *, full: bool = True, pages: int = 200) -> int:
    """Merge the FTS index in steps of at most `pages` leaf pages, each its own short write
    job, until nothing is left to merge; `full` first gathers every segment into the merge,
    which is what purges deleted postings. Returns the number of steps. On PostgreSQL the
    trigram index is the table's own: one VACUUM drops the deleted rows' entries."""
    if store.db.dialect == "postgres":
        await store.db.vacuum("memories")
        return 1
    steps = 0
    while True:

        def step(tx: Tx, start: bool = full and steps == 0) -> int:
            return erase.merge_step(tx, pages, start=start)

        changed = await store.transact(NO_SESSION, step)
        steps += 1
        if changed < 2:
            return steps
        await asyncio.sleep(0)
