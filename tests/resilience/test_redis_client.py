"""SharedRedis.answers, the health check's probe: true when Redis answers, false at once (not
after the client's timeouts) when it hangs, and a hung probe still ends in an outage."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.resilience.redis_client import SharedRedis
from tests.redis_util import REDIS_URL, redis_prefix

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
