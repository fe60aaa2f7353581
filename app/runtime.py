"""Everything long-lived, opened in order at start-up and closed in reverse at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx

from app.conversation.assembly import TurnParts, TurnStores, assemble
from app.conversation.budget import (
    BudgetConfig,
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
)
from app.conversation.budgets import Budgets, Caps
from app.conversation.context import ContextBuilder
from app.conversation.events import EventBus
from app.conversation.handoff import HandoffConfig, HandoffDesk
from app.conversation.loop import AgentLoop, LoopLimits
from app.conversation.manager import TurnManager
from app.conversation.ownership import LeaseConfig, SessionLeases, keep_leases
from app.conversation.runner import RunnerConfig
from app.conversation.service import ConversationService, TurnLimits
from app.conversation.understanding import DualChannel
from app.llm.build import ChainOptions, build_chain
from app.llm.catalog import ModelConfig, check_models, provider_of, with_local_fallback
from app.llm.gateway import ChatModel
from app.llm.local.model import LocalModelConfig
from app.llm.masking import Redact
from app.llm.prices import Prices
from app.llm.pseudonyms import MaskingPolicy
from app.llm.retry import RetryPolicy
from app.memory import MemoryService, MemorySweeper, open_memory
from app.nlu.cache import CachingParser
from app.nlu.pipeline import NLUPipeline
from app.nlu.types import Parser
from app.observability import metrics
from app.resilience.breaker import BreakerFactory, BreakerPolicy
from app.resilience.concurrency import Bulkheads, KeyedCounter
from app.resilience.ratelimit import RateLimiter
from app.resilience.redis_breaker import redis_breakers
from app.resilience.redis_client import SharedRedis, check_reachable, open_shared_redis
from app.settings import Settings
from app.storage.approvals import ApprovalStore
from app.storage.confirmations import ConfirmationStore
from app.storage.engine import check_database, open_database
from app.storage.leases import LeaseStore, new_owner
from app.storage.port import Database
from app.storage.purge import Purger, RetentionPolicy, keep_wal_bounded
from app.storage.tool_calls import ToolCallStore
from app.storage.usage import UsageStore
from app.tools.approvals import ApprovalBroker
from app.tools.deps import Dependencies, open_dependencies
from app.tools.executor import ExecutorConfig, ToolExecutor
from app.tools.flow import ToolGuards
from app.tools.handlers import build_runner
from app.tools.loader import ToolsFile, load_tools_file, resolve_python
from app.tools.mcp.config import load_mcp_config
from app.tools.registry import ToolRegistry
from app.tools.shaping import Redactor
from app.workflow.service import StepService
from app.workflow.watchdog import Watchdog

if TYPE_CHECKING:
    from app.conversation.fanout import RedisFanout
    from app.tools.mcp.manager import McpManager

log = logging.getLogger(__name__)


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
    if settings.auth == "off" and "max_streams_per_principal" not in settings.model_fields_set:
        return 0
    return settings.max_streams_per_principal


def health_status(checks: dict[str, str]) -> Literal["ok", "degraded", "failing"]:
    """ "failing" if a dependency the service cannot run without fails (take this process out
    of the load balancer), "degraded" if it runs without one, else "ok"."""
    if any(value.startswith("error") for value in checks.values()):
        return "failing"
    return "ok" if all(value == "ok" for value in checks.values()) else "degraded"


def model_configs(settings: Settings) -> tuple[ModelConfig, list[ModelConfig]]:
    """The primary model and its fallbacks; the API base and key carry over to fallbacks of
    the same provider (e.g. two `openai/` models behind one gateway)."""
    key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
    primary = ModelConfig(settings.model, settings.model_api_base, key)
    fallbacks = []
    for name in settings.fallback_models:
        same = provider_of(name) == provider_of(settings.model)
        fallbacks.append(
            ModelConfig(name, settings.model_api_base if same else None, key if same else None)
        )
    return primary, fallbacks


def build_model(
    settings: Settings,
    parser: Parser,
    redact: Redact | None = None,
    breakers: BreakerFactory | None = None,
) -> ChatModel:
    """The models in the order they are tried, `hermes/local` (answering with `parser`) last
    when `local_fallback`; `redact` runs on every failure message the chain gives out or logs.
    Each model takes the path `HERMES_MODEL_API` gives it (app.llm.catalog)."""
    primary, fallbacks = model_configs(settings)
    if settings.local_fallback:
        fallbacks = with_local_fallback(primary, fallbacks)
    options = ChainOptions(
        api=settings.model_api,
        timeout_s=settings.llm_timeout_s,
        max_connections=settings.model_max_connections,
        retry=RetryPolicy(
            retries=settings.llm_retries,
            backoff_s=settings.llm_retry_backoff_s,
            backoff_max_s=settings.llm_retry_backoff_max_s,
        ),
        breaker=BreakerPolicy(
            max_failures=settings.model_breaker_failures,
            max_timeouts=settings.model_breaker_timeouts,
            open_seconds=settings.model_breaker_open_s,
        ),
        local=LocalModelConfig(settings.nlu_min_confidence),
        breakers=breakers,
        masking=MaskingPolicy.of(
            settings.model_masking,
            settings.model_masking_by_tenant,
            settings.model_masking_kinds,
            _masking_secret(settings),
        ),
    )
    return build_chain(
        [primary, *fallbacks],
        options,
        parser=parser,
        redact=redact or Redactor.with_patterns(settings.redact_patterns).text,
    )


class SharedHttpClient:
    """The HTTP tools' one client, made on first use: building it loads the system's CA
    certificates (~0.1 s of start-up), which a deployment without HTTP tools never needs."""

    def __init__(self, timeout_s: float = 8.0) -> None:
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None

    def __call__(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self._timeout_s))
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _masking_secret(settings: Settings) -> bytes | None:
    """The key of the model-masking tokens: the deployment's own secret when one is set (so a
    session's tokens agree between its processes), else one chosen per process."""
    for secret in (settings.key_pepper, settings.auth_secret):
        if secret is not None:
            return b"model-masking\x1f" + secret.get_secret_value().encode()
    return None


