"""After the turn's end: what waits on it. A reply that asks something opens an `ask_user` step
(timed out by the watchdog); a confident reading of what the customer asked for tells the
handoff desk (a person, or the end of the contact)."""

from __future__ import annotations

import time
from typing import Protocol

from app.conversation.turn.state import TurnState
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.storage.steps import NewStep, StepStore


def asks_the_user(text: str) -> bool:
    """A reply that ends in a question waits for the user (an `ask_user` step)."""
    return text.rstrip().endswith(("?", "？"))


class AskUser:
    def __init__(self, steps: StepStore, timeout_s: float, max_depth: int) -> None:
        self.steps = steps
        self.timeout_s = timeout_s
        self.max_depth = max_depth  # of the session's step queue

    async def run(self, state: TurnState) -> None:
        text = state.outcome.text
        if not asks_the_user(text):
            return
        step = NewStep(
            key="ask_user",
            action_type="ask_user",
            name="ask_user",
            input_context={"question": text[:500]},
            status="running",
            deadline_at=time.time() + self.timeout_s,
        )
        await self.steps.enqueue(state.writer, state.ref, [step], self.max_depth)


class TurnEnded(Protocol):
    """Told once a turn has completed, with what the customer's words asked for (the handoff
    desk: a person, or the end of the contact)."""

    async def turn_ended(
        self, writer: SessionWriter, turn: Turn, intent: str | None, language: str | None
    ) -> None: ...


class HandoffNotice:
    def __init__(self, ended: TurnEnded) -> None:
        self.ended = ended

    async def run(self, state: TurnState) -> None:
        understanding = state.understanding
        if understanding is not None and understanding.confident:
            result = understanding.result
            await self.ended.turn_ended(state.writer, state.turn, result.intent, result.language)
