"""The runtime's parts, built from the settings: no side effects here (nothing started, nothing
to stop). The start-up steps (app/runtime/steps.py) build with these and start what they built.
"""

from __future__ import annotations

import httpx

from app.conversation.assembly import TurnParts
from app.conversation.budgets import Budgets
from app.conversation.bus import EventBus
from app.conversation.cancels import CancelSignal
from app.conversation.context import ContextBuilder
from app.conversation.handoff import HandoffConfig
from app.conversation.loop import AgentLoop
from app.conversation.ownership import SessionLeases
from app.conversation.service import TurnLimits
from app.conversation.turn.config import TurnConfig
from app.conversation.understanding import Understander
from app.conversation.window import ExtractiveSummarizer, ModelSummarizer, Summarizer, WindowConfig
from app.llm.build import ChainOptions, build_chain
from app.llm.catalog import ModelConfig, check_models, provider_of, with_local_fallback
from app.llm.gateway import ChatModel
from app.llm.masking import Redact
from app.memory import MemoryService
from app.nlu.pipeline import NLUPipeline
from app.nlu.types import Parser
from app.resilience.breaker import BreakerFactory, BreakerPolicy
from app.resilience.concurrency import Bulkheads
from app.resilience.ratelimit import RateLimiter
from app.resilience.redis_breaker import redis_breakers
from app.resilience.redis_client import SharedRedis, check_reachable
from app.settings import Settings
from app.storage.confirmations import ConfirmationStore
from app.storage.engine import check_database
from app.storage.port import Database
from app.storage.tool_calls import ToolCallStore
from app.tools.approvals import ApprovalBroker
from app.tools.deps import Dependencies
from app.tools.executor import ToolExecutor
from app.tools.flow import ToolGuards
from app.tools.handlers import build_runner
from app.tools.loader import ToolsFile, load_tools_file, resolve_python
from app.tools.mcp.config import load_mcp_config
from app.tools.registry import ToolRegistry
from app.tools.shaping import Redactor


def preflight(settings: Settings) -> None:
    """Checks that must stop start-up with a clear message before the server binds."""
    check_database(settings)
    primary, fallbacks = model_configs(settings)
    check_models(primary, fallbacks, settings.model.api)
    load_tools_file(settings.tools.file, resolve=resolve_python)
    load_mcp_config(settings.mcp.config)
    load_nlu(settings).close()
    if settings.redis.shared_url:
        check_reachable(settings.redis.shared_url)


def load_nlu(settings: Settings) -> NLUPipeline:
    return NLUPipeline.load(settings.nlu.model_dir)


def model_configs(settings: Settings) -> tuple[ModelConfig, list[ModelConfig]]:
    """The primary model and its fallbacks; the API base and key carry over to fallbacks of
    the same provider (e.g. two `openai/` models behind one gateway)."""
    model = settings.model
    primary = ModelConfig(model.name, model.api_base, model.key)
    fallbacks = []
    for name in model.fallbacks:
        same = provider_of(name) == provider_of(model.name)
        fallbacks.append(
            ModelConfig(name, model.api_base if same else None, model.key if same else None)
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
    if settings.model.local_fallback:
        fallbacks = with_local_fallback(primary, fallbacks)
    return build_chain(
        [primary, *fallbacks],
        ChainOptions.from_settings(settings, breakers),
        parser=parser,
        redact=redact or Redactor.with_patterns(settings.tools.redact_patterns).text,
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
    deps: Dependencies,
    shared: SharedRedis | None,
) -> ToolExecutor:
    guards = ToolGuards(
        RateLimiter.from_settings(settings.tools, shared),
        Bulkheads(),
        BreakerPolicy.from_settings(settings.tools),
        breakers=redis_breakers(shared) if shared else None,
    )
    return ToolExecutor(
        registry,
        deps=deps,
        guards=guards,
        calls=ToolCallStore(db, bus.publish),
        approvals=approvals,
        confirmations=confirmations,
        config=settings.tools,
    )


def build_summarizer(settings: Settings, model: ChatModel) -> Summarizer:
    """The configured model summarises; offline (hermes/local) the summary is extractive."""
    if settings.model.name.startswith("hermes/"):
        return ExtractiveSummarizer()
    return ModelSummarizer(model, temperature=settings.model.temperature_planning)


def turn_parts(
    settings: Settings,
    *,
    loop: AgentLoop,
    executor: ToolExecutor,
    parser: Parser,
    memory: MemoryService,
    leases: SessionLeases,
    budgets: Budgets,
    cancel_signal: CancelSignal | None,
) -> TurnParts:
    """What this deployment puts around the turn core: every setting of a turn, from here."""
    return TurnParts(
        loop=loop,
        registry=executor.registry,
        redactor=executor.redactor,
        channel=Understander(parser, settings.nlu.min_confidence),
        context=ContextBuilder(
            settings.model.system_prompt,
            WindowConfig.from_settings(settings.context),
            build_summarizer(settings, loop.model),
        ),
        memory=memory,
        turn_config=TurnConfig.from_settings(settings),
        limits=TurnLimits.from_settings(settings),
        turn_timeout_s=settings.turns.timeout_s,
        handoff=HandoffConfig.from_settings(settings.handoff),
        cancel_wait_s=settings.leases.cancel_wait_s,
        cancel_signal=cancel_signal,
        leases=leases,
        budgets=budgets,
    )
