"""Tools through the whole service: the model (fake server) calls them over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.testing import LiveService, SseEvent, read_events, serve
from tests.api.test_sessions import assert_error
from tests.conftest import FIXTURE_TOOLS, new_session
from tests.tools.fixture_tools import REC


@pytest.fixture(autouse=True)
def _reset() -> None:
    REC.reset()


@pytest.fixture
def svc(tools_service: LiveService) -> LiveService:
    return tools_service


async def test_tools_are_listed_with_health(service: LiveService) -> None:
    body = (await service.client.get("/v1/tools")).json()
    by_name = {t["name"]: t for t in body["items"]}
    assert {"get_current_time", "query_order_status", "send_email"} <= set(by_name)
    email = by_name["send_email"]
    assert email["risk"] == "external" and email["source"] == "local"
    assert email["parameters"]["additionalProperties"] is False
    assert email["health"]["state"] == "closed" and email["offered"] is True


async def test_the_model_corrects_itself_after_a_validation_error(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("write_note", {"txt": "call back at 5"}, id="c1")),
        ToolCalls(ToolCall("write_note", {"text": "call back at 5"}, id="c2")),
        Reply("Noted."),
    )
    session_id = await new_session(svc)
    body = (
        await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "note it"})
    ).json()
    assert body["message"]["content"] == "Noted."
    hint = json.loads(fake_llm.requests[1].messages[-1]["content"])["error"]
    assert hint["code"] == "invalid_arguments"
    assert "text" in hint["message"] and "txt" in hint["message"]
    assert [s["text"] for s in REC.side_effects] == ["call back at 5"]


async def _stream_until(
    svc: LiveService, session_id: str, content: str, stop: str
) -> tuple[list[SseEvent], Any]:
    """Start a streamed turn and read until `stop`; the rest is left to the caller."""
    events: list[SseEvent] = []
    manager = svc.client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": content},
        headers={"Accept": "text/event-stream"},
    )
    response = await manager.__aenter__()
    iterator = read_events(response)
    async for event in iterator:
        events.append(event)
        if event.event == stop:
            break
    return events, (manager, iterator)


async def test_approval_approve_over_http(svc: LiveService, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("notify_partner", {"to": "ops@partner.example", "message": "hi"})),
        Reply("Sent to our partner."),
    )
    session_id = await new_session(svc)
    events, (manager, iterator) = await _stream_until(
        svc, session_id, "tell the partner", "approval.requested"
    )
    requested = events[-1].data
    assert requested["tool"] == "notify_partner" and "partner.example" in requested["reason"]
    assert REC.side_effects == []  # nothing happened before the decision
    pending = (await svc.client.get(f"/v1/sessions/{session_id}/approvals")).json()["items"]
    assert [a["id"] for a in pending] == [requested["approval_id"]]
    assert pending[0]["status"] == "pending"
    url = f"/v1/sessions/{session_id}/approvals/{requested['approval_id']}"
    decided = await svc.client.post(url, json={"decision": "approve", "reason": "ok"})
    assert decided.status_code == 200 and decided.json()["status"] == "approved"
    rest = [e async for e in iterator]
    await manager.__aexit__(None, None, None)
    types = [e.event for e in rest]
    assert "approval.resolved" in types and types[-1] == "turn.completed"
    completed = next(e for e in rest if e.event == "tool.completed")
    assert completed.data["status"] == "success"
    assert [s["to"] for s in REC.side_effects] == ["ops@partner.example"]
    assert_error(
        await svc.client.post(url, json={"decision": "reject"}), 409, "approval_not_pending"
    )
    assert_error(
        await svc.client.post(
            f"/v1/sessions/{session_id}/approvals/apr_nope", json={"decision": "approve"}
        ),
        404,
        "approval_not_found",
    )
    assert_error(await svc.client.post(url, json={"decision": "maybe"}), 422, "validation_error")


async def test_approval_reject_goes_back_to_the_model(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("notify_partner", {"to": "ops@partner.example", "message": "hi"})),
        Reply("Our operator declined that."),
    )
    session_id = await new_session(svc)
    events, (manager, iterator) = await _stream_until(
        svc, session_id, "tell them", "approval.requested"
    )
    approval_id = events[-1].data["approval_id"]
    await svc.client.post(
        f"/v1/sessions/{session_id}/approvals/{approval_id}",
        json={"decision": "reject", "reason": "partner is on holiday"},
    )
    rest = [e async for e in iterator]
    await manager.__aexit__(None, None, None)
    assert rest[-1].event == "turn.completed"
    result = json.loads(fake_llm.requests[-1].messages[-1]["content"])
    assert result["error"]["code"] == "approval_rejected"
    assert "partner is on holiday" in result["error"]["message"]
    assert REC.side_effects == []


async def test_approval_expires(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("notify_partner", {"to": "ops@partner.example", "message": "hi"})),
        Reply("Nobody approved it in time."),
    )
    settings = make_settings(tools_file=FIXTURE_TOOLS, approval_timeout_s=0.3)
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        body = (
            await svc.client.post(
                f"/v1/sessions/{session_id}/messages", json={"content": "tell our partner hi"}
            )
        ).json()
        assert body["status"] == "completed"
        approvals = (await svc.client.get(f"/v1/sessions/{session_id}/approvals")).json()["items"]
    assert approvals[0]["status"] == "expired"
    result = json.loads(fake_llm.requests[-1].messages[-1]["content"])
    assert result["error"]["code"] == "approval_expired"


async def test_only_operators_decide(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    agent, operator = "acme-agent-key-0001", "acme-operator-key-1"
    settings = make_settings(
        tools_file=FIXTURE_TOOLS,
        auth="api_key",
        api_keys=[f"acme:agent:{agent}", f"acme:operator:{operator}"],
    )
    fake_llm.enqueue(
        ToolCalls(ToolCall("notify_partner", {"to": "ops@partner.example", "message": "hi"})),
        Reply("done"),
    )
    async with serve(settings) as svc:
        svc.client.headers["Authorization"] = f"Bearer {agent}"
        session_id = await new_session(svc)
        events, (manager, iterator) = await _stream_until(
            svc, session_id, "tell our partner hi", "approval.requested"
        )
        url = f"/v1/sessions/{session_id}/approvals/{events[-1].data['approval_id']}"
        assert_error(await svc.client.post(url, json={"decision": "approve"}), 403, "forbidden")
        ok = await svc.client.post(
            url, json={"decision": "approve"}, headers={"Authorization": f"Bearer {operator}"}
        )
        assert ok.status_code == 200
        rest = [e async for e in iterator]
        await manager.__aexit__(None, None, None)
        assert rest[-1].event == "turn.completed"


async def test_nothing_unmasked_reaches_events_messages_or_the_model(
    svc: LiveService, fake_llm: FakeLLMServer, make_settings: Any
) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("customer_record", {"customer_id": "cust_0001"})), Reply("found you")
    )
    session_id = await new_session(svc)
    await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "who am I"})
    secrets = ["13800138000", "li.lei@example.com", "110101199003074512", "6222021234567890123"]
    model_saw = json.dumps(fake_llm.requests[-1].messages, ensure_ascii=False)
    db = svc.runtime.db
    events = " ".join(r[0] for r in await db.fetchall("SELECT data FROM events"))
    messages = " ".join(r[0] or "" for r in await db.fetchall("SELECT content FROM messages"))
    for secret in secrets:
        assert secret not in model_saw
        assert secret not in events
        assert secret not in messages
    assert "138****8000" in events and "138****8000" in model_saw


async def test_a_tool_that_keeps_failing_is_withdrawn_for_the_turn(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    REC.fail_with = "backend_down"
    fake_llm.enqueue(
        *[ToolCalls(ToolCall("flaky", {"n": i})) for i in range(3)],
        Reply("The backend is down, sorry. Shall I connect you to a colleague?"),
    )
    session_id = await new_session(svc)
    body = (
        await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "check"})
    ).json()
    assert body["message"]["content"].startswith("The backend is down")
    offered = [r.tool_names for r in fake_llm.requests]
    assert all("flaky" in names for names in offered[:3])
    assert "flaky" not in offered[3]
    last_result = json.loads(fake_llm.requests[3].messages[-1]["content"])
    assert last_result["status"] == "fallback"


async def test_send_email_waits_for_approval_and_arrives_once(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    from app.demo.testing import SmtpSink

    sink = SmtpSink().start()
    try:
        settings = make_settings(smtp_host=sink.host, smtp_port=sink.port)
        fake_llm.enqueue(
            ToolCalls(
                ToolCall(
                    "send_email",
                    {"to": "li.lei@example.com", "subject": "Your order", "body": "It shipped."},
                )
            ),
            Reply("I have emailed you."),
        )
        async with serve(settings) as svc:
            session_id = await new_session(svc, "cust_0001")
            events, (manager, iterator) = await _stream_until(
                svc, session_id, "please put that in writing for me", "approval.requested"
            )
            assert events[-1].data["arguments"]["to"] == "l***@example.com"  # masked for humans too
            assert sink.received() == []
            await svc.client.post(
                f"/v1/sessions/{session_id}/approvals/{events[-1].data['approval_id']}",
                json={"decision": "approve"},
            )
            rest = [e async for e in iterator]
            await manager.__aexit__(None, None, None)
            assert rest[-1].event == "turn.completed"
        received = sink.received()
        assert len(received) == 1
        assert received[0]["To"] == "li.lei@example.com" and received[0]["Subject"] == "Your order"
    finally:
        sink.stop()
