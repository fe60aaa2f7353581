"""Understand: the NLU reading, recorded with the turn's next write and noted for the model."""

from __future__ import annotations

from pathlib import Path

from app.conversation.loop import Resume
from app.conversation.turn.understand import Understand
from app.conversation.understanding import Understander
from app.nlu.testing import ScriptedParser
from app.tools.shaping import Redactor
from tests.conversation.core import open_core, types
from tests.conversation.turn.states import opened, stored


def understand(parser: ScriptedParser) -> Understand:
    return Understand(Understander(parser, 0.5), Redactor())


async def test_the_reading_rides_with_the_next_write_and_is_noted(tmp_path: Path) -> None:
    parser = ScriptedParser().on(
        "where is order 202405201234", "order_status", 0.9, slots={"order_id": "202405201234"}
    )
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "where is order 202405201234")

        await understand(parser).run(state)

        assert state.understanding is not None and state.understanding.confident
        assert state.understanding.result.intent == "order_status"
        [note] = state.notes
        assert note["role"] == "system"
        assert "intent: order_status (confidence 0.90)" in str(note["content"])
        assert "order_id=202405201234" in str(note["content"])
        # Held, not written: nothing is stored until the turn writes next.
        assert "intent.classified" not in types(await core.log(session_id))
        await stored(state)
        assert types(await core.log(session_id), turn_id=state.turn.id)[-1] == "intent.classified"
        [user] = await core.history(session_id)
        assert (user.metadata or {})["nlu"]["intent"] == "order_status"


async def test_without_nlu_there_is_no_reading_and_no_note(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "hello")

        await Understand(Understander(None, 0.5), Redactor()).run(state)

        assert (state.understanding, state.notes) == (None, [])
        await stored(state)
        assert "intent.classified" not in types(await core.log(session_id))


async def test_a_resumed_turn_is_read_again_but_not_recorded_again(tmp_path: Path) -> None:
    parser = ScriptedParser().on("hello", "greeting", 0.9)
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "hello")
        state.resume = Resume(pending_calls=[], rounds_used=0)

        await understand(parser).run(state)

        assert state.understanding is not None
        await stored(state)
        assert "intent.classified" not in types(await core.log(session_id))
