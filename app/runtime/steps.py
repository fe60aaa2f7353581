"""The start-up steps `open_runtime` takes, in order. Each starts what it owns and pushes its
stopping onto the runtime's exit stack, so shutdown runs the steps backwards: the turns stop
before the fan-out closes (their last events go out), memory drains before the database closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.conversation.assembly import TurnCore, TurnStores, assemble
from app.conversation.budgets import Budgets
from app.conversation.bus import EventBus
from app.conversation.loop import AgentLoop, LoopLimits
from app.conversation.ownership import LeaseConfig, SessionLeases, keep_leases
from app.conversation.service import ConversationService
from app.knowledge.ingest import add_paths
from app.knowledge.passages import KnowledgeSearch
from app.knowledge.service import KnowledgeBase
from app.llm.gateway import ChatModel
from app.llm.prices import Prices
from app.memory import MemoryService, MemorySweeper, open_memory
from app.nlu.cache import CachingParser
from app.nlu.pipeline import NLUPipeline
from app.observability import metrics
from app.principal import LOCAL
from app.resilience.redis_breaker import redis_breakers
from app.resilience.redis_client import SharedRedis, open_shared_redis
from app.runtime.parts import (
    SharedHttpClient,
    build_executor,
    build_model,
    build_registry,
    load_nlu,
    turn_parts,
)
from app.settings import Settings
from app.storage.approvals import ApprovalStore
from app.storage.engine import open_database
from app.storage.leases import LeaseStore, new_owner
from app.storage.port import Database
from app.storage.purge import Purger, RetentionPolicy, keep_wal_bounded
from app.storage.usage import UsageStore
from app.tools.approvals import ApprovalBroker
from app.tools.deps import open_dependencies
from app.tools.executor import ToolExecutor
from app.tools.loader import ToolsFile, load_tools_file, resolve_python
from app.tools.mcp.config import load_mcp_config
from app.tools.registry import ToolRegistry
from app.workflow.watchdog import Watchdog

if TYPE_CHECKING:
    from app.conversation.fanout import RedisFanout
    from app.tools.mcp.manager import McpManager

log = logging.getLogger(__name__)

Stack = contextlib.AsyncExitStack


def background(stack: Stack, work: Coroutine[Any, Any, None], name: str) -> None:
    """Run `work` as a task for the runtime's life; cancel it at shutdown."""
    task = asyncio.create_task(work, name=name)

    async def stop() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    stack.push_async_callback(stop)


async def start_shared_redis(stack: Stack, settings: Settings) -> SharedRedis | None:
    """Shared rate limits, breakers and events (HERMES_REDIS_URL): Redis must answer now."""
    shared = await open_shared_redis(settings.redis.shared_url, settings.redis.prefix)
    if shared is not None:
        stack.push_async_callback(shared.aclose)
    return shared


@dataclass(frozen=True)
class Storage:
    db: Database
    purger: Purger


async def start_storage(stack: Stack, settings: Settings) -> Storage:
    """The database (migrated), its metrics, the retention purge and the WAL's checkpoints."""
    db = await open_database(settings)
    stack.push_async_callback(db.close)
    stack.callback(metrics.watch_database(db))
    if db.applied_migrations:
        log.info("applied migrations: %s", ", ".join(db.applied_migrations))
    purger = Purger(
        db, RetentionPolicy.from_settings(settings.retention), on_report=metrics.observe_purge
    )
    purger.start()
    stack.push_async_callback(purger.stop)
    interval_s = settings.storage.checkpoint_interval_s
    background(stack, keep_wal_bounded(db, interval_s, metrics.observe_wal), "wal-checkpoints")
    return Storage(db, purger)


def start_memory(stack: Stack, settings: Settings, db: Database) -> MemoryService:
    """Memory, and its sweeper archiving what decayed."""
    memory = open_memory(db, settings)
    stack.push_async_callback(memory.drain)  # pending "last accessed" notes, before db.close
    sweeper = MemorySweeper(memory, settings.memory.sweep_interval_s)
    sweeper.start()
    stack.push_async_callback(sweeper.stop)
    return memory


