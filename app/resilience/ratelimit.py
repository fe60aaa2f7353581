"""Rate limits over the `limits` library: in memory by default, Redis when shared.

A call that finds the window full waits for the next slot if that comes within its budget,
so short bursts are smoothed instead of failed; beyond the budget it is refused.

Given the process's shared Redis (`RateLimiter(shared=...)`, `HERMES_REDIS_URL`), a limiter
counts there, under the prefix; when Redis fails, the call is counted in memory instead (one
warning per outage, see `app.resilience.redis_client`), and in Redis again once it answers.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import redis.asyncio
from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from limits.util import WindowStats

from app.resilience.redis_client import RedisUnavailable, SharedRedis
from app.settings import ToolSettings

T = TypeVar("T")


def per_second(rate: float) -> RateLimitItem:
    """`rate` calls per second as a limits item (0.5/s becomes 1 per 2 seconds)."""
    if rate <= 0:
        raise ValueError("rate must be positive")
    if rate >= 1:
        return RateLimitItemPerSecond(max(1, round(rate)), 1)
    return RateLimitItemPerSecond(1, math.ceil(1 / rate))


class RateLimiter:
    def __init__(
        self,
        storage_uri: str = "memory://",
        namespace: str = "hermes",
        *,
        shared: SharedRedis | None = None,
    ) -> None:
        uri = storage_uri if storage_uri.startswith("async+") else f"async+{storage_uri}"
        options: dict[str, object] = {}
        if shared is not None:
            # The shared client's pool (its timeouts and retry) and its prefix.
            uri = "async+" + shared.url
            options["connection_pool"] = shared.client.connection_pool
            options["key_prefix"] = shared.key("ratelimit")
        if "redis" in uri.split("://", 1)[0]:
            options["implementation"] = "redispy"  # the `redis` client this project pins
        self._storage = storage_from_string(uri, **options)  # type: ignore[arg-type]
        self._limiter = MovingWindowRateLimiter(self._storage)
        self._shared = shared
        self._local = MovingWindowRateLimiter(MemoryStorage()) if shared else self._limiter
        self._namespace = namespace
        self._items: dict[float, RateLimitItem] = {}

    @classmethod
    def from_settings(cls, settings: ToolSettings, shared: SharedRedis | None) -> RateLimiter:
        """HERMES_RATE_LIMIT_STORAGE if it was given, else the shared Redis if there is one."""
        if shared is not None and "rate_limit_storage" not in settings.model_fields_set:
            return cls(shared=shared)
        return cls(settings.rate_limit_storage)

    async def _either(self, op: Callable[[MovingWindowRateLimiter], Awaitable[T]]) -> T:
        """`op` on the shared limiter, or on the in-memory one when Redis is unavailable."""
        if self._shared is None:
            return await op(self._limiter)

        async def shared(_client: redis.asyncio.Redis) -> T:
            return await op(self._limiter)

        try:
            return await self._shared.run(shared)
        except RedisUnavailable:
            return await op(self._local)

    async def _hit(self, item: RateLimitItem, key: str) -> bool:
        return await self._either(lambda limiter: limiter.hit(item, self._namespace, key))

    async def _stats(self, item: RateLimitItem, key: str) -> WindowStats:
        return await self._either(
            lambda limiter: limiter.get_window_stats(item, self._namespace, key)
        )

    def _item(self, rate: float) -> RateLimitItem:
        item = self._items.get(rate)
        if item is None:
            item = self._items[rate] = per_second(rate)
        return item

    async def try_acquire(self, key: str, rate: float) -> bool:
        return await self._hit(self._item(rate), key)

    async def take(self, key: str, item: RateLimitItem) -> float:
        """Take a slot of `item` (e.g. 20 per minute) without waiting: 0.0 if taken, else the
        seconds until the window frees one (for `Retry-After`)."""
        if await self._hit(item, key):
            return 0.0
        stats = await self._stats(item, key)
        return max(0.001, stats.reset_time - time.time())

    async def acquire(self, key: str, rate: float, max_wait_s: float) -> bool:
        """Take a slot, waiting up to `max_wait_s` for one; False if none comes in time."""
        item = self._item(rate)
        deadline = time.monotonic() + max_wait_s
        while True:
            if await self._hit(item, key):
                return True
            stats = await self._stats(item, key)
            wait = max(0.005, stats.reset_time - time.time())
            if time.monotonic() + wait > deadline:
                return False
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        """Close the Redis connection pool, if there is one (memory storage holds nothing; a
        shared client's pool is closed by its owner)."""
        bridge = getattr(self._storage, "bridge", None)
        client = getattr(bridge, "storage", None)
        if client is not None and hasattr(client, "aclose"):
            await client.aclose()

    async def reset(self) -> None:
        await self._storage.reset()  # type: ignore[misc]
