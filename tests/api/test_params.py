"""Ids in paths, stream positions and cursors are checked before anything is looked up or
streamed: out of range or malformed is a 422 `validation_error` in the one error shape, never
a 500, a broken stream or a database lookup of a 300-character id."""

from __future__ import annotations

import asyncio
import base64
import json
import re

import httpx

from app.api.params import MESSAGE_CURSOR, SESSION_CURSOR
from app.llm.testing import FakeLLMServer, Reply
from app.storage.messages import encode_message_cursor
from app.storage.paging import encode_cursor
from app.testing import LiveService, SseEvent, read_events, stream_turn
from tests.api.test_sessions import assert_error
from tests.conftest import new_session, replay_of

HUGE = "99999999999999999999999"  # > 2^63 - 1
INT64_MAX = str(2**63 - 1)
BAD_POSITIONS = ("-1", "abc", HUGE, str(2**63), "1.5", "+3", "1_0", "3.0", "0x1", "٣")


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def assert_no_stream(response: httpx.Response, field: str) -> None:
    await response.aread()
    assert response.headers["content-type"].startswith("application/json")
    error = assert_error(response, 422, "validation_error")
    assert field in json.dumps(error["details"])


async def test_bad_last_event_id_and_after_are_422_before_any_stream(
    service: LiveService,
) -> None:
    session_id = await new_session(service)
    path = f"/v1/sessions/{session_id}/events"
    for value in BAD_POSITIONS:
        if value.isascii():  # header values are ASCII on the wire
            async with service.client.stream("GET", path, headers={"Last-Event-ID": value}) as r:
                await assert_no_stream(r, "Last-Event-ID")
        async with service.client.stream("GET", path, params={"after": value}) as r:
            await assert_no_stream(r, "after")


async def test_the_largest_position_is_accepted(service: LiveService) -> None:
    session_id = await new_session(service)
    path = f"/v1/sessions/{session_id}/events"
    for headers, params in (({"Last-Event-ID": INT64_MAX}, {}), ({}, {"after": INT64_MAX})):
        async with service.client.stream("GET", path, headers=headers, params=params) as r:
            assert r.status_code == 200
            # The stream is alive: deleting the session ends it cleanly, no error frame.
            deleting = asyncio.create_task(service.client.delete(f"/v1/sessions/{session_id}"))
            assert [e async for e in read_events(r)] == []
            assert (await deleting).status_code == 204
        session_id = await new_session(service)
        path = f"/v1/sessions/{session_id}/events"


async def test_the_streamed_post_checks_its_position_before_accepting_the_turn(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    session_id = await new_session(service)
    path = f"/v1/sessions/{session_id}/messages"
    sse = {"Accept": "text/event-stream"}
    for value in BAD_POSITIONS:
        if value.isascii():
            async with service.client.stream(
                "POST", path, json={"content": "hi"}, headers={**sse, "Last-Event-ID": value}
            ) as r:
                await assert_no_stream(r, "Last-Event-ID")
        async with service.client.stream(
            "POST", path, json={"content": "hi"}, headers=sse, params={"after": value}
        ) as r:
            await assert_no_stream(r, "after")
        # A bad ?after= is bad whatever else is sent: with a good Last-Event-ID, on a JSON post.
        for headers in ({**sse, "Last-Event-ID": "3"}, {}):
            async with service.client.stream(
                "POST", path, json={"content": "hi"}, headers=headers, params={"after": value}
            ) as r:
                await assert_no_stream(r, "after")
    # Nothing was accepted: no message stored, the model never asked.
    assert (await service.client.get(path)).json()["items"] == []
    assert fake_llm.requests == []


async def test_a_retried_streamed_post_resumes_after_last_event_id(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("one two three four"))
    session_id = await new_session(service)
    first = await stream_turn(service.client, session_id, "count", client_message_id="m1")
    assert first[-1].event == "turn.completed"
    ids = [int(e.id) for e in first if e.id]
    seen = ids[2]
    # What the log keeps of the finished turn (its end deleted the superseded events).
    kept = [int(i) for i, _type, _data in replay_of(first) if i]
    async with asyncio.timeout(10):  # a replay past the client's position ends, never hangs
        resumed = await _replay(service, session_id, {"Last-Event-ID": str(seen)})
        assert [int(e.id) for e in resumed if e.id] == [i for i in kept if i > seen]
        assert await _replay(service, session_id, {"Last-Event-ID": INT64_MAX}) == []
        assert [int(e.id) for e in await _replay(service, session_id, {}) if e.id] == kept
    assert len(fake_llm.requests) == 1  # replays, not new turns


async def _replay(service: LiveService, session_id: str, headers: dict[str, str]) -> list[SseEvent]:
    async with service.client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": "count", "client_message_id": "m1"},
        headers={"Accept": "text/event-stream", **headers},
    ) as response:
        assert response.status_code == 200
        assert response.headers["idempotent-replayed"] == "true"
        return [e async for e in read_events(response)]


