"""ConversationService in-process: posting a message runs its turn; following a turn yields its
own events from acceptance to its end; a failed turn surfaces its code; deleting a session ends
its turn and its streams. The scripted model and a real SQLite file, no HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.errors import SessionNotFound, TurnFailed
from app.llm.testing import Fail, Hang, Reply, ToolCall, ToolCalls
from app.principal import LOCAL, Principal
from tests.conversation.core import eventually, open_core, types


async def test_a_posted_message_runs_and_its_reply_is_returned(tmp_path: Path) -> None:
    async with open_core(tmp_path, Reply("Hello there.")) as core:
        session_id = await core.new_session()

        accepted = await core.service.post_message(LOCAL, session_id, "hi", "m-1")
        async with asyncio.timeout(5):
            turn, message = await core.service.wait_for_turn(accepted.turn)

        assert (turn.status, message.role, message.content) == (
            "completed",
            "assistant",
            "Hello there.",
        )
        messages, cursor = await core.service.list_messages(
            LOCAL, session_id, cursor=None, limit=10
        )
        assert ([m.content for m in messages], cursor) == (["hi", "Hello there."], None)
        again = await core.service.post_message(LOCAL, session_id, "hi", "m-1")
        assert (again.created, again.turn.id) == (False, turn.id)


async def test_a_foreign_or_missing_session_is_not_found(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        stranger = Principal(tenant_id="other", role="admin", subject="k")
        with pytest.raises(SessionNotFound):
            await core.service.post_message(stranger, session_id, "hi", None)
        with pytest.raises(SessionNotFound):
            await core.service.get_session(LOCAL, "ses_missing")


async def test_following_a_turn_yields_its_own_events_once_from_acceptance(
    tmp_path: Path,
) -> None:
    async with open_core(
        tmp_path,
        Reply("first", chunks=1),
        ToolCalls(ToolCall("lookup", {"key": "x"}, id="c1")),
        Reply("second", chunks=1),
    ) as core:
        session_id = await core.new_session()
        first = await core.service.post_message(LOCAL, session_id, "one", None)
        await core.finished(first.turn)
        second = await core.service.post_message(LOCAL, session_id, "two", None)

        seen = []
        async with asyncio.timeout(5):
            async for event in core.service.follow_turn(second.turn):
                if event is not None:
                    seen.append(event)

        assert types(seen) == [
            "turn.started",
            "tool.started",
            "tool.completed",
            "message.delta",
            "message.completed",
            "turn.completed",
        ]
        assert {e.turn_id for e in seen} == {second.turn.id}
        assert [e.seq for e in seen] == sorted({e.seq for e in seen})
        # Replaying the finished turn: what its end left (each step's last state, the tool's
        # completion, the reply), once each, a subset of what went out live ...
        logged = [e for e in [e async for e in core.service.follow_turn(second.turn, after=0)] if e]
        assert types(logged) == [
            "turn.started",
            "tool.completed",
            "message.completed",
            "turn.completed",
        ]
        assert all(e in seen for e in logged) and len(logged) < len(seen)
        # ... and after one of its events, only the rest of it.
        after = next(e for e in seen if e.type == "tool.completed").seq
        replayed = [e async for e in core.service.follow_turn(second.turn, after=after)]
        assert [e for e in replayed if e is not None] == [e for e in logged if e.seq > after]


async def test_waiting_for_a_failed_turn_raises_its_code(tmp_path: Path) -> None:
    async with open_core(tmp_path, Fail(503, "down")) as core:
        session_id = await core.new_session()
        accepted = await core.service.post_message(LOCAL, session_id, "hi", None)

        with pytest.raises(TurnFailed) as raised:
            async with asyncio.timeout(5):
                await core.service.wait_for_turn(accepted.turn)

        assert raised.value.code == "llm_unavailable"


async def test_deleting_a_session_ends_its_running_turn_and_its_streams(tmp_path: Path) -> None:
    async with open_core(tmp_path, Hang()) as core:
        session_id = await core.new_session()
        accepted = await core.service.post_message(LOCAL, session_id, "hi", None)
        follower = await core.service.follow_session(LOCAL, session_id, after=0)
        seen: list[str] = []

        async def follow() -> None:
            async for event in follower:
                if event is not None:
                    seen.append(event.type)

        following = asyncio.ensure_future(follow())
        await eventually(lambda: "turn.started" in seen and len(core.model.requests) == 1)

        await core.service.delete_session(LOCAL, session_id)

        async with asyncio.timeout(5):
            await following  # the stream ended
        await follower.aclose()
        assert core.manager.active_sessions() == 0
        failed = [e for e in core.published if e.type == "turn.failed"]
        assert [(e.turn_id, e.data["code"]) for e in failed] == [
            (accepted.turn.id, "session_deleted")
        ]
        with pytest.raises(SessionNotFound):
            await core.service.get_session(LOCAL, session_id)
