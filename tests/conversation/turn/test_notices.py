"""After the end: an `ask_user` step for a reply that asks, the handoff desk told what a
confident reading of the customer's words asked for."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.conversation.loop import TurnOutcome
from app.conversation.turn.notices import AskUser, HandoffNotice, asks_the_user
from app.conversation.understanding import Understanding
from app.nlu.testing import ScriptedParser
from tests.conversation.core import TENANT, open_core
from tests.conversation.doubles import EndedTurns
from tests.conversation.turn.states import opened


@pytest.mark.parametrize(
    ("text", "asks"),
    [("Which order?", True), ("哪个订单？ ", True), ("Done.", False), ("Why? I see.", False)],
)
def test_a_reply_asks_when_it_ends_in_a_question(text: str, asks: bool) -> None:
    assert asks_the_user(text) is asks


async def test_a_question_opens_an_ask_user_step_with_its_deadline(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "refund please")
        state.outcome = TurnOutcome(text="x" * 600 + " Which order?", stopped="final")
        started = time.time()

        await AskUser(core.steps, timeout_s=300.0, max_depth=50).run(state)

        [step] = await core.steps.for_session(TENANT, session_id, state.turn.id)
        assert (step.action_type, step.status) == ("ask_user", "running")
        assert step.input_context == {"question": state.outcome.text[:500]}
        assert step.deadline_at is not None
        assert started + 300 <= step.deadline_at <= time.time() + 300
        state.emitter.writes.flush()


async def test_a_plain_answer_waits_for_nothing(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "hello")
        state.outcome = TurnOutcome(text="Hello.", stopped="final")

        await AskUser(core.steps, timeout_s=300.0, max_depth=50).run(state)

        assert await core.steps.for_session(TENANT, session_id, state.turn.id) == []
        state.emitter.writes.flush()


@pytest.mark.parametrize(("confident", "told"), [(True, True), (False, False)])
async def test_the_desk_hears_only_a_confident_reading(
    tmp_path: Path, confident: bool, told: bool
) -> None:
    desk = EndedTurns()
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "我要找人工")
        parsed = ScriptedParser().on("我要找人工", "human_handoff").parse("我要找人工")
        state.understanding = Understanding(parsed, confident)

        await HandoffNotice(desk).run(state)

        assert desk.told == ([(state.turn.id, "human_handoff", "zh")] if told else [])
        state.emitter.writes.flush()


async def test_without_a_reading_the_desk_hears_nothing(tmp_path: Path) -> None:
    desk = EndedTurns()
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "hello")

        await HandoffNotice(desk).run(state)

        assert desk.told == []
        state.emitter.writes.flush()
