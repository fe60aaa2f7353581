"""What an interruption closes: a turn that stops before it finishes, and how it resumes.

A turn is interrupted when the process running it died (another process takes the session
over: `app.conversation.claims`), when its database did not come back within the turn's time,
or when the service shuts down under it. It ends `interrupted`, resumable, in one transaction
with what it leaves open:

- its open steps fail (the first is the step to resume it from; a turn stopped between steps
  has its next model call marked failed instead: `steps.fail_for_resume`), so that
  `POST .../steps/{id}/retry`, or a replay of its message (`reopen`), resumes it;
- its pending approvals expire: nobody waits for their decision any more;
- then `turn.failed` announces it.

A turn whose database went away and came back in time closes the same things and runs again
in place from its failed step (`resume_after_outage`).
"""

from __future__ import annotations

from typing import Any

from app.storage import approvals, steps, turns
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.storage.steps import TurnRef
from app.storage.turns import TurnStore
from app.storage.tx import Tx
from app.storage.usage import Usage

INTERRUPTED = "the process running this turn stopped before it finished"
OUTAGE = "the database could not be reached while this turn ran"
UNREACHABLE = "the database could not be reached in time; resume the turn with its failed step"
SHUT_DOWN = "the service shut down before this turn finished"


def _outage() -> dict[str, Any]:
    """The error of the steps a database outage stopped."""
    return {"code": "database_unavailable", "message": OUTAGE}


def _close(tx: Tx, turn: Turn, why: str, step_error: dict[str, Any]) -> str:
    """Close what the stopped turn left open (module docstring); the step to resume from."""
    ref = TurnRef(turn.tenant_id, turn.session_id, turn.id)
    step_id = steps.fail_for_resume(tx, ref, turn.number, step_error)
    approvals.expire_pending_of_turn(tx, turn.id, why)
    return step_id


def interrupt(tx: Tx, turn: Turn, why: str, step_error: dict[str, Any]) -> bool:
    """End a running turn `interrupted`, resumable; False when it was not running."""
    if not turns.mark_interrupted(tx, turn, why):
        return False
    _close(tx, turn, why, step_error)
    turns.announce_failed(tx, turn, "interrupted", why)
    return True


def interrupt_running(tx: Tx, session_id: str, why: str = INTERRUPTED) -> list[str]:
    """The session's turns left running by a process that is gone end `interrupted`; their
    ids. Queued turns stay queued."""
    stopped = turns.running(tx, session_id)
    for turn in stopped:
        interrupt(tx, turn, why, {"code": "interrupted", "message": why})
    return [turn.id for turn in stopped]


def resume_after_outage(tx: Tx, turn: Turn) -> Turn | None:
    """The turn's database came back: the turn as the database has it, ready to run again from
    what it stored (what it left open closed, `resume_from_step` set, `turn.started`
    announcing the resumption); or, when its end is stored already (the commit whose
    acknowledgement was lost) or someone else ended it, the turn as it ended. None when it is
    gone (its session was deleted)."""
    current = turns.find(tx, turn.id)
    if current is None or current.status != "running":
        return current
    step_id = _close(tx, turn, OUTAGE, _outage())
    return turns.restart(tx, turn, step_id)


def reopen(tx: Tx, turn: Turn) -> Turn | None:
    """A replay of an interrupted turn's message (its `client_message_id`): queue the turn
    again from its first failed step, as `POST .../steps/{id}/retry` would, when it is still
    its session's last turn and nothing else runs there. The turn as it is then (queued again,
    already resumed by someone else, or still failed: not resumable); None when it is gone."""
    current = turns.find(tx, turn.id)
    if current is None or current.status != "failed" or current.error_code != "interrupted":
        return current
    last = turns.is_last(tx, current)
    step_id = steps.first_retryable(tx, turn.id)
    if not last or step_id is None:
        return current
    return turns.reopen(tx, current, step_id) or current


class Interruptions:
    """A worker's turns ending `interrupted`, or resuming after an outage: each one
    transaction of `turns`' database, written with the worker's `SessionWriter` (its session's
    lane, its lease)."""

    def __init__(self, turns: TurnStore) -> None:
        self.turns = turns

    async def unreachable(
        self, writer: SessionWriter, turn: Turn, usage: Usage | None = None
    ) -> None:
        """Its database did not come back within the turn's time. What its model calls used
        still counts."""
        await self.turns.transact(writer, lambda tx: _end(tx, turn, UNREACHABLE, _outage(), usage))

    async def shut_down(
        self, writer: SessionWriter, turn: Turn, usage: Usage | None = None
    ) -> None:
        """The service shuts down under it. What its model calls used still counts."""
        error = {"code": "interrupted", "message": SHUT_DOWN}
        await self.turns.transact(writer, lambda tx: _end(tx, turn, SHUT_DOWN, error, usage))

    async def resume_after_outage(self, writer: SessionWriter, turn: Turn) -> Turn | None:
        """See `resume_after_outage`."""
        return await self.turns.transact(writer, lambda tx: resume_after_outage(tx, turn))


def _end(tx: Tx, turn: Turn, why: str, step_error: dict[str, Any], usage: Usage | None) -> None:
    if interrupt(tx, turn, why, step_error):
        turns.charge_ended(tx, turn, usage)
