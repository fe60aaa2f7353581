"""Act: the agent loop (model -> tools -> model ... -> reply), or, for a declined or expired
confirmation, the runtime's own reply: "no" needs no model."""

from __future__ import annotations

from app.conversation import confirmation
from app.conversation.loop import AgentLoop, TurnOutcome, turn_language
from app.conversation.turn.state import TurnState


class Act:
    def __init__(self, loop: AgentLoop) -> None:
        self.loop = loop

    async def run(self, state: TurnState) -> None:
        answer = state.answer
        if answer is not None and answer.reply_kind is not None:
            text = confirmation.REPLIES[answer.reply_kind][turn_language(state.run)]
            state.outcome = TurnOutcome(text=text, stopped="confirmation_declined")
        else:
            state.outcome = await self.loop.run(state.run)
