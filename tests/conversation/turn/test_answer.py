"""AnswerConfirmation: the next message settles a pending "please confirm"."""

from __future__ import annotations

from pathlib import Path

from app.conversation.loop import Resume
from app.conversation.turn.answer import AnswerConfirmation
from app.llm.testing import Reply
from app.storage.confirmations import confirmed_call_id
from tests.conversation.core import Core, open_core
from tests.conversation.turn.states import asked_to_confirm, opened, stage, talk


async def pending(core: Core, session_id: str) -> str:
    """A confirmation asked for in the session's first turn; its id."""
    core.model.enqueue(Reply("Please confirm: refund 5?"))
    await talk(core, session_id, "refund 5")
    first = await core.turns.latest(session_id)
    assert first is not None
    return (await asked_to_confirm(core, session_id, first.id)).id


async def test_yes_runs_exactly_the_call_read_back(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        confirmation_id = await pending(core, session_id)
        state = await opened(core, session_id, "yes")

        await stage(core, AnswerConfirmation).run(state)

        assert state.answer is not None and state.answer.reply_kind is None
        call = state.answer.call
        assert call is not None
        assert (call.id, call.name, call.arguments) == (
            confirmed_call_id(confirmation_id),
            "refund",
            '{"amount": 5}',
        )


async def test_no_is_answered_by_the_runtime(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        await pending(core, session_id)
        state = await opened(core, session_id, "no")

        await stage(core, AnswerConfirmation).run(state)

        assert state.answer is not None
        assert (state.answer.call, state.answer.reply_kind) == (None, "declined")


async def test_anything_else_leaves_nothing_to_answer(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        await pending(core, session_id)
        state = await opened(core, session_id, "what about my other order?")

        await stage(core, AnswerConfirmation).run(state)

        assert state.answer is None
        confirmations = stage(core, AnswerConfirmation).confirmations
        assert await confirmations.pending(session_id) is None  # superseded


async def test_a_resumed_turn_answers_nothing(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        await pending(core, session_id)
        state = await opened(core, session_id, "yes")
        state.resume = Resume(pending_calls=[], rounds_used=0)

        await stage(core, AnswerConfirmation).run(state)

        assert state.answer is None
        assert await stage(core, AnswerConfirmation).confirmations.pending(session_id) is not None
