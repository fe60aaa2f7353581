"""Recall: what this user's history offers the turn (or, on request, forgetting it). The
knowledge the call centre's documents offer is recalled here too, once it exists."""

from __future__ import annotations

import logging

from app import events
from app.conversation.turn.state import TurnState
from app.memory.port import TurnMemory

log = logging.getLogger(__name__)


class Recall:
    def __init__(self, memory: TurnMemory) -> None:
        self.memory = memory

    async def run(self, state: TurnState) -> None:
        """The notes the context gets (recalled memory is a quoted `user` block, never a system
        note), and where untrusted text among them came from, for the taint rule. Not when a
        failed turn is resumed from its steps."""
        if state.resume is not None:
            return
        turn, understanding = state.turn, state.understanding
        intent = understanding.result.intent if understanding else None
        try:
            before = await self.memory.before_turn(
                state.memory_scope, state.writer, state.user_text, intent
            )
        except Exception:  # memory is a help, never a reason to fail the turn
            log.exception("memory recall failed")
            return
        if before.forget_command:
            await state.reports.emit(events.memory_forgotten(turn.id, len(before.forgotten)))
            state.notes.append(
                {
                    "role": "system",
                    "content": "The user asked you to forget something. "
                    f"{len(before.forgotten)} stored item(s) were deleted for good; "
                    "confirm this briefly.",
                }
            )
        if before.recall.event is not None:
            await state.reports.emit(events.memory_recalled(turn.id, before.recall.event))
        if before.recall.message is not None:
            state.notes.append(before.recall.message)
        state.untrusted = [
            f"memory note {item} in the customer's words" for item in before.recall.untrusted_items
        ]
