"""How the turn core is put together: the stores on one database, then the turn pipeline,
manager and service over them.

The runtime and the in-process test core build the same object graph with different parts
(NLU or none, memory or none, a real or a scripted model); wiring it here keeps the two from
drifting apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.conversation.budgets import TurnBudgets
from app.conversation.bus import EventBus
from app.conversation.cancels import CancelSignal, RemoteCancels
from app.conversation.context import ContextBuilder
from app.conversation.handoff import HandoffConfig, HandoffDesk
from app.conversation.history import SessionHistory
from app.conversation.loop import AgentLoop
from app.conversation.manager import TurnManager
from app.conversation.ownership import SessionLeases
from app.conversation.service import ConversationService, TurnLimits
from app.conversation.turn.act import Act
from app.conversation.turn.answer import AnswerConfirmation
from app.conversation.turn.complete import Complete
from app.conversation.turn.config import TurnConfig
from app.conversation.turn.ground import Ground
from app.conversation.turn.guard import Guard
from app.conversation.turn.notices import AskUser, HandoffNotice, TurnEnded
from app.conversation.turn.opening import TurnOpening
from app.conversation.turn.pipeline import Stage, TurnPipeline
from app.conversation.turn.plan import Plan
from app.conversation.turn.recall import Recall
from app.conversation.turn.remember import Remember
from app.conversation.turn.understand import Understand
from app.conversation.understanding import Understander
from app.knowledge.gaps import KnowledgeGaps
from app.memory.port import TurnMemory
from app.storage.cancels import CancelStore
from app.storage.confirmations import ConfirmationStore
from app.storage.event_log import EventStore
from app.storage.handoffs import HandoffStore
from app.storage.messages import MessageStore
from app.storage.port import Database
from app.storage.records import Event
from app.storage.sessions import SessionStore
from app.storage.snapshots import SnapshotStore
from app.storage.steps import StepStore
from app.storage.summaries import SummaryStore
from app.storage.turns import TurnStore
from app.tools.registry import ToolRegistry
from app.tools.shaping import Redactor


@dataclass(frozen=True)
class TurnStores:
    """Every store a turn writes to, on one database, publishing committed events to one place."""

    sessions: SessionStore
    turns: TurnStore
    messages: MessageStore
    events: EventStore
    snapshots: SnapshotStore
    steps: StepStore
    confirmations: ConfirmationStore
    handoffs: HandoffStore
    summaries: SummaryStore
    cancels: CancelStore
    gaps: KnowledgeGaps

    @classmethod
    def on(cls, db: Database, publish: Callable[[list[Event]], None]) -> TurnStores:
        return cls(
            sessions=SessionStore(db, publish),
            turns=TurnStore(db, publish),
            messages=MessageStore(db, publish),
            events=EventStore(db, publish),
            snapshots=SnapshotStore(db, publish),
            steps=StepStore(db, publish),
            confirmations=ConfirmationStore(db, publish),
            handoffs=HandoffStore(db, publish),
            summaries=SummaryStore(db, publish),
            cancels=CancelStore(db, publish),
            gaps=KnowledgeGaps(db, publish),
        )


@dataclass(frozen=True)
class TurnParts:
    """What differs between deployments (and tests) around the same core."""

    loop: AgentLoop
    registry: ToolRegistry
    redactor: Redactor
    channel: Understander
    context: ContextBuilder
    memory: TurnMemory
    turn_config: TurnConfig
    limits: TurnLimits
    turn_timeout_s: float
    # Token and cost caps, the turn rate per principal (`Budgets`; tests pass a null object).
    budgets: TurnBudgets
    handoff: HandoffConfig
    # With leases: how long a cancel of a turn another process runs waits for its end, and
    # what tells that process at once (Redis; None without it: the owner looks every sweep).
    cancel_wait_s: float
    cancel_signal: CancelSignal | None
    # Several processes on one database: a session's turns run where its lease is held (None:
    # one process without leases, as the in-process tests run).
    leases: SessionLeases | None


@dataclass(frozen=True)
class TurnCore:
    pipeline: TurnPipeline
    manager: TurnManager
    service: ConversationService
    desk: HandoffDesk
    cancels: RemoteCancels | None  # with leases; its `run()` is the owner's side, to start


def turn_pipeline(stores: TurnStores, parts: TurnParts, ended: TurnEnded) -> TurnPipeline:
    """The turn's stages, in order (the path is drawn in app/conversation/turn/pipeline.py)."""
    config, redactor = parts.turn_config, parts.redactor
    history = SessionHistory(
        stores.messages,
        stores.snapshots,
        max_messages=config.max_messages,
        max_sessions=config.context_cache_sessions,
        max_total_messages=config.context_cache_messages,
    )
    stages: list[Stage] = [
        Understand(parts.channel, redactor),
        Recall(parts.memory),
        AnswerConfirmation(stores.confirmations),
        Plan(parts.registry, parts.context, redactor),
        Guard(stores.confirmations, parts.budgets),
        Act(parts.loop),
        Ground(parts.loop, redactor),
        Remember(parts.memory),
        Complete(history, redactor),
        AskUser(stores.steps, config.ask_user_timeout_s, config.step_queue_max_depth),
        HandoffNotice(ended),
    ]
    return TurnPipeline(
        history=history,
        turns=stores.turns,
        opening=TurnOpening(stores.messages, stores.steps, redactor, config.step_queue_max_depth),
        stages=stages,
        flush_s=config.delta_flush_s,
    )


def assemble(stores: TurnStores, bus: EventBus, parts: TurnParts) -> TurnCore:
    """The turn pipeline, manager and service over `stores`. Nothing runs until the caller
    resumes queued turns (`manager.resume_queued()`) or posts a message."""
    desk = HandoffDesk(
        handoffs=stores.handoffs,
        summaries=stores.summaries,
        sessions=stores.sessions,
        messages=stores.messages,
        gaps=stores.gaps,
        model=parts.loop.model,
        config=parts.handoff,
        system_prompt=parts.turn_config.system_prompt,
    )
    pipeline = turn_pipeline(stores, parts, desk)
    manager = TurnManager(
        turns=stores.turns,
        sessions=stores.sessions,
        pipeline=pipeline,
        turn_timeout_s=parts.turn_timeout_s,
        steps=stores.steps,
        leases=parts.leases,
    )
    cancels = None
    if parts.leases is not None:
        cancels = RemoteCancels(
            store=stores.cancels,
            turns=stores.turns,
            manager=manager,
            bus=bus,
            owner=parts.leases.owner,
            wait_s=parts.cancel_wait_s,
            check_s=parts.leases.config.sweep_s,
            signal=parts.cancel_signal,
        )
    service = ConversationService(
        sessions=stores.sessions,
        turns=stores.turns,
        messages=stores.messages,
        events=stores.events,
        manager=manager,
        bus=bus,
        limits=parts.limits,
        budgets=parts.budgets,
        desk=desk,
        redactor=parts.redactor,
        remote=cancels,
    )
    return TurnCore(pipeline, manager, service, desk, cancels)