def build_registry(tools: ToolsFile, http: SharedHttpClient) -> ToolRegistry:
    registry = ToolRegistry()
    for spec in tools.tools:
        registry.register(spec, build_runner(spec, http_client=http))
    return registry


def build_executor(
    settings: Settings,
    registry: ToolRegistry,
    db: Database,
    approvals: ApprovalBroker,
    bus: EventBus,
    confirmations: ConfirmationStore,
    deps: Dependencies | None = None,
    shared: SharedRedis | None = None,
) -> ToolExecutor:
    guards = ToolGuards(
        RateLimiter.from_settings(
            settings.rate_limit_storage,
            "rate_limit_storage" in settings.model_fields_set,
            shared,
        ),
        Bulkheads(),
        BreakerPolicy(
            max_failures=settings.tool_breaker_failures,
            max_timeouts=settings.tool_breaker_timeouts,
            open_seconds=settings.tool_breaker_open_s,
        ),
        breakers=redis_breakers(shared) if shared else None,
    )
    return ToolExecutor(
        registry,
        deps=deps,
        guards=guards,
        redactor=Redactor.with_patterns(settings.redact_patterns),
        calls=ToolCallStore(db, bus.publish),
        approvals=approvals,
        confirmations=confirmations,
        config=ExecutorConfig(
            max_result_tokens=settings.tool_result_max_tokens,
            max_failures_per_turn=settings.tool_max_failures_per_turn,
            confirmation_timeout_s=settings.confirmation_timeout_s,
        ),
    )


def background(
    stack: contextlib.AsyncExitStack, work: Coroutine[Any, Any, None], name: str
) -> None:
    """Run `work` as a task for the runtime's life; cancel it at shutdown."""
    task = asyncio.create_task(work, name=name)

    async def stop() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    stack.push_async_callback(stop)


def build_budgets(
    settings: Settings, db: Database, limiter: RateLimiter, prices: Prices
) -> Budgets:
    return Budgets(
        Caps(
            turn_tokens=settings.budget_turn_tokens,
            turn_cost=settings.budget_turn_cost,
            session_tokens=settings.budget_session_tokens,
            session_cost=settings.budget_session_cost,
            tenant_daily_tokens=settings.budget_tenant_daily_tokens,
            tenant_daily_cost=settings.budget_tenant_daily_cost,
            turn_rate_per_minute=settings.turn_rate_per_minute,
        ),
        UsageStore(db),
        prices,
        limiter,
    )


def build_summarizer(settings: Settings, model: ChatModel) -> Summarizer:
    """The configured model summarises; offline (hermes/local) the summary is extractive."""
    if settings.model.startswith("hermes/"):
        return ExtractiveSummarizer()
    return ModelSummarizer(model, temperature=settings.temperature_planning)


