"""Rate limits: in memory for one process, in Redis when instances share them."""

from __future__ import annotations

import logging
import secrets

import pytest

from app.resilience.ratelimit import RateLimiter, per_second
from app.resilience.redis_client import SharedRedis
from app.settings import ToolSettings
from tests.redis_util import REDIS_URL, proxied_redis, redis_prefix

__all__ = ["redis_prefix"]


def test_fractional_rates() -> None:
    assert (per_second(5).amount, per_second(5).multiples) == (5, 1)
    assert (per_second(0.5).amount, per_second(0.5).multiples) == (1, 2)
    with pytest.raises(ValueError):
        per_second(0)


async def test_memory_limit_refuses_then_waits_for_the_next_slot() -> None:
    limiter = RateLimiter()
    assert await limiter.try_acquire("k", 2)
    assert await limiter.try_acquire("k", 2)
    assert not await limiter.try_acquire("k", 2)
    assert not await limiter.acquire("k", 2, max_wait_s=0.0)
    assert await limiter.acquire("k", 2, max_wait_s=2.0)  # the window moves on


async def test_two_instances_share_a_limit_through_redis() -> None:
    first = RateLimiter("redis://127.0.0.1:6379", namespace=f"test-{secrets.token_hex(4)}")
    second = RateLimiter("redis://127.0.0.1:6379", namespace=first._namespace)
    try:
        assert await first.try_acquire("tool:x", 2)
        assert await second.try_acquire("tool:x", 2)
        assert not await first.try_acquire("tool:x", 2)
        assert not await second.try_acquire("tool:x", 2)
    finally:
        await first.aclose()
        await second.aclose()


async def test_with_a_shared_redis_the_limit_is_counted_once_for_all_processes(
    redis_prefix: str,
) -> None:
    a, b = SharedRedis(REDIS_URL, redis_prefix), SharedRedis(REDIS_URL, redis_prefix)
    first = RateLimiter.from_settings(ToolSettings(), shared=a)
    second = RateLimiter.from_settings(ToolSettings(), shared=b)
    try:
        assert await first.try_acquire("tool:x", 2)
        assert await second.try_acquire("tool:x", 2)
        assert not await first.try_acquire("tool:x", 2)
        assert not await second.try_acquire("tool:x", 2)
        keys = [key.decode() async for key in a.client.scan_iter(match=f"{redis_prefix}*")]
        assert keys and all(key.startswith(f"{redis_prefix}:ratelimit:") for key in keys)
    finally:
        for limiter, shared in ((first, a), (second, b)):
            await limiter.aclose()
            await shared.aclose()


async def test_a_storage_given_explicitly_wins_over_the_shared_redis() -> None:
    shared = SharedRedis(REDIS_URL, "unused")
    given = ToolSettings(rate_limit_storage="memory://")  # HERMES_RATE_LIMIT_STORAGE set
    assert RateLimiter.from_settings(given, shared=shared)._shared is None
    assert RateLimiter.from_settings(ToolSettings(), shared=None)._shared is None
    await shared.aclose()


async def test_redis_cut_counts_in_memory_with_one_warning_then_shares_again(
    redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="app.resilience.redis_client")
    async with proxied_redis() as (proxy, url):
        a = SharedRedis(url, redis_prefix, retry_s=0.0)
        b = SharedRedis(REDIS_URL, redis_prefix)
        on_a, on_b = RateLimiter(shared=a), RateLimiter(shared=b)
        rate = 0.01  # one call per 100 s: no window moves on during the test
        try:
            assert await on_b.try_acquire("shared", rate)  # in Redis
            await proxy.cut()
            assert await on_a.try_acquire("shared", rate)  # A counts alone, in memory...
            assert await on_a.try_acquire("mine", rate)
            assert not await on_a.try_acquire("mine", rate)  # ...and still limits
            assert not await on_a.acquire("mine", rate, max_wait_s=0.0)
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 1 and "HERMES_REDIS_URL" in warnings[0].getMessage()
            await proxy.restore()
            assert await on_a.try_acquire("mine", rate)  # in Redis again, where "mine" is free
            assert not await on_a.try_acquire("shared", rate)  # and B's call counts again
            assert not a.down
        finally:
            for limiter, shared in ((on_a, a), (on_b, b)):
                await limiter.aclose()
                await shared.aclose()
