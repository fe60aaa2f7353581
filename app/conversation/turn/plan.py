"""Plan: the tools offered this turn (narrowed by a confident intent) and the model's context
within its budget: the summary, the goal, the notes, the recent turns. Folding old turns into
the summary is the one part that may call a model."""

from __future__ import annotations

from dataclasses import replace

from app.conversation.context import ContextBuilder, messages_of
from app.conversation.snapshot import store_fields
from app.conversation.turn.state import TurnState
from app.conversation.understanding import Understander
from app.tools.registry import ToolRegistry
from app.tools.shaping import Redactor


class Plan:
    def __init__(self, registry: ToolRegistry, context: ContextBuilder, redactor: Redactor) -> None:
        self.registry = registry
        self.context = context
        self.redactor = redactor

    async def run(self, state: TurnState) -> None:
        turn, turns, notes = state.turn, state.context_turns, state.notes
        state.tools = Understander.tools_for(self.registry.offered(), state.understanding)
        snapshot = state.snapshot
        plan = self.context.plan(snapshot, turns, notes)
        if plan.summarize:
            compaction = await self.context.summarise(
                plan,
                snapshot,
                turns,
                notes,
                {"tenant_id": turn.tenant_id, "session_id": turn.session_id},
            )
            # Stored with the turn's next write (the model step, the first text), or when the
            # turn ends, however it ends; masked, like the snapshot's goal (this call's plan
            # has the summary as the model just wrote it from the conversation).
            folded = {**compaction.fields(), "summary": self.redactor.text(compaction.summary)}
            state.emitter.writes.defer(store_fields(turn.session_id, folded))
            if snapshot is not None:
                state.view.fold(replace(snapshot, **folded))
            plan = compaction.plan
        state.messages = messages_of(plan)
