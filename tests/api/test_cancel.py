"""`POST /v1/sessions/{id}/cancel` over HTTP, on both storage engines: the running turn ends as
`cancelled` (its stream's `turn.failed`, the log, the JSON waiter's 503, its steps closed), the
session carries on, and there is nothing to cancel when no turn runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from app.llm.testing import FakeLLMServer, Gate, Reply
from app.testing import LiveService, SseEvent, post_message_stream, read_events, serve
from tests.api.test_sessions import assert_error
from tests.conftest import new_session


async def events_until(events: AsyncIterator[SseEvent], seen: list[SseEvent], *types: str) -> None:
    async for event in events:
        seen.append(event)
        if event.event in types:
            return
    raise AssertionError(f"the stream ended before {types}: {seen}")


async def test_cancel_ends_the_running_turn_and_the_session_carries_on(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    gate = Gate(after=1)
    fake_llm.enqueue(Reply("first part, then the rest", chunks=2, gate=gate), Reply("Back again."))
    try:
        async with serve(make_settings(delta_flush_ms=0)) as svc:
            session_id = await new_session(svc)
            seen: list[SseEvent] = []
            async with post_message_stream(svc.client, session_id, "hello") as response:
                assert response.status_code == 200
                events = aiter(read_events(response))
                await events_until(events, seen, "message.delta")  # the model is held mid-reply
                cancelled = await svc.client.post(f"/v1/sessions/{session_id}/cancel")
                assert cancelled.status_code == 200, cancelled.text
                turn_id = seen[0].data["turn_id"]
                assert cancelled.json() == {
                    "turn_id": turn_id,
                    "session_id": session_id,
                    "status": "failed",
                    "code": "cancelled",
                }
                await events_until(events, seen, "turn.failed", "turn.completed")
            assert seen[-1].event == "turn.failed"
            assert seen[-1].data["code"] == "cancelled" and seen[-1].data["turn_id"] == turn_id

            # The log says the same to a client that reads it afterwards.
            logged = await replay(svc, session_id)
            assert [e.data["code"] for e in logged if e.event == "turn.failed"] == ["cancelled"]
            steps = (await svc.client.get(f"/v1/sessions/{session_id}/steps")).json()["items"]
            assert steps and all(s["status"] not in ("running", "queued") for s in steps), steps

            again = await svc.client.post(
                f"/v1/sessions/{session_id}/messages", json={"content": "still there?"}
            )
            assert again.status_code == 200, again.text
            assert again.json()["message"]["content"] == "Back again."
    finally:
        gate.open()


async def test_a_json_waiter_gets_the_cancelled_turn_as_503(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    gate = Gate(after=1)
    fake_llm.enqueue(Reply("one two", chunks=2, gate=gate))
    try:
        async with serve(make_settings(delta_flush_ms=0)) as svc:
            session_id = await new_session(svc)
            async with svc.client.stream("GET", f"/v1/sessions/{session_id}/events") as following:
                waiter = asyncio.create_task(
                    svc.client.post(
                        f"/v1/sessions/{session_id}/messages", json={"content": "hello"}
                    )
                )
                await events_until(aiter(read_events(following)), [], "message.delta")
                cancelled = await svc.client.post(f"/v1/sessions/{session_id}/cancel")
                assert cancelled.status_code == 200, cancelled.text
            answered = await waiter
            assert_error(answered, 503, "cancelled")
            assert answered.json()["error"]["details"]["turn_id"] == cancelled.json()["turn_id"]
    finally:
        gate.open()


async def test_nothing_to_cancel_is_409_and_an_unknown_session_404(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    session_id = await new_session(service)
    assert_error(
        await service.client.post(f"/v1/sessions/{session_id}/cancel"), 409, "no_running_turn"
    )
    fake_llm.enqueue(Reply("done"))
    done = await service.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "hi"})
    assert done.status_code == 200
    assert_error(
        await service.client.post(f"/v1/sessions/{session_id}/cancel"), 409, "no_running_turn"
    )
    assert_error(
        await service.client.post("/v1/sessions/ses_000000000000000000000000/cancel"),
        404,
        "session_not_found",
    )


async def replay(svc: LiveService, session_id: str) -> list[SseEvent]:
    """Every stored event of the session, read back over SSE (`?after=0`) to the last one."""
    last = (await svc.client.get(f"/v1/sessions/{session_id}")).json()["last_event_seq"]
    events: list[SseEvent] = []
    async with svc.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", params={"after": 0}
    ) as response:
        async for event in read_events(response):
            events.append(event)
            if event.id == str(last):
                break
    return events
