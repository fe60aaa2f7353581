"""The one Redis client of a Hermes process (`HERMES_REDIS_URL`), and what happens when Redis
goes away.

At start-up Redis must answer: a configured but unreachable Redis stops start-up with one line
naming the variable. While running, a failed Redis call raises `RedisUnavailable` so the
caller falls back to this process's own state (breakers, rate limits); the first failure of an
outage logs one warning, later ones nothing. During an outage Redis is tried again at most
every `retry_s`, and the first call it answers ends the outage (logged once too). A restart
kills every pooled connection: a call that finds its connection dead reconnects and sends again,
once (`_retry`), so the first calls after Redis is back succeed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as ConnectionLost
from redis.exceptions import RedisError

from app.errors import ConfigError, InternalError

log = logging.getLogger(__name__)

T = TypeVar("T")

SOURCE = "HERMES_REDIS_URL"


class RedisUnavailable(InternalError):
    """Redis did not answer (or is being left alone during an outage): use local state."""


def _retry() -> redis.asyncio.retry.Retry:
    """One immediate retry, on the same connection reconnected, of a call whose connection was
    found dead (`ConnectionError`: Redis restarted since it was pooled; redis-py 8 hands pooled
    connections out unchecked while its maintenance notifications are "auto", the default).
    That first call after a restart then succeeds instead of starting a new
    outage, and each dead connection left in the pool is replaced the first time it is used.

    It must be the asyncio `Retry`: the async client awaits what `call_with_retry` returns,
    and the sync class returns the call's coroutine unawaited, so nothing was ever retried.
    Not after a timeout (a Redis that hangs would hold each call twice as long), and not more
    than once (redis-py's default backs off for seconds): during an outage a call falls back
    at once."""
    return redis.asyncio.retry.Retry(NoBackoff(), 1, supported_errors=(ConnectionLost,))


def _shown(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    return f"{scheme}{sep}{rest}"


def _unreachable(url: str, exc: RedisError) -> ConfigError:
    reason = " ".join(str(exc).split()) or type(exc).__name__  # one line
    return ConfigError(SOURCE, f"Redis at {_shown(url)} does not answer ({reason})")


def check_reachable(url: str, timeout_s: float = 2.0) -> None:
    """Ping Redis once, synchronously (before the server binds); `ConfigError` if it can't."""
    client = redis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=redis.retry.Retry(NoBackoff(), 1),
    )
    try:
        client.ping()
    except RedisError as exc:
        raise _unreachable(url, exc) from None
    finally:
        client.close()


class SharedRedis:
    """The process's Redis client, its key prefix, and its health during an outage."""

    def __init__(
        self,
        url: str,
        prefix: str,
        *,
        timeout_s: float = 1.0,
        retry_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.client: redis.asyncio.Redis = redis.asyncio.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, retry=_retry()
        )
        self._retry_s = retry_s
        self._clock = clock
        self._down = False
        self._next_try = 0.0
        self._scripts: dict[str, AsyncScript] = {}
        self._probe: asyncio.Task[object] | None = None

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def script(self, source: str) -> AsyncScript:
        """`source` as a Lua script run by its SHA (loaded on first use, again after a flush)."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.client.register_script(source)
        return script

    @property
    def down(self) -> bool:
        """In an outage: the last call failed and none has succeeded since."""
        return self._down

    async def answers(self, wait_s: float = 0.5) -> bool:
        """Redis answered a PING within `wait_s` (for health checks, which must stay fast when
        Redis hangs). One ping at most is in flight: a slow one goes on after `wait_s` and its
        outcome still ends or starts an outage; during an outage none is sent more often than
        every `retry_s` (`run`)."""
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self.run(lambda client: client.ping()))
            self._probe.add_done_callback(_retrieved)
        done, _ = await asyncio.wait({self._probe}, timeout=wait_s)
        return bool(done) and not self._probe.cancelled() and self._probe.exception() is None

    async def ping(self) -> None:
        """At start-up: `ConfigError` naming HERMES_REDIS_URL if Redis does not answer."""
        try:
            await self.client.ping()
        except RedisError as exc:
            raise _unreachable(self.url, exc) from None

    async def run(self, op: Callable[[redis.asyncio.Redis], Awaitable[T]]) -> T:
        """`op` on the client; `RedisUnavailable` if Redis fails it or is in an outage."""
        if self._down and self._clock() < self._next_try:
            raise RedisUnavailable("Redis is unavailable")
        try:
            result = await op(self.client)
        except RedisError as exc:
            self._failed(exc)
            raise RedisUnavailable("Redis is unavailable") from exc
        if self._down:
            self._down = False
            log.warning("Redis answers again: breakers and rate limits are shared again")
        return result

    def _failed(self, exc: RedisError) -> None:
        self._next_try = self._clock() + self._retry_s
        if not self._down:
            self._down = True
            log.warning(
                "Redis (%s) failed: %s: %s; breakers and rate limits use this process's own "
                "state until it answers again",
                SOURCE,
                type(exc).__name__,
                exc,
            )

    async def aclose(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)
        await self.client.aclose()


def _retrieved(task: asyncio.Task[object]) -> None:
    """A probe's failure is its answer (`down`), not an error to report."""
    if not task.cancelled():
        task.exception()


async def open_shared_redis(url: str | None, prefix: str) -> SharedRedis | None:
    """The shared client if `url` is set, after Redis answered; else None."""
    if url is None:
        return None
    shared = SharedRedis(url, prefix)
    try:
        await shared.ping()
    except BaseException:
        await shared.aclose()
        raise
    return shared
