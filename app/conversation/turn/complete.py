"""Complete: the turn's end in one transaction (the reply, the snapshot, the usage, and what
the turn still deferred), then the session's view kept for its next turn."""

from __future__ import annotations

from app.conversation.history import Finished, SessionHistory
from app.conversation.snapshot import store_fields, turn_end_fields
from app.conversation.turn.state import TurnState
from app.storage.messages import count_added
from app.storage.records import Message
from app.storage.turns import complete_turn
from app.storage.tx import Tx
from app.text.tokens import estimate_tokens
from app.tools.shaping import Redactor


class Complete:
    def __init__(self, history: SessionHistory, redactor: Redactor) -> None:
        self.history = history
        self.redactor = redactor

    async def run(self, state: TurnState) -> None:
        await state.emitter.settle()
        final, finished = await self._complete(state)
        view = state.view
        for message in [*state.transcript.written, final]:
            view.wrote(message)
        # Kept only now that the end has committed: a turn that failed leaves no view behind.
        self.history.keep(view, finished)

    async def _complete(self, state: TurnState) -> tuple[Message, Finished]:
        turn, view, outcome = state.turn, state.view, state.outcome
        fields = turn_end_fields(
            turn,
            view.snapshot,
            state.user_text,
            state.transcript,
            state.understanding,
            state.run.policy.taint,
            self.redactor,
        )
        stored = state.transcript.count + 1  # the messages this turn stores besides the user's

        def complete(tx: Tx) -> tuple[Message, Finished]:
            final = complete_turn(
                tx,
                turn,
                text=outcome.text,
                token_estimate=estimate_tokens(outcome.text),
                model=outcome.model,
                rounds=outcome.rounds,
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                metadata={"stopped": outcome.stopped, **outcome.metadata},
                snapshot=store_fields(turn.session_id, fields),
                usage=state.used,
            )
            # Only this turn's own messages above the watermark: the next turn need not read
            # them back (anything else added meanwhile, it will).
            added = count_added(
                tx,
                turn.session_id,
                after_turn=view.summarized_turns,
                through_turn=turn.number,
                after_pk=view.watermark,
            )
            return final, Finished(fields, tx.now, added == stored)

        # The turn's end carries what it still deferred (the last model step, tool results).
        return await state.emitter.writes.now(complete)
