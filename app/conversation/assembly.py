"""How the turn core is put together: the stores on one database, then runner, manager and
service over them.

The runtime and the in-process test core build the same object graph with different parts
(NLU or none, memory or none, a real or a scripted model); wiring it here keeps the two from
drifting apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.conversation.budgets import Budgets
from app.conversation.cancels import CancelSignal, RemoteCancels
from app.conversation.context import ContextBuilder
from app.conversation.events import EventBus
from app.conversation.handoff import HandoffConfig, HandoffDesk
from app.conversation.loop import AgentLoop
from app.conversation.manager import TurnManager
from app.conversation.ownership import SessionLeases
from app.conversation.runner import RunnerConfig, TurnRunner
from app.conversation.service import ConversationService, TurnLimits
from app.conversation.understanding import DualChannel
from app.memory.port import TurnMemory
from app.storage.cancels import CancelStore
from app.storage.confirmations import ConfirmationStore
from app.storage.events import EventStore
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
        )


@dataclass(frozen=True)
class TurnParts:
    """What differs between deployments (and tests) around the same core."""

    loop: AgentLoop
    registry: ToolRegistry
    redactor: Redactor
    channel: DualChannel
    context: ContextBuilder
    memory: TurnMemory
    runner_config: RunnerConfig
    limits: TurnLimits
    turn_timeout_s: float
    # Several processes on one database: a session's turns run where its lease is held.
    leases: SessionLeases | None = None
    # Token and cost caps, the turn rate per principal; None: nothing is counted.
    budgets: Budgets | None = None
    handoff: HandoffConfig = field(default_factory=HandoffConfig)
    # With leases: how long a cancel of a turn another process runs waits for its end, and
    # what tells that process at once (Redis; without it, the owner looks every sweep).
    cancel_wait_s: float = 10.0
    cancel_signal: CancelSignal | None = None


@dataclass(frozen=True)
class TurnCore:
    runner: TurnRunner
    manager: TurnManager
    service: ConversationService
    desk: HandoffDesk
    cancels: RemoteCancels | None  # with leases; its `run()` is the owner's side, to start


def assemble(stores: TurnStores, bus: EventBus, parts: TurnParts) -> TurnCore:
    """Runner, manager and service over `stores`. Nothing runs until the caller resumes queued
    turns (`manager.resume_queued()`) or posts a message."""
    desk = HandoffDesk(
        handoffs=stores.handoffs,
        summaries=stores.summaries,
        sessions=stores.sessions,
        model=parts.loop.model,
        config=parts.handoff,
        system_prompt=parts.runner_config.system_prompt,
    )
    runner = TurnRunner(
        turns=stores.turns,
        messages=stores.messages,
        snapshots=stores.snapshots,
        loop=parts.loop,
        registry=parts.registry,
        config=parts.runner_config,
        steps=stores.steps,
        redactor=parts.redactor,
        channel=parts.channel,
        context=parts.context,
        memory=parts.memory,
        confirmations=stores.confirmations,
        budgets=parts.budgets,
        ended=desk,
    )
    manager = TurnManager(
        turns=stores.turns,
        sessions=stores.sessions,
        runner=runner,
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
    return TurnCore(runner, manager, service, desk, cancels)