async def start_knowledge(settings: Settings, db: Database, memory: MemoryService) -> KnowledgeBase:
    """The knowledge base (embedding with memory's model, when one is configured); on first
    start, while the default tenant has no documents, the documents of HERMES_KNOWLEDGE_DIR
    (the demo shop's policies), so policy questions are answered out of the box."""
    knowledge = KnowledgeBase(db, settings.knowledge, embedder=memory.embedder)
    folder = settings.knowledge.dir
    if folder is None or not folder.is_dir() or await knowledge.count(LOCAL.tenant_id):
        return knowledge
    # The deployment's own folder, put there by whoever installed it: trusted, as an admin's
    # upload marked so would be (documents uploaded later are untrusted unless an admin says).
    try:
        outcomes = await add_paths(
            knowledge, LOCAL.tenant_id, [folder], trusted=True, created_by="first-start"
        )
    except Exception:  # e.g. another process starting on the same database loaded them first
        log.warning("knowledge: the first-start load of %s did not complete", folder, exc_info=True)
        return knowledge
    added = sum(1 for o in outcomes if o.added is not None and o.added.changed)
    log.info(
        "knowledge: loaded %d documents from %s into tenant %s", added, folder, LOCAL.tenant_id
    )
    for outcome in outcomes:
        if outcome.error is not None:
            log.warning("knowledge: %s refused: %s", outcome.source, outcome.error)
    return knowledge


@dataclass(frozen=True)
class Events:
    bus: EventBus
    owner: str  # this process, as a session's lease holder
    fanout: RedisFanout | None  # with Redis: other processes' live events, and ours to them


async def start_events(stack: Stack, shared: SharedRedis | None) -> Events:
    bus, owner = EventBus(), new_owner()
    if shared is None:
        return Events(bus, owner, None)
    # Followers here get the live events of turns other processes run, and theirs ours.
    # (redis costs ~0.1 s to import: only when configured.)
    from app.conversation.fanout import RedisFanout

    fanout = RedisFanout(bus, shared, owner=owner)
    await fanout.start()
    stack.callback(metrics.watch_fanout(fanout.counts))
    stack.push_async_callback(fanout.aclose)  # after the turns stop: their last events
    return Events(bus, owner, fanout)


@dataclass(frozen=True)
class Tools:
    file: ToolsFile
    registry: ToolRegistry
    mcp: McpManager | None  # None when no MCP server is configured


async def start_tools(stack: Stack, settings: Settings, db: Database) -> Tools:
    """The tools file's tools, and the MCP servers' (connecting in the background)."""
    http = SharedHttpClient()
    stack.push_async_callback(http.aclose)
    tools = load_tools_file(settings.tools.file, resolve=resolve_python)
    registry = build_registry(tools, http)
    mcp_config = load_mcp_config(settings.mcp.config)
    if not mcp_config.servers:
        return Tools(tools, registry, None)
    # The MCP SDK costs about 0.5 s and 25 MB to import: only when a server is configured.
    from app.tools.mcp.manager import McpManager
    from app.tools.mcp.store import SqliteDefinitionStore

    mcp = McpManager(mcp_config, registry, settings, definitions=SqliteDefinitionStore(db))
    await mcp.start()  # returns at once: servers connect in the background
    stack.push_async_callback(mcp.aclose)
    return Tools(tools, registry, mcp)


@dataclass(frozen=True)
class Models:
    nlu: NLUPipeline
    parser: CachingParser
    model: ChatModel


async def start_models(
    stack: Stack, settings: Settings, shared: SharedRedis | None, model: ChatModel | None
) -> Models:
    """The NLU, and the model chain (unless the caller brings its own `model`)."""
    nlu = await asyncio.to_thread(load_nlu, settings)
    stack.callback(nlu.close)
    parser = CachingParser(nlu)  # earlier messages are read again each turn
    if model is None:
        model = build_model(settings, parser, breakers=redis_breakers(shared) if shared else None)
    stack.push_async_callback(model.aclose)
    return Models(nlu, parser, model)


@dataclass(frozen=True)
class Acting:
    approvals: ApprovalBroker
    executor: ToolExecutor


