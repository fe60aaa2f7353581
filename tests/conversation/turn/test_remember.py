"""Remember: what memory is told after the reply; a failing memory never fails the turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.conversation.turn.act import Act
from app.conversation.turn.guard import Guard
from app.conversation.turn.plan import Plan
from app.conversation.turn.remember import Remember
from app.conversation.turn.state import TurnState
from app.llm.testing import Reply, ToolCall, ToolCalls
from app.memory.extract import ToolEvidence
from app.memory.port import AfterTurn
from app.memory.records import Scope
from app.memory.testing import NullMemory
from tests.conversation.core import TENANT, Core, open_core
from tests.conversation.doubles import RecordingMemory
from tests.conversation.turn.states import opened, stage, stored, talk, through


async def acted(core: Core, session_id: str, text: str) -> TurnState:
    state = await opened(core, session_id, text)
    return await through(state, stage(core, Plan), stage(core, Guard), stage(core, Act))


async def test_memory_hears_the_words_the_reply_and_the_tools(tmp_path: Path) -> None:
    memory = RecordingMemory()
    async with open_core(
        tmp_path,
        Reply("Hi."),
        ToolCalls(ToolCall("save_note", {"text": "SF Express"}, id="c1")),
        Reply("Noted: SF Express."),
    ) as core:
        session_id = await core.new_session()
        await talk(core, session_id, "hello")
        state = await acted(core, session_id, "remember I like SF Express")

        await Remember(memory).run(state)

        [(call, told)] = memory.calls
        assert call == "after_turn"
        assert told == {
            "scope": Scope(TENANT, "u1"),
            "writer": state.writer,  # the turn's: its session, its lane, its lease
            "user_text": "remember I like SF Express",
            "final_text": "Noted: SF Express.",
            "tool_results": [
                ToolEvidence("save_note", True, {"saved": "SF Express"}, {"text": "SF Express"})
            ],
            "previous_assistant": "Hi.",
            "proposals": (),
        }
        await stored(state)


class Broken(NullMemory):
    async def after_turn(self, *args: Any, **kwargs: Any) -> AfterTurn:
        raise RuntimeError("memory store unavailable")


async def test_a_failing_memory_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_core(tmp_path, Reply("Hi.")) as core:
        session_id = await core.new_session()
        state = await acted(core, session_id, "hello")

        await Remember(Broken()).run(state)

        assert "memory extraction failed" in caplog.text
        await stored(state)
