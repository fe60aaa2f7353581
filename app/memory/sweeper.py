"""The background task that sweeps memory on an interval (see `app.memory.sweep` for what a
sweep does). Kept apart from the sweep itself, which the service calls: the service imports the
sweep, this task imports the service, and nothing imports back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.memory.records import SweepReport
from app.memory.service import MemoryService

log = logging.getLogger(__name__)


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
