"""One claimed turn as a pipeline of named stages over one `TurnState` (state.py):

TurnManager -> TurnPipeline.run(writer, turn, user_id, used), on the session's view (SessionHistory)
  TurnOpening         the customer's words, a retried turn's resume point, its StepRecorder
  Understand          NLU intent and slots (Understander), recorded with the next write
  Recall              this user's memory (TurnMemory.before_turn): quoted notes, their taint
  AnswerConfirmation  yes/no to a pending "please confirm": run the call, or reply without model
  Plan                tools offered for the intent; context within budget (ContextBuilder), summary
  Guard               TurnPolicy (offered, confirmed, taint) and the budget's meter -> TurnRun
  Act                 AgentLoop.run: model -> tools -> ... -> reply (or the runtime's own "no")
  Ground              a knowledge reply: its figures in a source (or asked again), its citations
  Remember            key facts written (TurnMemory.after_turn)
  Complete            complete_turn: reply, snapshot, usage, deferred writes in one transaction
  AskUser, HandoffNotice  an ask_user step for a question; the handoff desk told the intent

Each stage is a small class holding only its collaborators, with one `run(state)`; each reads
what earlier stages left in the state and adds its own. Every write of the turn goes with the
`SessionWriter` its worker passed in (`state.writer`: the session's lane, the worker's lease).
The stages are listed in order where the turn core is put together
(app/conversation/assembly.py): a new one (knowledge passages after Recall, live-call assist)
is written as a class and listed there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.conversation.emitter import TurnEmitter
from app.conversation.history import SessionHistory
from app.conversation.loop import TurnOutcome
from app.conversation.turn.opening import TurnOpening
from app.conversation.turn.state import TurnState
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.storage.turns import TurnStore
from app.storage.usage import Usage


class Stage(Protocol):
    async def run(self, state: TurnState) -> None: ...


class TurnPipeline:
    """Runs each claimed turn through its stages, in order (the module docstring)."""

    def __init__(
        self,
        *,
        history: SessionHistory,
        turns: TurnStore,
        opening: TurnOpening,
        stages: Sequence[Stage],
        flush_s: float,
    ) -> None:
        self.history = history
        self.turns = turns
        self.opening = opening
        self.stages = tuple(stages)
        self.flush_s = flush_s  # how often streamed text is stored (app/conversation/emitter.py)

    async def run(
        self, writer: SessionWriter, turn: Turn, user_id: str, used: Usage | None = None
    ) -> TurnOutcome:
        """Run the turn, writing with `writer` (its worker's: the session's lane and lease);
        `used` (the caller's) counts what its model calls use, so a turn that fails still
        stores its usage."""
        view = await self.history.open(turn)
        emitter = TurnEmitter(self.turns, writer, turn, flush_s=self.flush_s)
        try:
            state = await self.opening.open(
                turn, user_id, view, emitter, Usage() if used is None else used
            )
            for stage in self.stages:
                await stage.run(state)
            return state.outcome
        finally:
            # Ended early (failed, cancelled): what the turn still deferred is stored before the
            # turn's end is; then the next turn rebuilds the session's view from the database.
            emitter.abandon()
            emitter.writes.flush()
            self.history.release(view)  # a no-op once the completed turn kept it

    def forget(self, session_id: str) -> None:
        """Drop the session's cached history (deleted, archived or resumed)."""
        self.history.forget(session_id)
