"""The turn's state at its start: what it said, where it reports, what it already did."""

from __future__ import annotations

from app.conversation.emitter import TurnEmitter
from app.conversation.history import SessionView
from app.conversation.transcript import StoredTranscript, resume_point
from app.conversation.turn.state import TurnState
from app.storage.messages import MessageStore
from app.storage.records import Turn
from app.storage.steps import StepStore, TurnRef
from app.storage.usage import Usage
from app.tools.shaping import Redactor
from app.workflow.recorder import StepRecorder


class TurnOpening:
    def __init__(
        self, messages: MessageStore, steps: StepStore, redactor: Redactor, max_depth: int
    ) -> None:
        self.messages = messages
        self.steps = steps
        self.redactor = redactor
        self.max_depth = max_depth  # of the session's step queue

    async def open(
        self, turn: Turn, user_id: str, view: SessionView, emitter: TurnEmitter, used: Usage
    ) -> TurnState:
        own = view.messages_of(turn.number)
        user_text = next((m.content or "" for m in own if m.id == turn.user_message_id), "")
        transcript = StoredTranscript(emitter.writes, turn, self.redactor)
        resume = None
        if turn.resume_from_step:
            resume = resume_point(turn, own, await self.messages.real_arguments(turn.id))
        # Where the turn reports: its emitter, with its steps recorded around it.
        # (Claiming the turn answered a waiting ask_user step.)
        reports = StepRecorder(
            self.steps,
            TurnRef(turn.tenant_id, turn.session_id, turn.id),
            emitter,
            self.max_depth,
            self.redactor,
            writes=emitter.writes,
        )
        leave_open = {c.id for c in resume.pending_calls} if resume else set()
        return TurnState(
            turn=turn,
            writer=emitter.writes.writer,
            user_id=user_id,
            used=used,
            view=view,
            emitter=emitter,
            reports=reports,
            transcript=transcript,
            user_text=user_text,
            resume=resume,
            context_turns=view.context_turns(leave_open),
            previous_reply=view.previous_reply(turn.number),
        )
