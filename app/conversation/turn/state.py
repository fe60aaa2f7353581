"""One turn's state as it passes through the stages (the path is in pipeline.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.conversation.confirmation import Resolution
from app.conversation.emitter import TurnEmitter
from app.conversation.history import SessionView
from app.conversation.loop import Resume, TurnOutcome, TurnRun
from app.conversation.transcript import StoredTranscript
from app.conversation.understanding import Understanding
from app.conversation.window import ContextTurn
from app.llm.messages import ChatMessage
from app.memory.records import Scope
from app.storage.records import Snapshot, Turn
from app.storage.session_writer import SessionWriter
from app.storage.steps import TurnRef
from app.storage.usage import Usage
from app.tools.reports import TurnReports
from app.tools.spec import ToolSpec


@dataclass
class TurnState:
    """What the stages of one turn share. The opening (`TurnOpening`) fills the first block;
    every later field is written by the stage named beside it and read by those after it."""

    turn: Turn
    writer: SessionWriter  # every write of the turn goes with it: its lane, its worker's lease
    user_id: str
    used: Usage  # what the turn's model calls use (the caller's: stored however the turn ends)
    view: SessionView  # the session's history as this turn sees it (its snapshot too)
    emitter: TurnEmitter  # the turn's events; every write of the turn goes through `.writes`
    reports: TurnReports  # the emitter, with the turn's steps recorded around it
    transcript: StoredTranscript  # the tool calls and results, stored as messages
    user_text: str
    resume: Resume | None  # a failed turn retried from its steps: no NLU record, recall, answer
    context_turns: list[ContextTurn]  # the window (a resumed turn's own calls left open)
    previous_reply: str  # the last assistant text before this turn (memory reads it)

    understanding: Understanding | None = None  # Understand
    notes: list[ChatMessage] = field(default_factory=list)  # Understand, Recall: extra context
    untrusted: list[str] = field(default_factory=list)  # Recall: untrusted text, for the taint
    answer: Resolution | None = None  # AnswerConfirmation: the pending confirmation's fate
    tools: list[ToolSpec] = field(default_factory=list)  # Plan: the tools offered
    messages: list[ChatMessage] = field(default_factory=list)  # Plan: the model's context
    _run: TurnRun | None = field(default=None, init=False, repr=False)  # Guard
    _outcome: TurnOutcome | None = field(default=None, init=False, repr=False)  # Act

    @property
    def snapshot(self) -> Snapshot | None:
        """The session's snapshot, with the summary this turn folded in (Plan) if it did."""
        return self.view.snapshot

    @property
    def ref(self) -> TurnRef:
        return TurnRef(self.turn.tenant_id, self.turn.session_id, self.turn.id)

    @property
    def memory_scope(self) -> Scope:
        return Scope(self.turn.tenant_id, self.user_id)

    @property
    def run(self) -> TurnRun:
        """What the agent loop runs: set by the Guard stage."""
        if self._run is None:
            raise RuntimeError("the turn has no run before its Guard stage")
        return self._run

    @run.setter
    def run(self, run: TurnRun) -> None:
        self._run = run

    @property
    def outcome(self) -> TurnOutcome:
        """The turn's reply and how it stopped: set by the Act stage."""
        if self._outcome is None:
            raise RuntimeError("the turn has no outcome before its Act stage")
        return self._outcome

    @outcome.setter
    def outcome(self, outcome: TurnOutcome) -> None:
        self._outcome = outcome
