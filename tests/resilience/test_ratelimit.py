"""Rate limits: in memory for one process, in Redis when instances share them."""

from __future__ import annotations

import secrets

import pytest

from app.resilience.ratelimit import RateLimiter, per_second


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
