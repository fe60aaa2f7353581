"""A background pass on an interval (the memory sweeper, the retention purge): started and
stopped with the runtime, counting its passes and keeping the last report, so tests wait for
a pass instead of sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Generic, TypeVar

R = TypeVar("R")
log = logging.getLogger(__name__)


class Periodic(Generic[R]):
    """Runs `once()` every `interval_s` seconds until stopped; a pass that raises is logged
    and the next one runs on time."""

    name = "periodic pass"

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.passes = 0
        self.last: R | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()

    async def once(self) -> R:
        raise NotImplementedError

    def note(self, report: R) -> None:
        """Say what a pass did (a log line), after it."""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_for_passes(self, count: int) -> R | None:
        """Until at least `count` passes have finished (callers add their own deadline)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.passes >= count)
        return self.last

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                report = await self.once()
            except Exception:
                log.exception("%s failed", self.name)
                continue
            self.note(report)
            async with self._changed:
                self.passes += 1
                self.last = report
                self._changed.notify_all()
