"""Remember: the key facts of the turn written to the user's memory before the turn ends, so
what the reply acknowledged ("I'll remember that") is stored when the customer sees it."""

from __future__ import annotations

import logging

from app.conversation.turn.state import TurnState
from app.memory.extract import ToolEvidence
from app.memory.port import TurnMemory

log = logging.getLogger(__name__)


class Remember:
    def __init__(self, memory: TurnMemory) -> None:
        self.memory = memory

    async def run(self, state: TurnState) -> None:
        try:
            await self.memory.after_turn(
                state.memory_scope,
                state.writer,
                state.user_text,
                state.outcome.text,
                tool_results=[
                    ToolEvidence.of(c.name, r, c.arguments) for c, r in state.transcript.results
                ],
                previous_assistant=state.previous_reply,
            )
        except Exception:  # memory is a help, never a reason to fail the turn
            log.exception("memory extraction failed")
