"""TurnOpening: the state a turn starts from, read from the session's view."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import UpstreamLLMError
from app.llm.testing import Fail, Reply, ToolCall, ToolCalls
from app.storage.session_writer import SessionWriter
from app.workflow.recorder import StepRecorder
from tests.conversation.core import TENANT, open_core
from tests.conversation.turn.states import opened, reopened, talk


async def test_a_new_turn_starts_from_its_words_and_the_session_so_far(tmp_path: Path) -> None:
    async with open_core(tmp_path, Reply("Hello there.")) as core:
        session_id = await core.new_session()
        await talk(core, session_id, "first")

        state = await opened(core, session_id, "second")

        assert (state.user_text, state.user_id, state.resume) == ("second", "u1", None)
        assert state.previous_reply == "Hello there."
        assert [t.number for t in state.context_turns] == [1, 2]
        assert state.context_turns[-1].messages == [{"role": "user", "content": "second"}]
        assert isinstance(state.reports, StepRecorder)
        assert state.snapshot is not None and state.snapshot.active_goal == "first"
        # Nothing is set before the stages that set it.
        assert (state.understanding, state.answer, state.notes, state.tools) == (None, None, [], [])
        with pytest.raises(RuntimeError, match="before its Guard stage"):
            state.run  # noqa: B018
        with pytest.raises(RuntimeError, match="before its Act stage"):
            state.outcome  # noqa: B018
        state.emitter.writes.flush()


async def test_a_resumed_turn_starts_from_its_recorded_rounds(tmp_path: Path) -> None:
    async with open_core(
        tmp_path, ToolCalls(ToolCall("save_note", {"text": "once"}, id="c1")), Fail(503)
    ) as core:
        session_id = await core.new_session()
        with pytest.raises(UpstreamLLMError):
            await talk(core, session_id, "note this")
        turn = await core.turns.latest(session_id)
        assert turn is not None
        await core.turns.fail(SessionWriter(turn.session_id), turn, "llm_unavailable", "down")
        steps = await core.steps.for_session(TENANT, session_id, turn.id)
        [failed] = [s for s in steps if s.status == "failed"]
        assert await core.turns.reopen(SessionWriter(turn.session_id), turn, failed.id) is not None
        again = await core.turns.claim_next(SessionWriter(session_id), session_id)
        assert again is not None

        state = await reopened(core, session_id, again.turn.id)

        assert state.resume is not None
        assert (state.resume.rounds_used, state.resume.pending_calls) == (1, [])
        assert [m["role"] for m in state.context_turns[-1].messages] == [
            "user",
            "assistant",
            "tool",
        ]
        state.emitter.writes.flush()