async def start_executor(
    stack: Stack,
    settings: Settings,
    db: Database,
    events: Events,
    stores: TurnStores,
    tools: Tools,
    shared: SharedRedis | None,
    knowledge: KnowledgeSearch,
) -> Acting:
    """Approvals (those the last shutdown left pending expired), the tools' dependencies, and
    the executor with its guards."""
    approvals = ApprovalBroker(
        ApprovalStore(db, events.bus.publish), settings.tools.approval_timeout_s
    )
    # Only where no live process owns the session: another's turn may still be waiting.
    expired = await approvals.store.expire_all_pending(time.time())
    if expired:
        log.warning("%d approvals were left pending by the last shutdown; expired", expired)
    # What the tools' handlers need (the demo shop, a deployment's own backend), only
    # what some configured tool needs: a tools file without demo tools opens no demo file.
    deps = await stack.enter_async_context(open_dependencies(tools.file.needed(), settings))
    deps = deps.adding({KnowledgeSearch: knowledge})
    executor = build_executor(
        settings, tools.registry, db, approvals, events.bus, stores.confirmations, deps, shared
    )
    stack.push_async_callback(executor.guards.limiter.aclose)
    return Acting(approvals, executor)


async def start_turns(
    stack: Stack,
    settings: Settings,
    db: Database,
    events: Events,
    stores: TurnStores,
    models: Models,
    executor: ToolExecutor,
    memory: MemoryService,
) -> TurnCore:
    """The turn core; then the turns this process takes over (sessions no live process owns:
    all of them after a restart on SQLite), its leases and the cancels others ask of it."""
    prices = Prices(settings.model.price_table)
    loop = AgentLoop(
        models.model,
        executor,
        LoopLimits.from_settings(settings),
        model_label=settings.model.name,
        prices=prices,
    )
    budgets = Budgets(settings.budgets, UsageStore(db), prices, executor.guards.limiter)
    # The configured models' prices are looked up now, not on a first turn.
    background(stack, budgets.warm([settings.model.name, *settings.model.fallbacks]), "prices")
    config = LeaseConfig.from_settings(settings)
    leases = SessionLeases(LeaseStore(db, events.bus.publish), owner=events.owner, config=config)
    parts = turn_parts(
        settings,
        loop=loop,
        executor=executor,
        parser=models.parser,
        memory=memory,
        leases=leases,
        budgets=budgets,
        cancel_signal=events.fanout,
    )
    core = assemble(stores, events.bus, parts)
    stack.push_async_callback(core.manager.shutdown)
    # What was left running ends as `interrupted`, what was queued runs; sessions a live
    # process owns are left to it.
    await core.manager.resume_queued()
    background(stack, keep_leases(core.manager, leases), "session-leases")
    if core.cancels is not None:
        # Cancels other processes record for turns running here: at once when Redis tells
        # this process, else found within a lease sweep.
        if events.fanout is not None:
            events.fanout.on_cancel = core.cancels.nudge
        background(stack, core.cancels.run(), "cancel-requests")
    return core


def start_sweepers(
    stack: Stack, settings: Settings, core: TurnCore, stores: TurnStores
) -> Watchdog:
    """Idle sessions archived, stuck steps watched, unclaimed handoffs expired."""
    watchdog = Watchdog(
        steps=stores.steps,
        turns=stores.turns,
        manager=core.manager,
        stuck_after_s=settings.workflow.step_stuck_after_s,
        interval_s=settings.workflow.watchdog_interval_s,
    )
    background(stack, sweep_idle(core.service, settings), "idle-sweeper")
    background(stack, watchdog.run(), "watchdog")
    background(stack, core.desk.run(), "handoff-sweeper")
    return watchdog


async def sweep_idle(conversation: ConversationService, settings: Settings) -> None:
    while True:
        await asyncio.sleep(settings.sessions.sweep_interval_s)
        try:
            archived = await conversation.archive_idle(
                time.time() - settings.sessions.idle_minutes * 60
            )
            if archived:
                log.info("archived %d idle sessions", len(archived))
        except Exception:
            log.exception("idle-session sweep failed")
