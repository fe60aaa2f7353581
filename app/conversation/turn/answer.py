"""AnswerConfirmation: the customer's message read as the answer to a pending "please confirm"
(app/conversation/confirmation.py): the call runs, or the runtime replies, or it is moot.

After Recall, not inside Understand: its write comes after the memory events, in the order the
session's events have always had."""

from __future__ import annotations

from app.conversation import confirmation
from app.conversation.turn.state import TurnState
from app.storage.confirmations import ConfirmationStore


class AnswerConfirmation:
    def __init__(self, confirmations: ConfirmationStore) -> None:
        self.confirmations = confirmations

    async def run(self, state: TurnState) -> None:
        if state.resume is not None:  # a resumed turn keeps what its customer confirmed (Guard)
            return
        state.answer = await confirmation.resolve(
            self.confirmations,
            state.writer,
            state.turn,
            state.user_text,
            before_writing=state.emitter.writes.flush,
        )
