"""Housekeeping: archive decayed and expired memories, reject stale proposals, purge old
archived and rejected rows. Work is done in small batches, each its own short write job,
so turns waiting on the writer are never held up for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.memory import erase
from app.memory.records import SweepReport
from app.storage.tx import Store, Tx

if TYPE_CHECKING:
    from app.memory.service import MemoryService

log = logging.getLogger(__name__)
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
        d, e = await store.transact(lambda tx: erase.archive_due(tx, now, batch))
        decayed, expired, batches = decayed + d, expired + e, batches + 1
        if d + e < batch:
            break
        await asyncio.sleep(0)  # let queued turns' writes in between batches
    stale_before = now - retention.pending_days * DAY
    while True:
        n = await store.transact(lambda tx: erase.reject_stale(tx, stale_before, now, batch))
        rejected, batches = rejected + n, batches + 1
        if n < batch:
            break
        await asyncio.sleep(0)
    archived_before = now - retention.archived_days * DAY
    rejected_before = now - retention.rejected_days * DAY
    while True:
        gone = await store.transact(
            lambda tx: erase.purge_due(tx, archived_before, rejected_before, now, batch)
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
    which is what purges deleted postings. Returns the number of steps."""
    steps = 0
    while True:

        def step(tx: Tx, start: bool = full and steps == 0) -> int:
            return erase.merge_step(tx, pages, start=start)

        changed = await store.transact(step)
        steps += 1
        if changed < 2:
            return steps
        await asyncio.sleep(0)


class MemorySweeper:
    """Runs `service.sweep()` every `interval_s` seconds until stopped."""

    def __init__(self, service: MemoryService, interval_s: float) -> None:
        self.service = service
        self.interval_s = interval_s
        self.passes = 0
        self.last: SweepReport | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="memory-sweeper")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_for_passes(self, count: int) -> SweepReport | None:
        """Until at least `count` passes have finished (callers add their own deadline)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.passes >= count)
        return self.last

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                report = await self.service.sweep()
            except Exception:
                log.exception("memory sweep failed")
                continue
            if report.archived or report.expired or report.rejected or report.purged:
                log.info(
                    "memory sweep: %d decayed, %d expired, %d rejected, %d purged",
                    report.archived,
                    report.expired,
                    report.rejected,
                    report.purged,
                )
            async with self._changed:
                self.passes += 1
                self.last = report
                self._changed.notify_all()
