"""Flow control per tool: a rate limit, a concurrency limit and a circuit breaker.

Breakers and rate limits are kept per (tenant, tool) by default, so one tenant's bad inputs
or bursts cannot switch a tool off for the others; a tool declared `limits_scope: global`
(one shared upstream with one quota) has a single breaker and limit for everybody. The
concurrency limit protects this process's pools and stays per tool.

Where breaker state lives is the factory's business: this process by default, Redis (shared
by every process) when `HERMES_REDIS_URL` is set.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

from app.resilience.breaker import Breaker, BreakerFactory, BreakerPolicy, local_breakers
from app.resilience.concurrency import Bulkheads
from app.resilience.ratelimit import RateLimiter
from app.tools.spec import ToolSpec

# A call waits this long at most for a rate-limit slot before the tool counts as unavailable.
MAX_RATE_WAIT_S = 1.0


class ToolGuards:
    def __init__(
        self,
        limiter: RateLimiter,
        bulkheads: Bulkheads,
        policy: BreakerPolicy,
        *,
        breakers: BreakerFactory | None,  # None: this process's own (no Redis)
        clock: Callable[[], float] = time.monotonic,  # of this process's breakers
    ) -> None:
        self.limiter = limiter
        self.bulkheads = bulkheads
        self.policy = policy
        self.clock = clock
        self._make_breaker = breakers or local_breakers(clock)
        self._breakers: dict[str, Breaker] = {}

    def breaker(self, spec: ToolSpec, tenant_id: str) -> Breaker:
        key = _key(spec, tenant_id)
        breaker = self._breakers.get(key)
        if breaker is None:
            breaker = self._breakers[key] = self._make_breaker(
                "tool:" + key.replace("\x1f", ":"), spec.name, self.policy
            )
        return breaker

    async def admit(self, spec: ToolSpec, tenant_id: str) -> bool:
        """Take a rate-limit slot, waiting briefly for one."""
        wait = min(MAX_RATE_WAIT_S, spec.timeout_s / 2)
        key = "tool:" + _key(spec, tenant_id).replace("\x1f", ":")
        return await self.limiter.acquire(key, spec.rate_limit, wait)

    @contextlib.asynccontextmanager
    async def slot(self, spec: ToolSpec) -> AsyncIterator[None]:
        async with self.bulkheads.slot(spec.name, spec.max_concurrency, cpu_bound=spec.cpu_bound):
            yield


def _key(spec: ToolSpec, tenant_id: str) -> str:
    return spec.name if spec.limits_scope == "global" else f"{tenant_id}\x1f{spec.name}"
