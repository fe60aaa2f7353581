"""Steps as the API sees them: the traces of a session, and resuming a failed turn."""

from __future__ import annotations

from app.errors import Conflict, StepNotFound, StepNotRetryable
from app.principal import Principal
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.storage.steps import RETRYABLE, Step, StepStore
from app.storage.turns import TurnStore
from app.workflow.ports import SessionLookup, TurnControl
from app.workflow.traces import whole


class StepService:
    def __init__(
        self,
        *,
        steps: StepStore,
        turns: TurnStore,
        manager: TurnControl,
        conversation: SessionLookup,
    ) -> None:
        self.steps = steps
        self.turns = turns
        self.manager = manager
        self.conversation = conversation

    async def list_steps(
        self, principal: Principal, session_id: str, turn_id: str | None
    ) -> list[Step]:
        await self.conversation.get_session(principal, session_id)
        found = await self.steps.for_session(principal.tenant_id, session_id, turn_id)
        return [whole(step) for step in found]

    async def retry(self, principal: Principal, session_id: str, step_id: str) -> Turn:
        """Resume the failed turn of `step_id` from that step.

        What the turn recorded before the step (model answers, tool results) is reused, not
        redone; the step itself and what follows run again. Side-effecting calls carry the same
        idempotency keys as before, so a call that did succeed is not repeated.
        """
        session = await self.conversation.get_session(principal, session_id)
        step = await self.steps.get(principal.tenant_id, session_id, step_id)
        if step is None:
            raise StepNotFound("no such step", step_id=step_id)
        if step.status not in RETRYABLE or step.action_type in ("ask_user", "wait_for_event"):
            raise StepNotRetryable(
                f"a {step.action_type} step that is {step.status} cannot be retried",
                step_id=step_id,
                status=step.status,
            )
        turn = await self.turns.get(session_id, step.turn_id)
        if turn is None or turn.status != "failed":
            raise StepNotRetryable(
                "only a step of a failed turn can be retried",
                step_id=step_id,
                turn_status=None if turn is None else turn.status,
            )
        if turn.number != session.turn_count:
            raise StepNotRetryable(
                "a later turn exists; only the session's last turn can be resumed",
                step_id=step_id,
                turn_id=turn.id,
            )
        # A request's write: on the session's lane, under no lease.
        reopened = await self.turns.reopen(SessionWriter(session_id), turn, step_id)
        if reopened is None:
            raise Conflict("the session is busy; retry when its turn has finished")
        self.manager.wake(session_id)
        return reopened
