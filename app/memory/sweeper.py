"""The background task that sweeps memory on an interval (see `app.memory.sweep` for what a
sweep does). Kept apart from the sweep itself, which the service calls: the service imports the
sweep, this task imports the service, and nothing imports back.
"""

from __future__ import annotations

import logging

from app.memory.records import SweepReport
from app.memory.service import MemoryService
from app.storage.periodic import Periodic

log = logging.getLogger(__name__)


class MemorySweeper(Periodic[SweepReport]):
    """Runs `service.sweep()` every `interval_s` seconds until stopped."""

    name = "memory sweep"

    def __init__(self, service: MemoryService, interval_s: float) -> None:
        super().__init__(interval_s)
        self.service = service

    async def once(self) -> SweepReport:
        return await self.service.sweep()

    def note(self, report: SweepReport) -> None:
        if report.archived or report.expired or report.rejected or report.purged:
            log.info(
                "memory sweep: %d decayed, %d expired, %d rejected, %d purged",
                report.archived,
                report.expired,
                report.rejected,
                report.purged,
            )
