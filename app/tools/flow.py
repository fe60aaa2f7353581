"""Flow control per tool: a rate limit, a concurrency limit and a circuit breaker."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

from app.resilience.breaker import BreakerPolicy, CircuitBreaker
from app.resilience.concurrency import Bulkheads
from app.resilience.ratelimit import RateLimiter
from app.tools.spec import ToolSpec

# A call waits this long at most for a rate-limit slot before the tool counts as unavailable.
MAX_RATE_WAIT_S = 1.0


class ToolGuards:
    def __init__(
        self,
        limiter: RateLimiter | None = None,
        bulkheads: Bulkheads | None = None,
        policy: BreakerPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limiter = limiter or RateLimiter()
        self.bulkheads = bulkheads or Bulkheads()
        self.policy = policy or BreakerPolicy()
        self.clock = clock
        self._breakers: dict[str, CircuitBreaker] = {}

    def breaker(self, tool: str) -> CircuitBreaker:
        breaker = self._breakers.get(tool)
        if breaker is None:
            breaker = self._breakers[tool] = CircuitBreaker(tool, self.policy, clock=self.clock)
        return breaker

    def breakers(self) -> dict[str, CircuitBreaker]:
        return dict(self._breakers)

    async def admit(self, spec: ToolSpec) -> bool:
        """Take a rate-limit slot, waiting briefly for one."""
        wait = min(MAX_RATE_WAIT_S, spec.timeout_s / 2)
        return await self.limiter.acquire(f"tool:{spec.name}", spec.rate_limit, wait)

    @contextlib.asynccontextmanager
    async def slot(self, spec: ToolSpec) -> AsyncIterator[None]:
        async with self.bulkheads.slot(spec.name, spec.max_concurrency, cpu_bound=spec.cpu_bound):
            yield
