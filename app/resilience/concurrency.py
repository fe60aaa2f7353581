"""Bulkheads: a semaphore per key, plus separate shared pools for I/O-bound and CPU-bound work
so a burst of one kind cannot starve the other."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator


class Bulkheads:
    def __init__(self, io_slots: int = 64, cpu_slots: int | None = None) -> None:
        self._io = asyncio.Semaphore(io_slots)
        self._cpu = asyncio.Semaphore(cpu_slots or max(1, os.cpu_count() or 1))
        self._per_key: dict[str, tuple[int, asyncio.Semaphore]] = {}

    def _key_semaphore(self, key: str, limit: int) -> asyncio.Semaphore:
        held = self._per_key.get(key)
        if held is None or held[0] != limit:
            held = self._per_key[key] = (limit, asyncio.Semaphore(limit))
        return held[1]

    @contextlib.asynccontextmanager
    async def slot(self, key: str, limit: int, *, cpu_bound: bool = False) -> AsyncIterator[None]:
        pool = self._cpu if cpu_bound else self._io
        async with self._key_semaphore(key, limit), pool:
            yield


class KeyedCounter:
    """At most `limit` holders per key at once, refused rather than queued (e.g. the event
    streams one principal holds open). `limit` 0: no limit, nothing counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[str, int] = {}

    def try_take(self, key: str) -> bool:
        if not self.limit:
            return True
        held = self._held.get(key, 0)
        if held >= self.limit:
            return False
        self._held[key] = held + 1
        return True

    def give_back(self, key: str) -> None:
        if not self.limit:
            return
        held = self._held.get(key, 0) - 1
        if held > 0:
            self._held[key] = held
        else:
            self._held.pop(key, None)

    def held(self, key: str) -> int:
        return self._held.get(key, 0)