async def test_out_of_range_cursors_are_422(service: LiveService) -> None:
    session_id = await new_session(service)
    messages = f"/v1/sessions/{session_id}/messages"
    message_cursors = [
        HUGE,
        "garbage!!",
        b64(f"{HUGE}:1".encode()),
        b64(f"1:{HUGE}".encode()),
        b64(b"-5:-3"),
        b64(b"1:-1"),
        b64(b" 1:2"),
        b64(b"1_0:2"),
        b64("١:٢".encode()),
    ]
    for cursor in message_cursors:
        response = await service.client.get(messages, params={"cursor": cursor})
        assert_error(response, 422, "validation_error")
    session_cursors = [
        HUGE,
        b64(f'[{HUGE}, "ses_x"]'.encode()),
        b64(b'[-1, "ses_x"]'),
        b64(b'[1e400, "ses_x"]'),
        b64(b'[NaN, "ses_x"]'),
        b64(b'[Infinity, "ses_x"]'),
        b64(b'[true, "ses_x"]'),
        b64(b'[1.5, ""]'),
        b64(json.dumps([1.5, "s" * 300]).encode()),
    ]
    for cursor in session_cursors:
        response = await service.client.get("/v1/sessions", params={"cursor": cursor})
        assert_error(response, 422, "validation_error")


async def test_long_path_ids_are_422_and_normal_ids_unaffected(service: LiveService) -> None:
    long_id = "s" * 300
    client = service.client
    for method, path in [
        ("GET", f"/v1/sessions/{long_id}"),
        ("DELETE", f"/v1/sessions/{long_id}"),
        ("GET", f"/v1/sessions/{long_id}/messages"),
        ("POST", f"/v1/sessions/{long_id}/messages"),
        ("GET", f"/v1/sessions/{long_id}/events"),
        ("GET", f"/v1/sessions/{long_id}/steps"),
        ("POST", f"/v1/sessions/ses_x/steps/{long_id}/retry"),
        ("GET", f"/v1/users/{long_id}/memories"),
        ("DELETE", f"/v1/users/u1/memories/{long_id}"),
        ("GET", f"/v1/users/u1/memories/{long_id}/history"),
        ("GET", f"/v1/sessions/{long_id}/approvals"),
        ("GET", f"/v1/sessions/ses_x/approvals/{long_id}"),
        ("POST", f"/v1/sessions/ses_x/approvals/{long_id}"),
    ]:
        response = await client.request(method, path, json={"content": "hi"})
        error = assert_error(response, 422, "validation_error")
        assert "128" in json.dumps(error["details"]), error
    # At the cap, an id is looked up like any other: unknown, so 404.
    assert_error(await client.get(f"/v1/sessions/{'s' * 128}"), 404, "session_not_found")
    session_id = await new_session(service)
    assert (await client.get(f"/v1/sessions/{session_id}")).status_code == 200
    assert (await client.get(f"/v1/sessions/{session_id}/messages")).status_code == 200


async def test_positions_are_what_the_schema_says(service: LiveService) -> None:
    """The spec states the rule parse_seq applies (a pattern for 0..2^63-1, any leading zeros,
    empty for none), so a fuzzer's valid position is the server's too: `Last-Event-ID: null`
    or a 64-digit run of zeros used to disagree."""
    session_id = await new_session(service)
    path = f"/v1/sessions/{session_id}/events"
    doc = (await service.client.get("/openapi.json")).json()
    params = {
        p["name"]: p["schema"]
        for p in doc["paths"][path.replace(session_id, "{session_id}")]["get"]["parameters"]
    }
    pattern = re.compile(params["last-event-id"]["pattern"])
    assert params["after"]["pattern"] == pattern.pattern
    for value in ("", "0" * 64, "00" + INT64_MAX):
        assert pattern.fullmatch(value)
        for headers, query in (({"Last-Event-ID": value}, {}), ({}, {"after": value})):
            async with service.client.stream("GET", path, headers=headers, params=query) as r:
                assert r.status_code == 200, value
    for value in ("null", "0" * 65, str(2**63), " 1"):
        assert not (pattern.fullmatch(value) and len(value) <= 64)
        async with service.client.stream("GET", path, params={"after": value}) as r:
            await assert_no_stream(r, "after")


async def test_cursors_are_declared_opaque(service: LiveService) -> None:
    doc = (await service.client.get("/openapi.json")).json()
    sessions = doc["paths"]["/v1/sessions"]["get"]["parameters"]
    messages = doc["paths"]["/v1/sessions/{session_id}/messages"]["get"]["parameters"]
    formats = {p["schema"].get("format") for p in sessions + messages if p["name"] == "cursor"}
    assert formats == {SESSION_CURSOR, MESSAGE_CURSOR}
    # One made the way the service makes them is a position, whether or not a row is there.
    session_id = await new_session(service)
    page = await service.client.get("/v1/sessions", params={"cursor": encode_cursor(1.0, "s")})
    assert page.status_code == 200 and page.json()["items"] == []
    made = encode_message_cursor(2**63 - 1, 1)
    listed = await service.client.get(
        f"/v1/sessions/{session_id}/messages", params={"cursor": made}
    )
    assert listed.status_code == 200
