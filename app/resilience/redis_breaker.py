"""Breakers whose state is shared by every Hermes process through Redis.

The same rules as `CircuitBreaker`, kept in four keys per breaker under the prefix, each with a
TTL so nothing outlives its use:

- `…:counts`  a hash of consecutive failures and timeouts and the last error; it expires
  `window_s` after the last failure, so failures far apart never add up;
- `…:open`    exists while the breaker is open (its TTL is the time left);
- `…:tripped` exists from opening until a success closes it: open, or half-open once `…:open`
  has expired (it lapses `idle_s` after that if nobody calls at all);
- `…:probe`   the one half-open probe, taken with SET NX PX by exactly one caller in any
  process; its TTL frees it if that caller dies.

Each transition is one Lua script, so two processes never see half a change. When Redis
fails, the call uses a local `CircuitBreaker` instead (see `app.resilience.redis_client`); once
Redis answers again the shared state is used and the local one forgotten.
"""

from __future__ import annotations

import secrets
from typing import Any

import redis.asyncio

from app.resilience.breaker import (
    Breaker,
    BreakerFactory,
    BreakerPolicy,
    BreakerState,
    BreakerView,
    CircuitBreaker,
    OnChange,
)
from app.resilience.redis_client import RedisUnavailable, SharedRedis

_ADMIT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
if redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then return 2 end
return 0
"""  # KEYS: open, tripped, probe. 0 refused, 1 closed, 2 this caller is the probe

_FAIL = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
local tripped = redis.call('EXISTS', KEYS[3]) == 1
local n = 0
if not tripped then
  local field = ARGV[1] == '1' and 'timeouts' or 'failures'
  n = redis.call('HINCRBY', KEYS[1], field, 1)
end
redis.call('HSET', KEYS[1], 'error', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local limit = tonumber(ARGV[1] == '1' and ARGV[4] or ARGV[3])
if tripped or n >= limit then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[6])
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[7])
  redis.call('DEL', KEYS[4])
  redis.call('HDEL', KEYS[1], 'failures', 'timeouts')
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  return 1
end
return 0
"""  # KEYS: counts, open, tripped, probe. ARGV: timeout?, error, max failures, max timeouts,
# window ms, open ms, tripped ms. 0: still closed, 1: this failure opened it, 2: it was open

_SUCCEED = """
local was = redis.call('EXISTS', KEYS[3])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return was
"""  # KEYS: counts, open, tripped, probe. 1: this success closed the breaker

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""  # KEYS: probe. ARGV: the token this caller took it with


class RedisBreaker:
    def __init__(
        self,
        shared: SharedRedis,
        key: str,
        name: str,
        policy: BreakerPolicy,
        on_change: OnChange | None = None,
        *,
        window_s: float | None = None,
        probe_s: float = 120.0,
        idle_s: float = 3600.0,
    ) -> None:
        self.name = name
        self.policy = policy
        self.last_error: str | None = None
        self._shared = shared
        self._on_change = on_change
        base = shared.key("breaker", "{" + key + "}")  # one hash slot: scripts touch all four
        self._keys = [f"{base}:counts", f"{base}:open", f"{base}:tripped", f"{base}:probe"]
        open_ms = max(1, round(policy.open_seconds * 1000))
        self._window_ms = max(1, round((window_s or max(policy.open_seconds, 60.0)) * 1000))
        self._open_ms = open_ms
        self._tripped_ms = open_ms + max(1, round(idle_s * 1000))
        self._probe_ms = max(1, round(probe_s * 1000))
        self._probe_token: str | None = None
        self._local: CircuitBreaker | None = None

    # -- the `Breaker` seam ---------------------------------------------------------------------

    async def admit(self) -> bool:
        token = secrets.token_hex(8)
        try:
            verdict = await self._script(_ADMIT, self._keys[1:4], [token, self._probe_ms])
        except RedisUnavailable:
            return self._fallback().allow()
        if verdict == 2:
            self._probe_token = token
            self._changed(BreakerState.HALF_OPEN)
        return verdict != 0

    async def succeeded(self) -> None:
        self.last_error = None
        self._probe_token = None
        try:
            closed = await self._script(_SUCCEED, self._keys, [])
        except RedisUnavailable:
            self._fallback().record_success()
            return
        if closed:
            self._changed(BreakerState.CLOSED)

    async def failed(self, *, timed_out: bool = False, error: str | None = None) -> BreakerState:
        self.last_error = error or ("timeout" if timed_out else "failure")
        self._probe_token = None
        args: list[Any] = [
            "1" if timed_out else "0",
            self.last_error,
            self.policy.max_failures,
            self.policy.max_timeouts,
            self._window_ms,
            self._open_ms,
            self._tripped_ms,
        ]
        try:
            verdict = await self._script(_FAIL, self._keys, args)
        except RedisUnavailable:
            local = self._fallback()
            local.record_failure(timeout=timed_out, error=error)
            return local.state
        if verdict == 1:
            self._changed(BreakerState.OPEN)
        return BreakerState.CLOSED if verdict == 0 else BreakerState.OPEN

    async def release(self) -> None:
        token, self._probe_token = self._probe_token, None
        if self._local is not None:
            self._local.release_probe()
        if token is None:
            return
        try:
            await self._script(_RELEASE, self._keys[3:4], [token])
        except RedisUnavailable:
            pass  # the probe key's TTL frees it

    async def inspect(self) -> BreakerView:
        counts_key, open_key, tripped_key, _ = self._keys

        async def read(client: redis.asyncio.Redis) -> list[Any]:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hgetall(counts_key)
                pipe.pttl(open_key)
                pipe.exists(tripped_key)
                return await pipe.execute()

        try:
            counts, open_ms, tripped = await self._shared.run(read)
        except RedisUnavailable:
            return self._fallback().view()
        self._forget_local()
        fields = {_text(k): _text(v) for k, v in counts.items()}
        if open_ms > 0 or open_ms == -1:
            state = BreakerState.OPEN
        elif tripped:
            state = BreakerState.HALF_OPEN
        else:
            state = BreakerState.CLOSED
        return BreakerView(
            state,
            int(fields.get("failures", 0)),
            int(fields.get("timeouts", 0)),
            max(0, open_ms) / 1000,
            fields.get("error"),
        )

    # -- internals ------------------------------------------------------------------------------

    async def _script(self, source: str, keys: list[str], args: list[Any]) -> int:
        script = self._shared.script(source)

        async def call(client: redis.asyncio.Redis) -> int:
            return int(await script(keys, args, client=client))

        result = await self._shared.run(call)
        self._forget_local()
        return result

    def _fallback(self) -> CircuitBreaker:
        if self._local is None:
            self._local = CircuitBreaker(self.name, self.policy, on_change=self._on_change)
        return self._local

    def _forget_local(self) -> None:
        """Redis answers: the state an outage left in this process no longer counts."""
        self._local = None

    def _changed(self, state: BreakerState) -> None:
        if self._on_change is not None:
            self._on_change(self.name, state)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def redis_breakers(shared: SharedRedis) -> BreakerFactory:
    """Breakers shared through `shared`'s Redis, under its prefix."""

    def make(
        key: str, name: str, policy: BreakerPolicy, on_change: OnChange | None = None
    ) -> Breaker:
        return RedisBreaker(shared, key, name, policy, on_change)

    return make
