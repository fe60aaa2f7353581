"""Guard: what the agent loop enforces this turn (app/tools/policy): the tools offered, the
calls the customer confirmed, the taint of untrusted content, and the budget's meter."""

from __future__ import annotations

from app.conversation.budgets import TurnBudgets
from app.conversation.loop import TurnRun
from app.conversation.turn.state import TurnState
from app.storage.confirmations import ConfirmationStore
from app.tools.context import TurnScope
from app.tools.policy import Taint, TurnPolicy


class Guard:
    def __init__(self, confirmations: ConfirmationStore, budgets: TurnBudgets) -> None:
        self.confirmations = confirmations
        self.budgets = budgets

    async def run(self, state: TurnState) -> None:
        turn, answer, snapshot = state.turn, state.answer, state.snapshot
        confirmed = [answer.call] if answer is not None and answer.call is not None else []
        policy = TurnPolicy(
            offered=frozenset(t.name for t in state.tools),
            confirmed=frozenset(c.id for c in confirmed) | await self._confirmed_before(state),
            taint=Taint(
                state.untrusted, lasting=snapshot.state.get("untrusted", []) if snapshot else []
            ),
        )
        state.run = TurnRun(
            messages=state.messages,
            tools=state.tools,
            scope=TurnScope(
                tenant_id=turn.tenant_id,
                user_id=state.user_id,
                session_id=turn.session_id,
                turn_id=turn.id,
                trace_id=turn.id,
                writer=state.writer,
            ),
            reports=state.reports,
            transcript=state.transcript,
            user_text=state.user_text,
            resume=state.resume,
            policy=policy,
            confirmed_calls=confirmed,
            meter=await self.budgets.meter(turn.tenant_id, turn.session_id, state.used),
        )

    async def _confirmed_before(self, state: TurnState) -> frozenset[str]:
        """A retried turn keeps the confirmations its customer already gave."""
        if state.resume is None:
            return frozenset()
        return await self.confirmations.confirmed_calls(state.turn.id)
