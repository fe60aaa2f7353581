"""The turn core in-process, from real parts, with no socket.

A real SQLite file with its migrations and the stores wired as app/runtime/ wires them, the
in-process `ScriptedLLM`, the executor over three instant tools (core_tools.yaml), and the loop,
turn pipeline, manager and service on top. The unit tests of the loop, the manager, the follower and
the service build the core here, so a change to how it is put together is made once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from app.conversation.assembly import TurnParts, TurnStores, assemble
from app.conversation.bus import EventBus
from app.conversation.context import ContextBuilder
from app.conversation.emitter import TurnEmitter
from app.conversation.handoff import HandoffConfig, HandoffDesk
from app.conversation.loop import AgentLoop, LoopLimits, Resume, TurnOutcome, TurnRun
from app.conversation.manager import TurnManager
from app.conversation.service import ConversationService, TurnLimits
from app.conversation.transcript import StoredTranscript
from app.conversation.turn.config import TurnConfig
from app.conversation.turn.pipeline import TurnPipeline
from app.conversation.understanding import Understander
from app.conversation.window import ExtractiveSummarizer, WindowConfig
from app.llm.prices import Prices
from app.llm.testing import ScriptedLLM, Step
from app.memory.testing import NullMemory
from app.principal import LOCAL
from app.resilience.breaker import BreakerPolicy
from app.settings import PROJECT_ROOT, Settings
from app.storage.approvals import ApprovalStore
from app.storage.event_log import EventStore
from app.storage.messages import MessageStore
from app.storage.port import Database
from app.storage.records import Event, Message, Turn
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.snapshots import SnapshotStore
from app.storage.sqlite import SqliteDatabase
from app.storage.steps import StepStore, TurnRef
from app.storage.tool_calls import ToolCallStore
from app.storage.turns import Accepted, BusyPolicy, TurnStore
from app.tools.approvals import ApprovalBroker
from app.tools.context import TurnScope
from app.tools.deps import Dependencies
from app.tools.executor import ToolExecutor
from app.tools.handlers import build_runner
from app.tools.loader import load_tools, resolve_python
from app.tools.policy import TurnPolicy
from app.tools.registry import ToolRegistry
from app.tools.shaping import Redactor
from app.tools.spec import ToolSpec
from app.workflow.recorder import StepRecorder
from tests.conversation.doubles import NoBudgets
from tests.tools.executors import local_guards

TOOLS = Path(__file__).with_name("core_tools.yaml")
SYSTEM_PROMPT = "You are the test assistant."
DEFAULTS = Settings()  # what the core is built with where a test does not say
TENANT = LOCAL.tenant_id

# What the tools' handlers ran, in order: (tool, arguments). Reset by `open_core`.
RAN: list[tuple[str, dict[str, Any]]] = []


async def lookup(ctx: Any, key: str) -> dict[str, Any]:
    RAN.append(("lookup", {"key": key}))
    return {"key": key, "value": f"value of {key}"}


async def save_note(ctx: Any, text: str) -> dict[str, Any]:
    RAN.append(("save_note", {"text": text}))
    return {"saved": text}


async def refund(ctx: Any, amount: float) -> dict[str, Any]:
    RAN.append(("refund", {"amount": amount}))
    return {"refunded": amount}


@dataclass
class Core:
    db: Database
    bus: EventBus
    model: ScriptedLLM
    sessions: SessionStore
    turns: TurnStore
    messages: MessageStore
    events: EventStore
    snapshots: SnapshotStore
    steps: StepStore
    registry: ToolRegistry
    executor: ToolExecutor
    loop: AgentLoop
    pipeline: TurnPipeline
    manager: TurnManager
    service: ConversationService
    desk: HandoffDesk  # the handoff desk over the same stores
    # Every event handed to the bus, in the order it was handed over (after its commit).
    published: list[Event] = field(default_factory=list)

    async def new_session(self, user_id: str = "u1") -> str:
        return (await self.sessions.create(TENANT, user_id, {})).id

    async def accept(
        self,
        session_id: str,
        content: str,
        *,
        client_message_id: str | None = None,
        policy: BusyPolicy = "enqueue",
        max_queued: int = 10,
    ) -> Accepted:
        """The user's message recorded and its turn queued (no worker is woken)."""
        accepted = await self.turns.accept(
            SessionWriter(session_id),
            tenant_id=TENANT,
            session_id=session_id,
            content=content,
            token_estimate=len(content) // 4 + 1,
            client_message_id=client_message_id,
            policy=policy,
            max_queued=max_queued,
        )
        assert accepted is not None
        return accepted

    async def running_turn(self, content: str = "hello") -> Turn:
        """A new session's first turn, accepted and claimed: what the loop runs inside."""
        session_id = await self.new_session()
        await self.accept(session_id, content)
        claimed = await self.turns.claim_next(SessionWriter(session_id), session_id)
        assert claimed is not None
        return claimed.turn

    async def finished(self, turn: Turn, timeout_s: float = 5.0) -> Turn:
        """Follow the turn's events to its end (completed or failed); the stored turn."""
        async with asyncio.timeout(timeout_s):
            events = self.service.follow_turn(turn)
            try:
                async for _event in events:
                    pass
            finally:
                await events.aclose()
        stored = await self.turns.get(turn.session_id, turn.id)
        assert stored is not None and stored.finished, stored
        return stored

    async def reply(self, turn: Turn) -> str | None:
        """The text of the turn's final assistant message, if it completed."""
        stored = await self.turns.get(turn.session_id, turn.id)
        if stored is None or stored.assistant_message_id is None:
            return None
        message = await self.messages.get(stored.assistant_message_id)
        return None if message is None else message.content

    async def log(self, session_id: str, after: int = 0) -> list[Event]:
        """The session's stored events after `after`, in sequence order."""
        return await self.events.after(session_id, after, 10_000)

    async def history(self, session_id: str) -> list[Message]:
        """The session's stored messages in conversation order."""
        messages, _ = await self.messages.page(TENANT, session_id, limit=10_000)
        return messages

    async def run_loop(
        self,
        turn: Turn,
        *,
        user_text: str = "hello",
        messages: list[dict[str, Any]] | None = None,
        tools: list[ToolSpec] | None = None,
        offered: frozenset[str] | None = None,
        resume: Resume | None = None,
    ) -> LoopRun:
        """Run the agent loop alone inside `turn`, recording as the pipeline does (events, steps,
        the tool messages); what the turn held is stored before this returns or raises."""
        emitter = TurnEmitter(self.turns, SessionWriter(turn.session_id), turn, flush_s=1000)
        recorder = StepRecorder(
            self.steps,
            TurnRef(turn.tenant_id, turn.session_id, turn.id),
            emitter,
            DEFAULTS.workflow.step_queue_max_depth,
            redactor=self.executor.redactor,
            writes=emitter.writes,
        )
        run = TurnRun(
            messages=messages
            if messages is not None
            else [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user_text},
            ],
            tools=tools if tools is not None else self.registry.offered(),
            scope=TurnScope(
                TENANT, "u1", turn.session_id, turn.id, turn.id, writer=emitter.writes.writer
            ),
            reports=recorder,
            transcript=StoredTranscript(emitter.writes, turn, Redactor()),
            user_text=user_text,
            resume=resume,
            policy=TurnPolicy(offered=offered),
        )
        try:
            outcome = await self.loop.run(run)
        finally:
            await emitter.settle()
            await emitter.writes.now(lambda tx: None)
        return LoopRun(outcome, run.messages)


