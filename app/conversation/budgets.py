"""Budgets: token and cost caps per turn, per session and per tenant per UTC day, and a turn
rate limit per principal.

Usage is what the model reports (prompt + completion tokens), priced per model
(`app.llm.prices`), and stored with the turn's end (`app.storage.usage`): the database is the
store every process shares. A turn starting over its session's or tenant's cap is refused
before it is accepted (429 `budget_exceeded`; a daily cap with `Retry-After`); a turn that
crosses a cap while it runs ends `budget_exceeded` before its next model call (the
`TurnMeter`, checked by the agent loop between rounds). The caps are `settings.budgets`
(`HERMES_BUDGET_*`), 0 (off) by default.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, Protocol

from limits import RateLimitItemPerMinute

from app.errors import BudgetExceeded, RateLimited
from app.llm.gateway import ModelReply
from app.llm.prices import Prices
from app.observability import metrics
from app.principal import Principal
from app.resilience.ratelimit import RateLimiter
from app.settings import BudgetSettings
from app.storage.usage import Usage, UsageStore, seconds_to_next_day

Kind = Literal[
    "turn_tokens", "turn_cost", "session_tokens", "session_cost", "tenant_tokens", "tenant_cost"
]


def _over(kind: Kind, used: float, limit: float, now: float) -> BudgetExceeded:
    metrics.BUDGET_REFUSALS.labels(kind=kind).inc()
    details: dict[str, object] = {"kind": kind, "limit": limit, "used": round(used, 6)}
    if kind.startswith("tenant_"):
        details["retry_after_s"] = round(seconds_to_next_day(now))
    what = kind.replace("_", " ")
    return BudgetExceeded(f"the {what} budget is used up", **details)


def check_caps(
    config: BudgetSettings, session: Usage, tenant: Usage, now: float, *, turn: Usage | None = None
) -> None:
    """Raise `BudgetExceeded` for the first cap reached (a turn's own first, then the session's,
    then the tenant's); the session's and tenant's counts include `turn`."""
    own = turn or Usage()
    caps: list[tuple[Kind, float, float]] = [
        ("turn_tokens", own.tokens, config.turn_tokens),
        ("turn_cost", own.cost, config.turn_cost),
        ("session_tokens", session.tokens + own.tokens, config.session_tokens),
        ("session_cost", session.cost + own.cost, config.session_cost),
        ("tenant_tokens", tenant.tokens + own.tokens, config.tenant_daily_tokens),
        ("tenant_cost", tenant.cost + own.cost, config.tenant_daily_cost),
    ]
    for kind, used, limit in caps:
        if limit and used >= limit:
            raise _over(kind, used, limit, now)


@dataclass
class TurnMeter:
    """What one turn's model calls used, against the caps, starting from the session's and the
    tenant's counts as they were when the turn started."""

    config: BudgetSettings
    used: Usage
    session: Usage
    tenant: Usage

    def add(self, reply: ModelReply, cost: float) -> None:
        """One answered call, priced by the loop (the same price its metric counts)."""
        self.used.tokens += reply.prompt_tokens + reply.completion_tokens
        self.used.cost += cost

    def check(self) -> None:
        """Before the next model call: `BudgetExceeded` if a cap is reached."""
        check_caps(self.config, self.session, self.tenant, time.time(), turn=self.used)


class TurnBudgets(Protocol):
    """What turns need of budgets: a turn admitted before it is accepted, a meter while it runs
    (None: nothing counted). `Budgets` is the one implementation."""

    async def admit(self, principal: Principal, session_id: str) -> None: ...

    async def meter(self, tenant_id: str, session_id: str, used: Usage) -> TurnMeter | None: ...


class Budgets:
    def __init__(
        self,
        config: BudgetSettings,
        usage: UsageStore,
        prices: Prices,
        limiter: RateLimiter,
    ) -> None:
        self.config = config
        self.usage = usage
        self.prices = prices
        self.limiter = limiter

    async def _counts(self, tenant_id: str, session_id: str, now: float) -> tuple[Usage, Usage]:
        """The session's and the tenant's usage today (read only for caps that are on)."""
        session, tenant = Usage(), Usage()
        if self.config.per_session:
            session = await self.usage.of_session(tenant_id, session_id)
        if self.config.per_tenant:
            tenant = await self.usage.of_tenant_day(tenant_id, now)
        return session, tenant

    async def admit(self, principal: Principal, session_id: str) -> None:
        """Before a turn is accepted: the principal's turn rate, then the session's and the
        tenant's caps (429 with `Retry-After` where waiting helps)."""
        if self.config.turn_rate_per_minute:
            key = f"turns:{principal.tenant_id}:{principal.subject}"
            item = RateLimitItemPerMinute(self.config.turn_rate_per_minute)
            wait = await self.limiter.take(key, item)
            if wait:
                metrics.BUDGET_REFUSALS.labels(kind="turn_rate").inc()
                raise RateLimited(
                    "too many turns started with this key; retry later",
                    limit_per_minute=self.config.turn_rate_per_minute,
                    retry_after_s=round(wait, 3),
                )
        if self.config.per_session or self.config.per_tenant:
            now = time.time()
            session, tenant = await self._counts(principal.tenant_id, session_id, now)
            check_caps(self.config, session, tenant, now)

    async def meter(self, tenant_id: str, session_id: str, used: Usage) -> TurnMeter:
        """A running turn's meter; `used` is the turn's own count, kept by its caller (so that
        a turn that fails still stores what it used)."""
        session, tenant = await self._counts(tenant_id, session_id, time.time())
        return TurnMeter(self.config, used, session, tenant)

    async def warm(self, models: list[str]) -> None:
        """Price the configured models at start-up, not on a first turn."""
        await self.prices.warm(models)
