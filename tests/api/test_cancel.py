"""`POST /v1/sessions/{id}/cancel` over HTTP, on both storage engines: the running turn ends as
`cancelled` (its stream's `turn.failed`, the log, the JSON waiter's 503, its steps closed), the
session carries on, and there is nothing to cancel when no turn runs. Also across two services
on one database, with and without Redis: a cancel sent to B ends the turn running on A, and B
answers 504 `cancel_timeout` when A does not end it in time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from unittest.mock import ANY

import httpx
import pytest

from app.llm.testing import FakeLLMServer, Gate, Reply
from app.testing import LiveService, SseEvent, post_message_stream, read_events, serve
from tests.api.test_sessions import assert_error
from tests.conftest import new_session
from tests.redis_util import REDIS_URL, redis_prefix  # noqa: F401 (a fixture)


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
                turn_id = seen[0].data["turn_id"]
                assert_cancelled(cancelled, session_id, turn_id)
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


def assert_cancelled(response: httpx.Response, session_id: str, turn_id: str) -> None:
    """The cancel's answer: 200 with the turn as it ended, by this cancel."""
    assert response.status_code == 200, response.text
    assert response.json() == {
        "turn_id": turn_id,
        "session_id": session_id,
        "status": "failed",
        "code": "cancelled",
    }


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


# -- a cancel that lands on another process than the one running the turn ---------------------


@pytest.fixture(params=["redis", "no-redis"])
def shared(request: pytest.FixtureRequest) -> dict[str, Any]:
    """What two processes share besides the database: Redis (the owner is told at once: its
    own sweep, every 30 s, would come too late), or nothing (the owner finds the request within
    a lease sweep, 1 s)."""
    if request.param == "no-redis":
        return {}
    return {
        "redis_url": REDIS_URL,
        "redis_prefix": request.getfixturevalue("redis_prefix"),
        "session_lease_sweep_s": 30,
    }


async def test_a_cancel_sent_to_b_ends_the_turn_running_on_a(
    make_settings: Any, fake_llm: FakeLLMServer, shared: dict[str, Any]
) -> None:
    gate = Gate(after=1)
    fake_llm.enqueue(Reply("first part, then the rest", chunks=2, gate=gate), Reply("Next one."))
    settings = make_settings(delta_flush_ms=0, busy_policy="enqueue", **shared)
    try:
        async with serve(settings) as a, serve(settings) as b:
            session_id = await new_session(a)
            seen: list[SseEvent] = []
            async with post_message_stream(a.client, session_id, "hello") as response:
                assert response.status_code == 200
                events = aiter(read_events(response))
                await events_until(events, seen, "message.delta")  # held mid-reply, on A
                turn_id = seen[0].data["turn_id"]
                assert a.runtime.manager.running_turns() == [turn_id]
                queued = asyncio.create_task(
                    a.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "next"})
                )
                await until_queued(b, session_id, 2)

                cancelled = await b.client.post(f"/v1/sessions/{session_id}/cancel")
                assert_cancelled(cancelled, session_id, turn_id)
                await events_until(events, seen, "turn.failed", "turn.completed")
            assert seen[-1].event == "turn.failed"
            assert seen[-1].data == {"turn_id": turn_id, "code": "cancelled", "message": ANY}

            # The queued turn of the session carries on, on A, as after a local cancel.
            after = await queued
            assert after.status_code == 200, after.text
            assert after.json()["message"]["content"] == "Next one."
            steps = (await b.client.get(f"/v1/sessions/{session_id}/steps")).json()["items"]
            assert steps and all(s["status"] not in ("running", "queued") for s in steps), steps
            # Ended: nothing left to cancel, from either process.
            for svc in (a, b):
                assert_error(
                    await svc.client.post(f"/v1/sessions/{session_id}/cancel"),
                    409,
                    "no_running_turn",
                )
    finally:
        gate.open()


async def test_an_owner_that_does_not_end_the_turn_in_time_answers_504_and_the_request_stays(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    gate = Gate(after=1)
    fake_llm.enqueue(Reply("one two", chunks=2, gate=gate))
    # No Redis, and A looks for requests only every 30 s: B's wait (0.5 s) runs out first.
    slow = make_settings(delta_flush_ms=0, session_lease_sweep_s=30)
    try:
        async with serve(slow) as a, serve(make_settings(cancel_wait_s=0.5)) as b:
            session_id = await new_session(a)
            seen: list[SseEvent] = []
            async with post_message_stream(a.client, session_id, "hello") as response:
                events = aiter(read_events(response))
                await events_until(events, seen, "message.delta")
                turn_id = seen[0].data["turn_id"]

                timed_out = await b.client.post(f"/v1/sessions/{session_id}/cancel")
                assert_error(timed_out, 504, "cancel_timeout")
                details = timed_out.json()["error"]["details"]
                assert details == {"session_id": session_id, "turn_id": turn_id, "waited_s": 0.5}
                assert a.runtime.manager.running_turns() == [turn_id]  # still running

                # The request stays on the turn: A ends it when it looks.
                remote = a.runtime.conversation.remote
                assert remote is not None
                assert await remote.check() == [turn_id]
                await events_until(events, seen, "turn.failed", "turn.completed")
            assert (seen[-1].event, seen[-1].data["code"]) == ("turn.failed", "cancelled")
    finally:
        gate.open()


async def until_queued(svc: LiveService, session_id: str, n: int) -> None:
    """Until `n` customer messages of the session are stored (each turn stores its own)."""
    async with asyncio.timeout(10):
        while True:
            page = await svc.client.get(f"/v1/sessions/{session_id}/messages")
            if sum(m["role"] == "user" for m in page.json()["items"]) >= n:
                return
            await asyncio.sleep(0.02)
