"""Idle sessions are archived by the sweeper and resume on the next message."""

from __future__ import annotations

import asyncio
from typing import Any

from app.llm.testing import FakeLLMServer, Reply
from app.testing import read_events, serve
from tests.conftest import new_session


async def test_idle_session_is_archived_and_resumes(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    settings = make_settings(session_idle_minutes=0.005, session_sweep_interval_s=0.05)
    fake_llm.enqueue(Reply("first answer"), Reply("second answer"))
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "remember X"})
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            session = (await svc.client.get(f"/v1/sessions/{session_id}")).json()
            if session["status"] == "archived":
                break
            assert asyncio.get_running_loop().time() < deadline, "never archived"
            await asyncio.sleep(0.05)
        assert session["archived_at"] is not None
        listed = await svc.client.get("/v1/sessions", params={"status": "archived"})
        assert [s["id"] for s in listed.json()["items"]] == [session_id]

        response = await svc.client.post(
            f"/v1/sessions/{session_id}/messages", json={"content": "what did I say?"}
        )
        assert response.json()["message"]["content"] == "second answer"
        session = (await svc.client.get(f"/v1/sessions/{session_id}")).json()
        assert session["status"] == "active" and session["archived_at"] is None
        # The resumed turn saw the conversation from before the archive.
        contents = [m.get("content") for m in fake_llm.requests[-1].messages]
        assert "remember X" in contents and "first answer" in contents
        async with svc.client.stream(
            "GET", f"/v1/sessions/{session_id}/events", params={"after": 0}
        ) as stream:
            all_types: list[str] = []
            async for event in read_events(stream):
                all_types.append(event.event)
                if all_types.count("turn.completed") == 2:
                    break
        assert all_types.index("session.archived") < all_types.index("session.resumed")


async def test_sessions_with_a_running_turn_are_not_archived(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    settings = make_settings(session_idle_minutes=0.001, session_sweep_interval_s=0.02)
    fake_llm.enqueue(Reply("slow", delay=0.4))
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        response = await svc.client.post(
            f"/v1/sessions/{session_id}/messages", json={"content": "take your time"}
        )
        assert response.status_code == 200
        events = svc.runtime.conversation.events
        seen = [e.type for e in await events.after(session_id, 0)]
        # It may be archived after the turn, never between turn.started and turn.completed.
        started, completed = seen.index("turn.started"), seen.index("turn.completed")
        assert "session.archived" not in seen[started:completed]
