"""SharedRedis: the health check's probe (true when Redis answers, false at once, not after
the client's timeouts, when it hangs, and a hung probe still ends in an outage), and a restart
of Redis that is over once it answers (a Redis server of the test's own, killed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.resilience.redis_client import RedisUnavailable, SharedRedis
from tests.redis_util import REDIS_URL, RedisServer, redis_prefix

__all__ = ["redis_prefix"]


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A server that accepts connections and never says a word."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_answers_when_redis_does(redis_prefix: str) -> None:
    shared = SharedRedis(REDIS_URL, redis_prefix)
    try:
        assert await shared.answers()
        assert not shared.down
    finally:
        await shared.aclose()


async def test_a_hung_redis_is_reported_within_the_wait_and_then_counts_as_down(
    silent_port: int,
) -> None:
    shared = SharedRedis(f"redis://127.0.0.1:{silent_port}/0", "hermes", timeout_s=0.5)
    try:
        assert not await shared.answers(wait_s=0.05)  # the ping is still waiting
        assert not await shared.answers(wait_s=0.05)  # (the same ping: one at most)
        async with asyncio.timeout(10):
            while not shared.down:  # noqa: ASYNC110 (the probe's own outcome)
                await asyncio.sleep(0.02)
        assert not await shared.answers()  # in the outage: no ping sent, no waiting
    finally:
        await shared.aclose()


async def test_after_a_restart_the_first_calls_on_dead_pooled_connections_succeed(
    tmp_path: Path,
) -> None:
    """A restart kills every pooled connection, and the pool hands them out unchecked: each
    call that gets one reconnects and sends again (one immediate retry), instead of failing
    and starting an outage while Redis answers."""
    with RedisServer(tmp_path / "redis") as server:
        shared = SharedRedis(server.url, "hermes")
        try:
            await asyncio.gather(*(shared.run(lambda c: c.ping()) for _ in range(5)))
            server.kill()
            server.start()
            for _ in range(2):  # every connection of the pool, each dead
                pongs = await asyncio.gather(*(shared.run(lambda c: c.ping()) for _ in range(5)))
                assert all(pongs)
            assert not shared.down
        finally:
            await shared.aclose()


async def test_a_call_while_redis_is_down_fails_at_once_and_only_one_tries(
    tmp_path: Path,
) -> None:
    """The retry is for dead connections, not for an outage: with Redis gone a call fails
    without waiting, the next ones do not try until `retry_s` has passed."""
    with RedisServer(tmp_path / "redis") as server:
        shared = SharedRedis(server.url, "hermes", retry_s=30)
        try:
            await shared.run(lambda c: c.ping())
            server.kill()
            started = time.monotonic()
            for _ in range(3):
                with pytest.raises(RedisUnavailable):
                    await shared.run(lambda c: c.ping())
            assert shared.down and time.monotonic() - started < 0.5
        finally:
            await shared.aclose()