def load_nlu(settings: Settings) -> NLUPipeline:
    return NLUPipeline.load(settings.nlu_model_dir)


def preflight(settings: Settings) -> None:
    """Checks that must stop start-up with a clear message before the server binds."""
    check_database(settings)
    primary, fallbacks = model_configs(settings)
    check_models(primary, fallbacks, settings.model_api)
    load_tools_file(settings.tools_file, resolve=resolve_python)
    load_mcp_config(settings.mcp_config)
    load_nlu(settings).close()
    if settings.shared_redis_url:
        check_reachable(settings.shared_redis_url)


async def _sweep_idle(conversation: ConversationService, settings: Settings) -> None:
    while True:
        await asyncio.sleep(settings.session_sweep_interval_s)
        try:
            archived = await conversation.archive_idle(
                time.time() - settings.session_idle_minutes * 60
            )
            if archived:
                log.info("archived %d idle sessions", len(archived))
        except Exception:
            log.exception("idle-session sweep failed")


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings, *, model: ChatModel | None = None
) -> AsyncIterator[Runtime]:
    metrics.configure(max_tenants=settings.metrics_max_tenants)
    async with contextlib.AsyncExitStack() as stack:
        # Shared rate limits and breakers (HERMES_REDIS_URL): Redis must answer at start-up.
        shared = await open_shared_redis(settings.shared_redis_url, settings.redis_prefix)
        if shared is not None:
            stack.push_async_callback(shared.aclose)
        db = await open_database(settings)
        stack.push_async_callback(db.close)
        stack.callback(metrics.watch_database(db))
        if db.applied_migrations:
            log.info("applied migrations: %s", ", ".join(db.applied_migrations))

        purger = Purger(
            db,
            RetentionPolicy.from_settings(settings),
            interval_s=settings.retention_interval_s,
            on_report=metrics.observe_purge,
        )
        purger.start()
        stack.push_async_callback(purger.stop)
        background(
            stack,
            keep_wal_bounded(db, settings.db_checkpoint_interval_s, metrics.observe_wal),
            "wal-checkpoints",
        )

        memory = open_memory(db, settings)
        stack.push_async_callback(memory.drain)  # pending "last accessed" notes, before db.close
        sweeper = MemorySweeper(memory, settings.memory_sweep_interval_s)
        sweeper.start()
        stack.push_async_callback(sweeper.stop)

        bus = EventBus()
        owner = new_owner()  # this process, as a session's lease holder
        fanout = None
        if shared is not None:
            # Followers here get the live events of turns other processes run, and theirs ours.
            # (redis costs ~0.1 s to import: only when configured.)
            from app.conversation.fanout import RedisFanout

            fanout = RedisFanout(bus, shared, owner=owner)
            await fanout.start()
            stack.callback(metrics.watch_fanout(fanout.counts))
            stack.push_async_callback(fanout.aclose)  # after the turns stop: their last events
        stores = TurnStores.on(db, bus.publish)

        http = SharedHttpClient()
        stack.push_async_callback(http.aclose)
        tools = load_tools_file(settings.tools_file, resolve=resolve_python)
        registry = build_registry(tools, http)
        mcp_config = load_mcp_config(settings.mcp_config)
        mcp = None
        if mcp_config.servers:
            # The MCP SDK costs about 0.5 s and 25 MB to import: only when a server is configured.
            from app.tools.mcp.manager import McpManager
            from app.tools.mcp.store import SqliteDefinitionStore

            mcp = McpManager(mcp_config, registry, settings, definitions=SqliteDefinitionStore(db))
            await mcp.start()  # returns at once: servers connect in the background
            stack.push_async_callback(mcp.aclose)

        nlu = await asyncio.to_thread(load_nlu, settings)
        stack.callback(nlu.close)
        parser = CachingParser(nlu)  # earlier messages are read again each turn
        if model is None:
            model = build_model(
                settings, parser, breakers=redis_breakers(shared) if shared else None
            )
        stack.push_async_callback(model.aclose)

        approvals = ApprovalBroker(ApprovalStore(db, bus.publish), settings.approval_timeout_s)
        # Only where no live process owns the session: another's turn may still be waiting.
        expired = await approvals.store.expire_all_pending(time.time())
        if expired:
            log.warning("%d approvals were left pending by the last shutdown; expired", expired)
        # What the tools' handlers need (the demo shop, a deployment's own backend), only
        # what some configured tool needs: a tools file without demo tools opens no demo file.
        deps = await stack.enter_async_context(open_dependencies(tools.needed(), settings))
        executor = build_executor(
            settings, registry, db, approvals, bus, stores.confirmations, deps, shared
        )
        stack.push_async_callback(executor.guards.limiter.aclose)
        prices = Prices(settings.model_price_table)
        loop = AgentLoop(
            model,
            executor,
            LoopLimits(
                max_rounds=settings.max_tool_rounds,
                max_tokens=settings.max_tokens,
                temperature_tools=settings.temperature_tools,
                temperature_text=settings.temperature_text,
            ),
            model_label=settings.model,
            prices=prices,
        )
        budgets = build_budgets(settings, db, executor.guards.limiter, prices)
        # The configured models' prices are looked up now, not on a first turn.
        background(stack, budgets.warm([settings.model, *settings.fallback_models]), "prices")
        leases = SessionLeases(
            LeaseStore(db, bus.publish),
            owner=owner,
            config=LeaseConfig(
                ttl_s=settings.session_lease_s,
                renew_s=settings.session_lease_renew_s,
                sweep_s=settings.session_lease_sweep_s,
                # One SQLite file is one machine's: a lease of a process of this host that is
                # gone is free at once (a restart takes its sessions back without waiting).
                reap_local=settings.postgres_url is None,
            ),
        )
        core = assemble(
            stores,
            bus,
            TurnParts(
                loop=loop,
                registry=registry,
                redactor=executor.redactor,
                channel=DualChannel(parser, settings.nlu_min_confidence),
                context=ContextBuilder(
                    settings.system_prompt,
                    BudgetConfig.from_settings(settings),
                    build_summarizer(settings, model),
                ),
                memory=memory,
                runner_config=RunnerConfig(
                    settings.system_prompt,
                    settings.context_max_messages,
                    step_queue_max_depth=settings.step_queue_max_depth,
                    ask_user_timeout_s=settings.ask_user_timeout_s,
                    context_cache_sessions=settings.context_cache_sessions,
                    context_cache_messages=settings.context_cache_messages,
                    delta_flush_s=settings.delta_flush_ms / 1000,
                ),
                limits=TurnLimits(
                    busy_policy=settings.busy_policy,
                    max_queued=settings.max_queued_turns,
                    keepalive_s=settings.sse_keepalive_s,
                ),
                turn_timeout_s=settings.turn_timeout_s,
                leases=leases,
                budgets=budgets,
                handoff=HandoffConfig(
                    fallback_s=settings.handoff_fallback_s,
                    wait_per_position_s=settings.handoff_wait_per_position_s,
                    sweep_s=settings.handoff_sweep_interval_s,
                ),
                cancel_wait_s=settings.cancel_wait_s,
                cancel_signal=fanout,
            ),
        )
        manager, conversation, steps, turns = core.manager, core.service, stores.steps, stores.turns
        stack.push_async_callback(manager.shutdown)
        # Sessions no live process owns (all of them, after a restart on SQLite) are taken
        # over: what was left running ends as `interrupted`, what was queued runs. Sessions a
        # live process owns are left to it.
        await manager.resume_queued()
        background(stack, keep_leases(manager, leases), "session-leases")
        if core.cancels is not None:
            # Cancels other processes record for turns running here: at once when Redis tells
            # this process, else found within a lease sweep.
            if fanout is not None:
                fanout.on_cancel = core.cancels.nudge
            background(stack, core.cancels.run(), "cancel-requests")

        watchdog = Watchdog(
            steps=steps,
            turns=turns,
            manager=manager,
            stuck_after_s=settings.step_stuck_after_s,
            interval_s=settings.watchdog_interval_s,
        )
        background(stack, _sweep_idle(conversation, settings), "idle-sweeper")
        background(stack, watchdog.run(), "watchdog")
        background(stack, core.desk.run(), "handoff-sweeper")
        yield Runtime(
            settings=settings,
            db=db,
            bus=bus,
            conversation=conversation,
            desk=core.desk,
            manager=manager,
            registry=registry,
            executor=executor,
            approvals=approvals,
            steps=StepService(steps=steps, turns=turns, manager=manager, conversation=conversation),
            watchdog=watchdog,
            nlu=nlu,
            memory=memory,
            purger=purger,
            mcp=mcp,
            model=model,
            shared=shared,
            fanout=fanout,
            streams=KeyedCounter(stream_cap(settings)),
        )
