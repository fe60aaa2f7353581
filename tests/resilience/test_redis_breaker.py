"""Breakers shared through the local Redis: two `SharedRedis` clients stand for two processes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from app.errors import ConfigError
from app.resilience.breaker import BreakerPolicy, BreakerState
from app.resilience.redis_breaker import RedisBreaker
from app.resilience.redis_client import SharedRedis, open_shared_redis
from tests.redis_util import REDIS_URL, proxied_redis, redis_prefix
from tests.serve_util import free_port

__all__ = ["redis_prefix"]

POLICY = BreakerPolicy(max_failures=3, max_timeouts=2, open_seconds=600)


@pytest.fixture
async def two(redis_prefix: str) -> AsyncIterator[tuple[SharedRedis, SharedRedis]]:
    a, b = SharedRedis(REDIS_URL, redis_prefix), SharedRedis(REDIS_URL, redis_prefix)
    yield a, b
    await a.aclose()
    await b.aclose()


async def eventually(check: Callable[[], Awaitable[bool]], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.01)


async def test_failures_in_one_process_open_the_breaker_for_the_other(
    two: tuple[SharedRedis, SharedRedis],
) -> None:
    a = RedisBreaker(two[0], "tool:t1:lookup", "lookup", POLICY)
    b = RedisBreaker(two[1], "tool:t1:lookup", "lookup", POLICY)
    assert await a.admit() and await b.admit()
    assert await a.failed(error="down") is BreakerState.CLOSED
    assert await b.failed(error="down") is BreakerState.CLOSED  # counted together: 2 of 3
    assert (await a.inspect()).failures == 2
    assert await a.failed(error="down") is BreakerState.OPEN
    assert not await b.admit()
    view = await b.inspect()
    assert view.state is BreakerState.OPEN and view.last_error == "down"
    assert 0 < view.retry_after_s <= 600
    other = RedisBreaker(two[1], "tool:t2:lookup", "lookup", POLICY)  # another tenant's
    assert await other.admit()


async def test_a_success_in_between_resets_the_count(
    two: tuple[SharedRedis, SharedRedis],
) -> None:
    a = RedisBreaker(two[0], "model:m", "m", POLICY)
    b = RedisBreaker(two[1], "model:m", "m", POLICY)
    await a.failed(timed_out=True)
    await b.succeeded()
    assert await a.failed(timed_out=True) is BreakerState.CLOSED
    assert await b.failed(timed_out=True) is BreakerState.OPEN  # two timeouts in a row


async def test_exactly_one_probe_when_both_ask_at_once(
    two: tuple[SharedRedis, SharedRedis],
) -> None:
    quick = BreakerPolicy(max_failures=1, max_timeouts=1, open_seconds=0.05)
    a = RedisBreaker(two[0], "tool:x", "x", quick)
    b = RedisBreaker(two[1], "tool:x", "x", quick)
    assert await a.failed() is BreakerState.OPEN
    await eventually(lambda: _state_is(b, BreakerState.HALF_OPEN))
    admitted = await asyncio.gather(*(br.admit() for br in (a, b, a, b)))
    assert sorted(admitted) == [False, False, False, True]
    prober, waiter = (a, b) if admitted[0] or admitted[2] else (b, a)
    await prober.release()  # no verdict: another caller may probe
    assert await waiter.admit() and not await prober.admit()
    # The probe fails (told by a breaker on the same key whose open period outlasts the test):
    # open again, for everybody.
    slow = RedisBreaker(two[0], "tool:x", "x", BreakerPolicy(1, 1, 600))
    assert await slow.failed() is BreakerState.OPEN
    assert not await a.admit() and not await b.admit()
    await a.succeeded()  # an answer closes it, for everybody
    assert (await b.inspect()).state is BreakerState.CLOSED
    assert await b.admit() and await a.admit()


async def _state_is(breaker: RedisBreaker, state: BreakerState) -> bool:
    return (await breaker.inspect()).state is state


async def test_every_key_is_under_the_prefix_and_expires(
    two: tuple[SharedRedis, SharedRedis], redis_prefix: str
) -> None:
    breaker = RedisBreaker(two[0], "tool:x", "x", BreakerPolicy(1, 1, 600))
    await breaker.failed(error="e")
    quick = BreakerPolicy(max_failures=1, max_timeouts=1, open_seconds=0.01)
    probed = RedisBreaker(two[0], "tool:y", "y", quick)
    await probed.failed()
    await eventually(probed.admit)  # holds the probe key
    counting = RedisBreaker(two[0], "tool:z", "z", BreakerPolicy(5, 5, 600))
    await counting.failed()
    client = two[0].client
    keys = [key.decode() async for key in client.scan_iter(match=f"{redis_prefix}*")]
    # x: counts, open, tripped; y: counts, tripped, probe; z: counts
    assert len(keys) == 7, keys
    assert all(key.startswith(f"{redis_prefix}:breaker:{{tool:") for key in keys)
    assert [key for key in keys if await client.pttl(key) <= 0] == []


async def test_redis_cut_falls_back_to_local_state_with_one_warning_then_shares_again(
    redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="app.resilience.redis_client")
    async with proxied_redis() as (proxy, url):
        a = SharedRedis(url, redis_prefix, retry_s=0.0)
        b = SharedRedis(REDIS_URL, redis_prefix)
        try:
            on_a = RedisBreaker(a, "tool:x", "x", POLICY)
            on_b = RedisBreaker(b, "tool:x", "x", POLICY)
            await on_b.failed()
            await on_b.failed()
            await proxy.cut()
            # A still works, on its own state: two failures of its own don't open it...
            for _ in range(5):
                assert await on_a.admit()
            assert await on_a.failed() is BreakerState.CLOSED
            assert await on_a.failed() is BreakerState.CLOSED
            assert (await on_a.inspect()).failures == 2
            # ...the third opens it locally.
            assert await on_a.failed() is BreakerState.OPEN
            assert not await on_a.admit()
            assert a.down
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 1, [r.getMessage() for r in warnings]
            assert "HERMES_REDIS_URL" in warnings[0].getMessage()
            assert (await on_b.inspect()).failures == 2  # nothing of A's reached Redis
            await proxy.restore()
            await eventually(on_a.admit)  # Redis answers again: the shared (closed) state counts
            assert not a.down
            assert await on_a.failed() is BreakerState.OPEN  # B's two and this one
            assert not await on_b.admit()
            assert any("answers again" in r.getMessage() for r in caplog.records)
        finally:
            await a.aclose()
            await b.aclose()


async def test_unreachable_redis_at_start_is_a_config_error_naming_the_variable() -> None:
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"
    with pytest.raises(ConfigError) as info:
        await open_shared_redis(url, "hermes")
    assert info.value.source == "HERMES_REDIS_URL"
    assert "\n" not in str(info.value) and "secret" not in str(info.value)


async def test_no_url_no_client() -> None:
    assert await open_shared_redis(None, "hermes") is None


async def test_the_proxy_passes_traffic_and_cuts_it(redis_prefix: str) -> None:
    async with proxied_redis() as (proxy, url):
        client = redis.asyncio.Redis.from_url(url, socket_timeout=2, retry=Retry(NoBackoff(), 0))
        try:
            assert await client.ping()
            await proxy.cut()
            with pytest.raises(redis.ConnectionError):
                await client.ping()
            await proxy.restore()
            assert await client.ping()
        finally:
            await client.aclose()
