"""Complete: the turn's end in one transaction carrying what the turn still deferred, then the
session's view kept for its next turn (only once the end has committed)."""

from __future__ import annotations

from pathlib import Path

from app.conversation.confirmation import Resolution
from app.conversation.turn.act import Act
from app.conversation.turn.complete import Complete
from app.conversation.turn.guard import Guard
from app.conversation.turn.plan import Plan
from app.conversation.turn.understand import Understand
from app.conversation.understanding import Understander
from app.llm.testing import Reply, ToolCall, ToolCalls
from app.nlu.testing import ScriptedParser
from app.storage.usage import UsageStore
from app.tools.shaping import Redactor
from tests.conversation.core import TENANT, open_core, types
from tests.conversation.turn.states import opened, stage, through


async def test_the_end_stores_reply_snapshot_and_usage_and_keeps_the_view(tmp_path: Path) -> None:
    async with open_core(
        tmp_path, ToolCalls(ToolCall("lookup", {"key": "k"}, id="c1")), Reply("k is known.")
    ) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "look k up")
        await through(state, stage(core, Plan), stage(core, Guard), stage(core, Act))
        state.used.tokens = 42
        history = core.pipeline.history

        await stage(core, Complete).run(state)

        turn = await core.turns.get(session_id, state.turn.id)
        assert turn is not None and turn.status == "completed"
        assert await core.reply(turn) == "k is known."
        assert types(await core.log(session_id), turn_id=turn.id)[-2:] == [
            "message.completed",
            "turn.completed",
        ]
        snapshot = await core.snapshots.get(session_id)
        assert snapshot is not None
        assert (snapshot.active_goal, snapshot.state["last_turn"]) == ("look k up", 1)
        assert snapshot.completed_steps == [
            {"turn": 1, "tool": "lookup", "call_id": "c1", "status": "success"}
        ]
        used = await UsageStore(core.db).of_session(TENANT, session_id)
        assert used.tokens == 42
        # Kept with what the turn wrote, and read by the next turn without a rebuild.
        assert len(history) == 1 and history.cached_messages == 4
        rebuilds = history.rebuilds
        await opened(core, session_id, "thanks")
        assert history.rebuilds == rebuilds


async def test_what_the_turn_deferred_rides_in_the_end_transaction(tmp_path: Path) -> None:
    parser = ScriptedParser().on("no", "out_of_scope", 0.9)
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "no")
        await Understand(Understander(parser, 0.5), Redactor()).run(state)
        state.answer = Resolution(reply_kind="declined")
        await through(state, stage(core, Plan), stage(core, Guard), stage(core, Act))
        before = core.db.counts()

        await stage(core, Complete).run(state)

        # One job: the NLU record deferred since Understand, then the turn's end.
        assert (core.db.counts() - before).jobs == 1
        assert types(await core.log(session_id), turn_id=state.turn.id)[-3:] == [
            "intent.classified",
            "message.completed",
            "turn.completed",
        ]
        snapshot = await core.snapshots.get(session_id)
        assert snapshot is not None and snapshot.state["intent"] == "out_of_scope"
