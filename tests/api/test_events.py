"""The session event stream: replay after Last-Event-ID / ?after exactly once, then live events,
keep-alives, and what a browser EventSource needs."""

from __future__ import annotations

import asyncio
from typing import Any

from app.llm.testing import FakeLLMServer, Reply
from app.testing import LiveService, SseEvent, read_events, serve, stream_turn
from tests.api.test_sessions import assert_error
from tests.conftest import new_session, replay_of

WORDS = "one two three four five six seven eight nine ten eleven twelve"


async def test_resume_during_a_running_turn_gets_every_event_once(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply(WORDS, chunk_delay=0.05))
    session_id = await new_session(service)
    seen: list[SseEvent] = []
    async with service.client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": "count to twelve"},
        headers={"Accept": "text/event-stream"},
    ) as response:
        async for event in read_events(response):
            seen.append(event)
            if sum(e.event == "message.delta" for e in seen) == 3:
                break  # the browser tab drops mid-turn
    last_id = seen[-1].id
    assert last_id is not None
    resumed: list[SseEvent] = []
    async with service.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", headers={"Last-Event-ID": last_id}
    ) as response:
        assert response.status_code == 200
        async for event in read_events(response, until="turn.completed"):
            resumed.append(event)
    ids = [int(e.id) for e in seen + resumed if e.id]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "a gap or a duplicate"
    text = "".join(e.data["text"] for e in seen + resumed if e.event == "message.delta")
    assert text == WORDS
    assert resumed[0].id == str(int(last_id) + 1)


async def test_after_query_replays_the_whole_history(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("hello there"))
    session_id = await new_session(service)
    await service.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "hi"})
    async with service.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", params={"after": 0}
    ) as response:
        events = [e async for e in read_events(response, until="turn.completed")]
    assert events[0].event == "session.created" and events[0].id == "1"
    assert [e.event for e in events][-2:] == ["message.completed", "turn.completed"]
    async with service.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", params={"after": 2}
    ) as response:
        later = [e async for e in read_events(response, until="turn.completed")]
    assert later[0].id == "3" and [e.id for e in later] == [e.id for e in events[2:]]


async def test_follows_turns_that_start_after_connecting(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("later reply"))
    session_id = await new_session(service)
    async with service.client.stream("GET", f"/v1/sessions/{session_id}/events") as response:
        assert response.status_code == 200  # headers are sent once the start point is fixed
        poster = asyncio.create_task(
            service.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "hi"})
        )
        events = [e async for e in read_events(response, until="turn.completed")]
        await poster
    # Without Last-Event-ID or ?after the stream starts now: no replay of older events.
    assert events[0].event == "turn.started"
    assert events[-1].event == "turn.completed"


async def test_keepalive_comments_and_browser_headers(make_settings: Any) -> None:
    async with serve(make_settings(sse_keepalive_s=0.1)) as svc:
        session_id = await new_session(svc)
        async with svc.client.stream(
            "GET", f"/v1/sessions/{session_id}/events", params={"after": 1}
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            received = ""
            async for chunk in response.aiter_text():
                received += chunk
                if received.count(": keep-alive") >= 2:
                    break
        assert received.startswith("retry: ")


async def test_deleting_the_session_ends_its_streams(service: LiveService) -> None:
    session_id = await new_session(service)
    async with service.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", params={"after": 1}
    ) as response:
        assert response.status_code == 200
        deleter = asyncio.create_task(service.client.delete(f"/v1/sessions/{session_id}"))
        events = [e async for e in read_events(response)]
        assert (await deleter).status_code == 204
    assert events == []


async def test_bad_last_event_id(service: LiveService) -> None:
    session_id = await new_session(service)
    response = await service.client.get(
        f"/v1/sessions/{session_id}/events", headers={"Last-Event-ID": "abc"}
    )
    assert_error(response, 422, "validation_error")
    response = await service.client.get(f"/v1/sessions/{session_id}/events", params={"after": -1})
    assert_error(response, 422, "validation_error")


async def test_slow_streamed_text_reaches_a_live_client_piece_by_piece(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    # Pieces 150 ms apart, three times the 50 ms a delta may wait: none are coalesced.
    fake_llm.enqueue(Reply("one two three four", chunk_delay=0.15))
    session_id = await new_session(service)
    events = await stream_turn(service.client, session_id, "count to four")
    deltas = [e.data["text"] for e in events if e.event == "message.delta"]
    assert deltas == ["one ", "two ", "three ", "four"]


async def test_coalesced_text_replays_exactly_once(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    # Twelve pieces streamed at once: the first goes out alone, the rest as one event.
    fake_llm.enqueue(Reply(WORDS))
    session_id = await new_session(service)
    everything = await stream_turn(service.client, session_id, "count to twelve")
    deltas = [e for e in everything if e.event == "message.delta"]
    assert [d.data["text"] for d in deltas] == ["one ", WORDS.removeprefix("one ")]
    async with service.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", headers={"Last-Event-ID": deltas[0].id or ""}
    ) as response:
        resumed = [e async for e in read_events(response, until="turn.completed")]
    # The turn is finished: its deltas were deleted (message.completed carries the whole
    # reply), so the rest skips their ids; everything else comes as it went out, once.
    after = everything[everything.index(deltas[0]) + 1 :]
    assert replay_of(after) == [(e.id, e.event, e.data) for e in resumed]
    assert [e.event for e in resumed if e.event == "message.delta"] == []
    assert [e.data["text"] for e in resumed if e.event == "message.completed"] == [WORDS]
    # From the start: each step's last state only, no delta; the ids still grow.
    async with service.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", headers={"Last-Event-ID": "0"}
    ) as response:
        replayed = [e async for e in read_events(response, until="turn.completed")]
    first = int(everything[0].id or 0)
    replayed = [e for e in replayed if int(e.id or 0) >= first]
    assert replay_of(everything) == [(e.id, e.event, e.data) for e in replayed]
    steps = [e for e in everything if e.event == "step.updated"]
    assert len({e.data["step_id"] for e in steps}) < len(steps)  # some state was superseded
    assert len({e.data["step_id"] for e in replayed if e.event == "step.updated"}) == len(
        [e for e in replayed if e.event == "step.updated"]
    )
