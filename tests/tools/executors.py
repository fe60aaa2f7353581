"""A `ToolExecutor` for a test, built as the runtime builds it (app/runtime/parts.py): its
idempotency, approval and confirmation stores on the test's own database. What a test does not
say is the plain deployment's: no dependencies, default tool settings, one process's guards."""

from __future__ import annotations

import time
from collections.abc import Callable

from app.resilience.breaker import BreakerPolicy
from app.resilience.concurrency import Bulkheads
from app.resilience.ratelimit import RateLimiter
from app.settings import ToolSettings
from app.storage.approvals import ApprovalStore
from app.storage.confirmations import ConfirmationStore
from app.storage.port import Database
from app.storage.tool_calls import ToolCallStore
from app.storage.tx import Publisher
from app.tools.approvals import ApprovalBroker
from app.tools.deps import Dependencies
from app.tools.executor import ToolExecutor
from app.tools.flow import ToolGuards
from app.tools.registry import ToolRegistry


def executor_on(
    db: Database,
    registry: ToolRegistry,
    *,
    deps: Dependencies | None = None,
    guards: ToolGuards | None = None,
    config: ToolSettings | None = None,
    approval_timeout_s: float = 5.0,
    publish: Publisher | None = None,
) -> ToolExecutor:
    config = config or ToolSettings()
    return ToolExecutor(
        registry,
        deps=deps or Dependencies(),
        guards=guards or local_guards(BreakerPolicy.from_settings(config)),
        calls=ToolCallStore(db, publish),
        approvals=ApprovalBroker(ApprovalStore(db, publish), approval_timeout_s),
        confirmations=ConfirmationStore(db, publish),
        config=config,
    )


def local_guards(policy: BreakerPolicy, clock: Callable[[], float] = time.monotonic) -> ToolGuards:
    """One process's guards, as the runtime's without Redis: rate limits in memory, breakers
    under `policy` on `clock`."""
    return ToolGuards(RateLimiter(), Bulkheads(), policy, breakers=None, clock=clock)