@dataclass
class LoopRun:
    outcome: TurnOutcome
    messages: list[dict[str, Any]]  # the conversation as the loop left it


def registry_of(path: Path) -> ToolRegistry:
    registry = ToolRegistry()
    for spec in load_tools(path, resolve=resolve_python):
        registry.register(spec, build_runner(spec, http_client=_no_http))
    return registry


def _no_http() -> httpx.AsyncClient:
    raise AssertionError("the core's tools make no HTTP calls")


@contextlib.asynccontextmanager
async def open_core(
    path: Path,
    *script: Step,
    busy_policy: BusyPolicy = "reject",
    max_queued: int = 10,
    max_rounds: int = 8,
    turn_timeout_s: float = 10.0,
    approval_timeout_s: float = 5.0,
    keepalive_s: float = 15.0,
) -> AsyncIterator[Core]:
    """The turn core on a SQLite file in `path` (a test's tmp_path), the model playing
    `script`; everything is closed on exit, running turns first."""
    RAN.clear()
    published: list[Event] = []
    bus = EventBus()

    def publish(events: list[Event]) -> None:
        published.extend(events)
        bus.publish(events)

    async with contextlib.AsyncExitStack() as stack:
        db = await SqliteDatabase(
            path / "core.db", migrations_dir=PROJECT_ROOT / "migrations"
        ).open()
        stack.push_async_callback(db.close)
        stores = TurnStores.on(db, publish)
        model = ScriptedLLM(*script)
        registry = registry_of(TOOLS)
        executor = ToolExecutor(
            registry,
            deps=Dependencies(),  # the core's tools need nothing of the deployment
            guards=local_guards(BreakerPolicy.from_settings(DEFAULTS.tools)),
            calls=ToolCallStore(db, publish),
            approvals=ApprovalBroker(ApprovalStore(db, publish), approval_timeout_s),
            confirmations=stores.confirmations,
            config=DEFAULTS.tools,
        )
        stack.push_async_callback(executor.guards.limiter.aclose)
        limits = replace(LoopLimits.from_settings(DEFAULTS), max_rounds=max_rounds)
        loop = AgentLoop(model, executor, limits, model_label="scripted", prices=Prices())
        core = assemble(
            stores,
            bus,
            TurnParts(
                loop=loop,
                registry=registry,
                redactor=executor.redactor,
                # No NLU, no memory, no budgets: their null objects.
                channel=Understander(None, 1.0),
                context=ContextBuilder(
                    SYSTEM_PROMPT,
                    WindowConfig.from_settings(DEFAULTS.context),
                    ExtractiveSummarizer(),
                ),
                memory=NullMemory(),
                turn_config=replace(
                    TurnConfig.from_settings(DEFAULTS),
                    system_prompt=SYSTEM_PROMPT,
                    delta_flush_s=1000,
                ),
                limits=TurnLimits(
                    busy_policy=busy_policy, max_queued=max_queued, keepalive_s=keepalive_s
                ),
                turn_timeout_s=turn_timeout_s,
                budgets=NoBudgets(),
                handoff=HandoffConfig.from_settings(DEFAULTS.handoff),
                cancel_wait_s=DEFAULTS.leases.cancel_wait_s,
                cancel_signal=None,
                leases=None,  # one process
            ),
        )
        pipeline, manager, service = core.pipeline, core.manager, core.service
        stack.push_async_callback(manager.shutdown, 1.0)
        sessions, turns, messages = stores.sessions, stores.turns, stores.messages
        events, snapshots, steps = stores.events, stores.snapshots, stores.steps
        yield Core(
            db=db,
            bus=bus,
            model=model,
            sessions=sessions,
            turns=turns,
            messages=messages,
            events=events,
            snapshots=snapshots,
            steps=steps,
            registry=registry,
            executor=executor,
            loop=loop,
            pipeline=pipeline,
            manager=manager,
            service=service,
            published=published,
            desk=core.desk,
        )


async def eventually(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Wait until `check()` holds (an observable state, polled), failing after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.002)


def types(events: list[Event], *, turn_id: str | None = None) -> list[str]:
    """The event types, without the step bookkeeping (`step.updated`), optionally of one turn."""
    return [
        e.type
        for e in events
        if e.type != "step.updated" and (turn_id is None or e.turn_id == turn_id)
    ]


def streamed_text(events: list[Event]) -> str:
    return "".join(str(e.data["text"]) for e in events if e.type == "message.delta")
