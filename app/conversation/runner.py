"""Run one claimed turn: build its context, run the agent loop, record the outcome."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Protocol

from app import events
from app.conversation import confirmation
from app.conversation.budgets import Budgets
from app.conversation.context import ContextBuilder, flatten, messages_of
from app.conversation.emitter import TurnEmitter
from app.conversation.history import Finished, SessionHistory, SessionView
from app.conversation.loop import AgentLoop, Resume, TurnOutcome, TurnRun, turn_language
from app.conversation.snapshot import store_fields, turn_end_fields
from app.conversation.transcript import Transcript, resume_point
from app.conversation.understanding import DualChannel, Understanding
from app.llm.messages import ChatMessage
from app.memory.extract import ToolEvidence
from app.memory.port import TurnMemory
from app.memory.records import Scope
from app.storage.confirmations import ConfirmationStore
from app.storage.messages import MessageStore, count_added
from app.storage.records import Turn
from app.storage.snapshots import SnapshotStore
from app.storage.steps import NewStep, StepStore, TurnRef
from app.storage.turns import TurnStore, complete_turn, record_understanding
from app.storage.tx import Tx
from app.storage.usage import Usage
from app.text.tokens import estimate_tokens
from app.tools.context import TurnScope
from app.tools.events import TurnEvents
from app.tools.policy import Taint, TurnPolicy
from app.tools.registry import ToolRegistry
from app.tools.shaping import Redactor
from app.workflow.recorder import StepRecorder

log = logging.getLogger(__name__)

_UNDERSTAND_TURNS = 4


@dataclass(frozen=True)
class RunnerConfig:
    system_prompt: str
    max_messages: int = 1000
    step_queue_max_depth: int = 50
    context_cache_sessions: int = 512
    context_cache_messages: int = 20000
    delta_flush_s: float = 0.05
    ask_user_timeout_s: float = 300.0


def asks_the_user(text: str) -> bool:
    """A reply that ends in a question waits for the user (an `ask_user` step)."""
    return text.rstrip().endswith(("?", "？"))


class TurnEnded(Protocol):
    """Told once a turn has completed, with what the customer's words asked for (the handoff
    desk: a person, or the end of the contact)."""

    async def turn_ended(self, turn: Turn, intent: str | None, language: str | None) -> None: ...


class TurnRunner:
    """Every collaborator is required: a deployment without one passes its null object
    (`NullMemory` from app.memory.testing, `DualChannel(None, 1.0)` without NLU), so the turn
    has one path, not a check per collaborator."""

    def __init__(
        self,
        *,
        turns: TurnStore,
        messages: MessageStore,
        snapshots: SnapshotStore,
        loop: AgentLoop,
        registry: ToolRegistry,
        config: RunnerConfig,
        steps: StepStore,
        redactor: Redactor,
        channel: DualChannel,
        context: ContextBuilder,
        memory: TurnMemory,
        confirmations: ConfirmationStore,
        ended: TurnEnded | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        self.ended = ended
        self.budgets = budgets
        self.context = context
        self.history = SessionHistory(
            messages,
            snapshots,
            max_messages=config.max_messages,
            max_sessions=config.context_cache_sessions,
            max_total_messages=config.context_cache_messages,
        )
        self.memory = memory
        self.confirmations = confirmations
        self.channel = channel
        self.steps = steps
        self.redactor = redactor
        self.turns = turns
        self.messages = messages
        self.snapshots = snapshots
        self.loop = loop
        self.registry = registry
        self.config = config

    async def run(self, turn: Turn, user_id: str, used: Usage | None = None) -> TurnOutcome:
        """Run the turn; `used` (the caller's) counts what its model calls use, so a turn that
        fails still stores its usage."""
        view = await self.history.open(turn)
        emitter = TurnEmitter(self.turns, turn, flush_s=self.config.delta_flush_s)
        try:
            return await self._run(turn, user_id, view, emitter, Usage() if used is None else used)
        finally:
            # Ended early (failed, cancelled): what the turn still held is stored before the
            # turn's end is; then the next turn rebuilds the session's view from the database.
            emitter.abandon()
            emitter.writes.release()
            self.history.release(view)  # a no-op once the completed turn kept it

    async def _run(
        self, turn: Turn, user_id: str, view: SessionView, emitter: TurnEmitter, used: Usage
    ) -> TurnOutcome:
        snapshot = view.snapshot
        own = view.messages_of(turn.number)
        user_text = next((m.content or "" for m in own if m.id == turn.user_message_id), "")
        transcript = Transcript(emitter.writes, turn, self.redactor)
        resume = None
        if turn.resume_from_step:
            resume = resume_point(turn, own, await self.messages.held_arguments(turn.id))
        # Where the turn reports: its emitter, with its steps recorded around it.
        # (Claiming the turn answered a waiting ask_user step.)
        reports: TurnEvents = StepRecorder(
            self.steps,
            TurnRef(turn.tenant_id, turn.session_id, turn.id),
            emitter,
            self.config.step_queue_max_depth,
            self.redactor,
            writes=emitter.writes,
        )
        leave_open = {c.id for c in resume.pending_calls} if resume else set()
        turns = view.context_turns(leave_open)
        previous_reply = view.previous_reply(turn.number)
        # Continuation only looks back a few turns (a question and its answer); reading the whole
        # history would cost one NLU parse per earlier turn, every turn.
        understanding = self.channel.understand(user_text, flatten(turns[-_UNDERSTAND_TURNS:]))
        if understanding is not None and resume is None:
            # Held: stored with the turn's next write (a memory event, the model step), which
            # comes before anything another writer could add to the session's events.
            # Masked like the snapshot's slots: the event and the message's metadata are copies
            # of the customer's words beside the message itself.
            event = self.redactor.data(understanding.event())
            emitter.writes.hold(lambda tx: record_understanding(tx, turn, event))
        earlier_slots = dict(snapshot.state.get("slots", {})) if snapshot else {}
        extra: list[ChatMessage] = []
        note = self.channel.context_note(understanding, earlier_slots)
        if note is not None:
            extra.append(note)
        memory_scope = Scope(turn.tenant_id, user_id)
        untrusted: list[str] = []
        answer = None
        if resume is None:  # not when a failed turn is resumed from its steps
            notes, untrusted = await self._recall(
                turn, memory_scope, user_text, understanding, reports
            )
            extra += notes
            answer = await confirmation.resolve(
                self.confirmations, turn, user_text, before_writing=emitter.writes.release
            )
        tools = self.channel.tools_for(self.registry.offered(), understanding)
        confirmed = [answer.call] if answer is not None and answer.call is not None else []
        plan = self.context.plan(snapshot, turns, extra)
        if plan.summarize:  # the one part of building the context that may call a model
            compaction = await self.context.summarise(
                plan,
                snapshot,
                turns,
                extra,
                {"tenant_id": turn.tenant_id, "session_id": turn.session_id},
            )
            # Stored with the turn's next write (the model step, the first text), or when the
            # turn ends, however it ends; masked, like the snapshot's goal (this call's plan
            # has the summary as the model just wrote it from the conversation).
            folded = {**compaction.fields(), "summary": self.redactor.text(compaction.summary)}
            emitter.writes.hold(store_fields(turn.session_id, folded))
            if snapshot is not None:
                snapshot = replace(snapshot, **folded)
                view.fold(snapshot)
            plan = compaction.plan
        run = TurnRun(
            messages=messages_of(plan),
            tools=tools,
            scope=TurnScope(
                tenant_id=turn.tenant_id,
                user_id=user_id,
                session_id=turn.session_id,
                turn_id=turn.id,
                trace_id=turn.id,
            ),
            emitter=reports,
            transcript=transcript,
            user_text=user_text,
            resume=resume,
            policy=TurnPolicy(
                offered=frozenset(t.name for t in tools),
                confirmed=frozenset(c.id for c in confirmed)
                | await self._confirmed_before(turn, resume),
                taint=Taint(
                    untrusted, lasting=snapshot.state.get("untrusted", []) if snapshot else []
                ),
            ),
            confirmed_calls=confirmed,
            meter=(
                await self.budgets.meter(turn.tenant_id, turn.session_id, used)
                if self.budgets is not None
                else None
            ),
        )
        if answer is not None and answer.reply_kind is not None:
            # "No" (or a yes too late) needs no model: the runtime says what happened.
            text = confirmation.REPLIES[answer.reply_kind][turn_language(run)]
            outcome = TurnOutcome(text=text, stopped="confirmation_declined")
        else:
            outcome = await self.loop.run(run)
        # Before the turn ends: what is acknowledged is stored.
        await self._remember(
            turn, memory_scope, user_text, outcome.text, transcript, previous_reply
        )
        await emitter.settle()
        finished: list[Finished] = []

        def at_end(tx: Tx) -> None:
            fields = turn_end_fields(
                turn,
                view.snapshot,
                user_text,
                transcript,
                understanding,
                run.policy.taint,
                self.redactor,
            )
            store_fields(turn.session_id, fields)(tx)
            # Only this turn's own messages above the watermark: the next turn need not read
            # them back (anything else added meanwhile, it will).
            added = count_added(
                tx,
                turn.session_id,
                after_turn=view.summarized_turns,
                through_turn=turn.number,
                after_pk=view.watermark,
            )
            # (Assigned, not appended: a batch run again runs this again.)
            finished[:] = [Finished(fields, tx.now, added == transcript.count + 1)]

        # The turn's end carries what it still holds (the last model step, tool results).
        final = await emitter.writes.now(
            lambda tx: complete_turn(
                tx,
                turn,
                text=outcome.text,
                token_estimate=estimate_tokens(outcome.text),
                model=outcome.model,
                rounds=outcome.rounds,
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                metadata={"stopped": outcome.stopped, **outcome.metadata},
                snapshot=at_end,
                usage=used,
            )
        )
        for message in [*transcript.written, final]:
            view.wrote(message)
        self.history.keep(view, finished[0])
        if asks_the_user(outcome.text):
            await self.steps.enqueue(
                TurnRef(turn.tenant_id, turn.session_id, turn.id),
                [
                    NewStep(
                        key="ask_user",
                        action_type="ask_user",
                        name="ask_user",
                        input_context={"question": outcome.text[:500]},
                        status="running",
                        deadline_at=time.time() + self.config.ask_user_timeout_s,
                    )
                ],
                self.config.step_queue_max_depth,
            )
        if self.ended is not None and understanding is not None and understanding.confident:
            result = understanding.result
            await self.ended.turn_ended(turn, result.intent, result.language)
        return outcome

    def forget(self, session_id: str) -> None:
        """Drop the session's cached history (deleted, archived or resumed)."""
        self.history.forget(session_id)

    async def _confirmed_before(self, turn: Turn, resume: Resume | None) -> frozenset[str]:
        """A retried turn keeps the confirmations its customer already gave."""
        if resume is None:
            return frozenset()
        return await self.confirmations.confirmed_calls(turn.id)

    async def _recall(
        self,
        turn: Turn,
        scope: Scope,
        user_text: str,
        understanding: Understanding | None,
        reports: TurnEvents,
    ) -> tuple[list[ChatMessage], list[str]]:
        """Recall what this user's history offers (or forget on request): the notes to add to
        the context (the recalled memory is a quoted `user` block, never a system note), and
        where untrusted text among them came from, for the taint rule."""
        intent = understanding.result.intent if understanding else None
        try:
            before = await self.memory.before_turn(scope, turn.session_id, user_text, intent)
        except Exception:  # memory is a help, never a reason to fail the turn
            log.exception("memory recall failed")
            return [], []
        notes: list[ChatMessage] = []
        if before.forget_command:
            await reports.emit(events.memory_forgotten(turn.id, len(before.forgotten)))
            notes.append(
                {
                    "role": "system",
                    "content": "The user asked you to forget something. "
                    f"{len(before.forgotten)} stored item(s) were deleted for good; "
                    "confirm this briefly.",
                }
            )
        if before.recall.event is not None:
            await reports.emit(events.memory_recalled(turn.id, before.recall.event))
        if before.recall.message is not None:
            notes.append(before.recall.message)
        untrusted = [
            f"memory note {item} in the customer's words" for item in before.recall.untrusted_items
        ]
        return notes, untrusted

    async def _remember(
        self,
        turn: Turn,
        scope: Scope,
        user_text: str,
        final_text: str,
        transcript: Transcript,
        previous: str,
    ) -> None:
        try:
            await self.memory.after_turn(
                scope,
                turn.session_id,
                user_text,
                final_text,
                tool_results=[
                    ToolEvidence.of(c.name, r, c.arguments) for c, r in transcript.results
                ],
                previous_assistant=previous,
            )
        except Exception:
            log.exception("memory extraction failed")
