"""A turn's state on the in-process core (tests/conversation/core.py), for the stages' tests:
a real SQLite file under the stages, the scripted model behind the loop."""

from __future__ import annotations

from typing import TypeVar

from app.conversation.emitter import TurnEmitter
from app.conversation.turn.answer import AnswerConfirmation
from app.conversation.turn.pipeline import Stage
from app.conversation.turn.state import TurnState
from app.storage.confirmations import Confirmation
from app.storage.session_writer import SessionWriter
from app.storage.usage import Usage
from tests.conversation.core import TENANT, Core

S = TypeVar("S")


async def talk(core: Core, session_id: str, *texts: str) -> None:
    """Each of `texts` run as a whole turn through the core's pipeline."""
    for text in texts:
        await core.accept(session_id, text)
        claimed = await core.turns.claim_next(SessionWriter(session_id), session_id)
        assert claimed is not None
        await core.pipeline.run(
            SessionWriter(claimed.turn.session_id), claimed.turn, claimed.user_id
        )


async def opened(core: Core, session_id: str, text: str) -> TurnState:
    """`text` accepted as the session's next turn, claimed, and opened as the pipeline does."""
    await core.accept(session_id, text)
    claimed = await core.turns.claim_next(SessionWriter(session_id), session_id)
    assert claimed is not None
    return await reopened(core, claimed.turn.session_id, claimed.turn.id, claimed.user_id)


async def reopened(core: Core, session_id: str, turn_id: str, user_id: str = "u1") -> TurnState:
    """The claimed (or resumed) turn `turn_id` opened as the pipeline does."""
    turn = await core.turns.get(session_id, turn_id)
    assert turn is not None
    pipeline = core.pipeline
    view = await pipeline.history.open(turn)
    emitter = TurnEmitter(core.turns, SessionWriter(turn.session_id), turn, flush_s=1000)
    return await pipeline.opening.open(turn, user_id, view, emitter, Usage())


async def through(state: TurnState, *stages: Stage) -> TurnState:
    """The state after `stages` ran on it, in order."""
    for stage in stages:
        await stage.run(state)
    return state


async def stored(state: TurnState) -> None:
    """What the turn deferred, stored now (as its next write would)."""
    await state.emitter.settle()
    await state.emitter.writes.now(lambda tx: None)


def stage(core: Core, kind: type[S]) -> S:
    """The core's own stage of this kind (built by app/conversation/assembly.py)."""
    [found] = [s for s in core.pipeline.stages if isinstance(s, kind)]
    return found


async def asked_to_confirm(core: Core, session_id: str, turn_id: str) -> Confirmation:
    """A pending "please confirm: refund 5", as turn `turn_id` would have asked."""
    return await stage(core, AnswerConfirmation).confirmations.create(
        SessionWriter(session_id),
        tenant_id=TENANT,
        session_id=session_id,
        turn_id=turn_id,
        call_id="c1",
        tool="refund",
        arguments={"amount": 5},
        readback={"amount": "5"},
        timeout_s=300.0,
    )
