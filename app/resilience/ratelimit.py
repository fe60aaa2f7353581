"""Rate limits over the `limits` library: in memory by default, Redis when shared.

A call that finds the window full waits for the next slot if that comes within its budget,
so short bursts are smoothed instead of failed; beyond the budget it is refused.
"""

from __future__ import annotations

import asyncio
import math
import time

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string


def per_second(rate: float) -> RateLimitItem:
    """`rate` calls per second as a limits item (0.5/s becomes 1 per 2 seconds)."""
    if rate <= 0:
        raise ValueError("rate must be positive")
    if rate >= 1:
        return RateLimitItemPerSecond(max(1, round(rate)), 1)
    return RateLimitItemPerSecond(1, math.ceil(1 / rate))


class RateLimiter:
    def __init__(self, storage_uri: str = "memory://", namespace: str = "hermes") -> None:
        uri = storage_uri if storage_uri.startswith("async+") else f"async+{storage_uri}"
        options: dict[str, str] = {}
        if "redis" in uri.split("://", 1)[0]:
            options["implementation"] = "redispy"  # the `redis` client this project pins
        self._storage = storage_from_string(uri, **options)
        self._limiter = MovingWindowRateLimiter(self._storage)
        self._namespace = namespace
        self._items: dict[float, RateLimitItem] = {}

    def _item(self, rate: float) -> RateLimitItem:
        item = self._items.get(rate)
        if item is None:
            item = self._items[rate] = per_second(rate)
        return item

    async def try_acquire(self, key: str, rate: float) -> bool:
        return await self._limiter.hit(self._item(rate), self._namespace, key)

    async def acquire(self, key: str, rate: float, max_wait_s: float) -> bool:
        """Take a slot, waiting up to `max_wait_s` for one; False if none comes in time."""
        item = self._item(rate)
        deadline = time.monotonic() + max_wait_s
        while True:
            if await self._limiter.hit(item, self._namespace, key):
                return True
            stats = await self._limiter.get_window_stats(item, self._namespace, key)
            wait = max(0.005, stats.reset_time - time.time())
            if time.monotonic() + wait > deadline:
                return False
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        """Close the Redis connection pool, if there is one (memory storage holds nothing)."""
        bridge = getattr(self._storage, "bridge", None)
        client = getattr(bridge, "storage", None)
        if client is not None and hasattr(client, "aclose"):
            await client.aclose()

    async def reset(self) -> None:
        await self._storage.reset()  # type: ignore[misc]
