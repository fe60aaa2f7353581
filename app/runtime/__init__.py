"""Everything long-lived, opened in order at start-up and closed in reverse at shutdown.

`open_runtime` takes the start-up steps of app/runtime/steps.py one after the other; each
starts what it owns and pushes its stopping onto one exit stack. What the steps build from the
settings without starting anything is in app/runtime/parts.py."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from app.conversation.assembly import TurnStores
from app.conversation.bus import EventBus
from app.conversation.handoff import HandoffDesk
from app.conversation.manager import TurnManager
from app.conversation.service import ConversationService
from app.knowledge.service import KnowledgeBase
from app.llm.gateway import ChatModel
from app.memory import MemoryService
from app.nlu.pipeline import NLUPipeline
from app.observability import metrics
from app.resilience.concurrency import KeyedCounter
from app.resilience.redis_client import SharedRedis
from app.runtime.parts import SharedHttpClient, preflight
from app.runtime.steps import (
    start_events,
    start_executor,
    start_knowledge,
    start_memory,
    start_models,
    start_shared_redis,
    start_storage,
    start_sweepers,
    start_tools,
    start_turns,
)
from app.settings import Settings
from app.storage.port import Database
from app.storage.purge import Purger
from app.tools.approvals import ApprovalBroker
from app.tools.executor import ToolExecutor
from app.tools.registry import ToolRegistry
from app.workflow.service import StepService
from app.workflow.watchdog import Watchdog

if TYPE_CHECKING:
    from app.conversation.fanout import RedisFanout
    from app.tools.mcp.manager import McpManager

__all__ = [
    "REDIS_DEGRADED",
    "Runtime",
    "SharedHttpClient",
    "health_status",
    "open_runtime",
    "preflight",
    "stream_cap",
]


@dataclass
class Runtime:
    settings: Settings
    db: Database
    bus: EventBus
    conversation: ConversationService
    desk: HandoffDesk
    manager: TurnManager
    registry: ToolRegistry
    executor: ToolExecutor
    approvals: ApprovalBroker
    steps: StepService
    watchdog: Watchdog
    nlu: NLUPipeline
    memory: MemoryService
    knowledge: KnowledgeBase  # the tenants' documents: search, add, list, delete
    purger: Purger
    mcp: McpManager | None  # None when no MCP server is configured
    model: ChatModel
    shared: SharedRedis | None = None  # HERMES_REDIS_URL: limits, breakers...
    fanout: RedisFanout | None = None  # ...and the fan-out of session events
    # Event streams open per principal (HERMES_MAX_STREAMS_PER_PRINCIPAL), in this process.
    streams: KeyedCounter = field(default_factory=lambda: KeyedCounter(0))
    started_at: float = field(default_factory=time.time)

    async def health_checks(self) -> dict[str, str]:
        """Readiness by dependency: "ok", "degraded: <what still works>" (the service runs
        without it, less well) or "error: <type>" (never the message: it may leak)."""
        checks: dict[str, str] = {}
        try:
            await self.db.ping()
            checks["database"] = "ok"
        except Exception as exc:
            checks["database"] = f"error: {type(exc).__name__}"
        if self.shared is not None:
            # Without Redis every request is still served: other processes' events come by
            # polling the database, limits and breakers are this process's own.
            live = self.fanout is None or self.fanout.live
            ok = await self.shared.answers() and live
            checks["redis"] = "ok" if ok else REDIS_DEGRADED
        return checks

    def uptime_s(self) -> float:
        return round(time.time() - self.started_at, 3)


REDIS_DEGRADED = "degraded: polling the database"


def stream_cap(settings: Settings) -> int:
    """HERMES_MAX_STREAMS_PER_PRINCIPAL as this process applies it. The cap is per key, one
    customer's or one staff member's. With HERMES_AUTH=off (loopback only) there are no keys:
    every caller is the one local principal, so the default would cap the whole process's
    streams (the load benches hold hundreds), not a person's; there it applies only when set."""
    budgets = settings.budgets
    if settings.auth.mode == "off" and "max_streams_per_principal" not in budgets.model_fields_set:
        return 0
    return budgets.max_streams_per_principal


def health_status(checks: dict[str, str]) -> Literal["ok", "degraded", "failing"]:
    """ "failing" if a dependency the service cannot run without fails (take this process out
    of the load balancer), "degraded" if it runs without one, else "ok"."""
    if any(value.startswith("error") for value in checks.values()):
        return "failing"
    return "ok" if all(value == "ok" for value in checks.values()) else "degraded"


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings, *, model: ChatModel | None = None
) -> AsyncIterator[Runtime]:
    metrics.configure(max_tenants=settings.observability.metrics_max_tenants)
    async with contextlib.AsyncExitStack() as stack:
        shared = await start_shared_redis(stack, settings)
        storage = await start_storage(stack, settings)
        db = storage.db
        memory = start_memory(stack, settings, db)
        knowledge = await start_knowledge(settings, db, memory)
        events = await start_events(stack, shared)
        stores = TurnStores.on(db, events.bus.publish)
        tools = await start_tools(stack, settings, db)
        models = await start_models(stack, settings, shared, model)
        acting = await start_executor(stack, settings, db, events, stores, tools, shared, knowledge)
        core = await start_turns(
            stack, settings, db, events, stores, models, acting.executor, memory
        )
        watchdog = start_sweepers(stack, settings, core, stores)
        yield Runtime(
            settings=settings,
            db=db,
            bus=events.bus,
            conversation=core.service,
            desk=core.desk,
            manager=core.manager,
            registry=tools.registry,
            executor=acting.executor,
            approvals=acting.approvals,
            steps=StepService(
                steps=stores.steps,
                turns=stores.turns,
                manager=core.manager,
                conversation=core.service,
            ),
            watchdog=watchdog,
            nlu=models.nlu,
            memory=memory,
            knowledge=knowledge,
            purger=storage.purger,
            mcp=tools.mcp,
            model=models.model,
            shared=shared,
            fanout=events.fanout,
            streams=KeyedCounter(stream_cap(settings)),
        )
