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

    def in_use(self, key: str) -> int:
        held = self._per_key.get(key)
        if held is None:
            return 0
        limit, semaphore = held
        return limit - semaphore._value
