"""Understand: what the NLU makes of the customer's message (the cheap channel beside the
model, app/conversation/understanding.py), recorded with the turn's next write and noted for
the model."""

from __future__ import annotations

from app.conversation.context import flatten
from app.conversation.turn.state import TurnState
from app.conversation.understanding import Understander
from app.storage.turns import record_understanding
from app.tools.shaping import Redactor

# Continuation only looks back a few turns (a question and its answer); reading the whole
# history would cost one NLU parse per earlier turn, every turn.
_UNDERSTAND_TURNS = 4


class Understand:
    def __init__(self, understander: Understander, redactor: Redactor) -> None:
        self.understander = understander
        self.redactor = redactor

    async def run(self, state: TurnState) -> None:
        turn = state.turn
        earlier = flatten(state.context_turns[-_UNDERSTAND_TURNS:])
        understanding = self.understander.understand(state.user_text, earlier)
        state.understanding = understanding
        if understanding is not None and state.resume is None:
            # Deferred: stored with the turn's next write (a memory event, the model step), which
            # comes before anything another writer could add to the session's events.
            # Masked like the snapshot's slots: the event and the message's metadata are copies
            # of the customer's words beside the message itself.
            event = self.redactor.data(understanding.event())
            state.emitter.writes.defer(lambda tx: record_understanding(tx, turn, event))
        snapshot = state.snapshot
        earlier_slots = dict(snapshot.state.get("slots", {})) if snapshot else {}
        note = self.understander.context_note(understanding, earlier_slots)
        if note is not None:
            state.notes.append(note)
