"""Act: the agent loop with the scripted model, or the runtime's own reply to a "no"."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.conversation import confirmation
from app.conversation.confirmation import Resolution
from app.conversation.turn.act import Act
from app.conversation.turn.guard import Guard
from app.conversation.turn.plan import Plan
from app.llm.testing import Reply, ToolCall, ToolCalls
from tests.conversation.core import RAN, open_core
from tests.conversation.turn.states import opened, stage, stored, through


async def test_the_loop_answers_with_the_planned_context_and_tools(tmp_path: Path) -> None:
    async with open_core(
        tmp_path, ToolCalls(ToolCall("lookup", {"key": "k"}, id="c1")), Reply("k is known.")
    ) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "look k up")
        await through(state, stage(core, Plan), stage(core, Guard))

        await stage(core, Act).run(state)

        assert (state.outcome.text, state.outcome.stopped, state.outcome.rounds) == (
            "k is known.",
            "final",
            1,
        )
        first, _ = core.model.requests
        assert first.messages == state.messages[: len(first.messages)]
        assert RAN == [("lookup", {"key": "k"})]
        assert [c.name for c, _ in state.transcript.results] == ["lookup"]
        await stored(state)


@pytest.mark.parametrize(
    ("text", "kind", "language"),
    [("no", "declined", "en"), ("不", "declined", "zh"), ("yes", "expired", "en")],
)
async def test_a_declined_or_expired_confirmation_needs_no_model(
    tmp_path: Path, text: str, kind: str, language: str
) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, text)
        state.answer = Resolution(reply_kind=kind)  # type: ignore[arg-type]
        await through(state, stage(core, Plan), stage(core, Guard))

        await stage(core, Act).run(state)

        assert state.outcome.text == confirmation.REPLIES[kind][language]
        assert state.outcome.stopped == "confirmation_declined"
        assert core.model.requests == []
        state.emitter.writes.flush()
