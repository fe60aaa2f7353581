""" "Email me X at ADDRESS" with hermes/local, over HTTP and SSE, against a real SMTP server:
a send_email that waits for an operator, never a change to the account's email."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.demo.fixtures import LI_LEI, LI_LEI_EMAIL, SHIPPED_ORDER
from app.demo.testing import SmtpSink
from app.testing import TERMINAL, LiveService, SseEvent, read_events, serve, stream_turn
from tests.conftest import new_session
from tests.demo.conftest import query

ADDRESS = "han.work@example.com"
MASKED = "h***@example.com"  # how the redactor shows ADDRESS; the on-file one is l***@...

Decide = Callable[[SseEvent], Awaitable[None]]


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with SmtpSink() as smtp:
        yield smtp


@pytest.fixture
def offline_settings(make_settings: Any, sink: SmtpSink) -> Callable[..., Any]:
    def make(**overrides: Any) -> Any:
        return make_settings(
            model="hermes/local",
            model_api_base=None,
            model_api_key=None,
            smtp_host=sink.host,
            smtp_port=sink.port,
            smtp_timeout_s=5,
            **overrides,
        )

    return make


@pytest.fixture
async def offline(offline_settings: Callable[..., Any]) -> AsyncIterator[LiveService]:
    async with serve(offline_settings()) as svc:
        yield svc


def account_email(svc: LiveService) -> str:
    path: Path = svc.runtime.settings.demo.db_path
    [(email,)] = query(path, "SELECT email FROM customers WHERE id = ?", LI_LEI)
    return str(email)


def reply_text(events: list[SseEvent]) -> str:
    completed = [e for e in events if e.event == "message.completed"]
    assert completed, [e.event for e in events]
    return str(completed[-1].data["text"])


async def turn_deciding(
    svc: LiveService, session_id: str, content: str, decide: Decide
) -> list[SseEvent]:
    """A streamed turn; `decide` runs when the approval is announced, while the turn waits."""
    events: list[SseEvent] = []
    async with svc.client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": content},
        headers={"Accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200
        async for event in read_events(response):
            events.append(event)
            if event.event == "approval.requested":
                await decide(event)
            if event.event in TERMINAL:
                break
    return events


def deciding(
    svc: LiveService, session_id: str, sink: SmtpSink, decision: str
) -> tuple[Decide, list[SseEvent]]:
    """A `decide` that checks nothing happened yet, then posts `decision` as the operator."""
    seen: list[SseEvent] = []

    async def decide(event: SseEvent) -> None:
        seen.append(event)
        assert event.data["tool"] == "send_email"
        assert event.data["arguments"]["to"] in (ADDRESS, MASKED)
        assert sink.received() == []  # nothing leaves before a person says so
        assert account_email(svc) == LI_LEI_EMAIL
        url = f"/v1/sessions/{session_id}/approvals/{event.data['approval_id']}"
        answer = await svc.client.post(url, json={"decision": decision, "reason": "checked"})
        assert answer.status_code == 200, answer.text

    return decide, seen


@pytest.mark.parametrize(
    ("text", "sent_words"),
    [
        (f"Please email me the receipt at {ADDRESS}", ("sent", ADDRESS)),
        (f"请把发票发到我的邮箱 {ADDRESS}", ("已发送", ADDRESS)),
    ],
)
async def test_an_approved_email_request_sends_one_email_and_changes_no_account(
    offline: LiveService, sink: SmtpSink, text: str, sent_words: tuple[str, ...]
) -> None:
    session_id = await new_session(offline, LI_LEI)
    decide, seen = deciding(offline, session_id, sink, "approve")
    events = await turn_deciding(offline, session_id, text, decide)

    assert events[-1].event == "turn.completed", events[-1].data
    intent = next(e for e in events if e.event == "intent.classified")
    assert intent.data["intent"] == "email_request"
    assert len(seen) == 1
    tools = [e.data["tool"] for e in events if e.event == "tool.completed"]
    assert tools == ["send_email"]  # update_contact_info was neither offered nor called
    [message] = sink.received()
    assert message["To"] == ADDRESS
    answer = reply_text(events)
    assert all(word in answer for word in sent_words), answer
    assert account_email(offline) == LI_LEI_EMAIL


@pytest.mark.parametrize(
    ("text", "declined"),
    [
        (f"email me the order confirmation at {ADDRESS}", "declined"),
        (f"把订单详情发到{ADDRESS}", "没有批准"),
    ],
)
async def test_a_rejected_email_request_says_so_and_sends_nothing(
    offline: LiveService, sink: SmtpSink, text: str, declined: str
) -> None:
    session_id = await new_session(offline, LI_LEI)
    decide, seen = deciding(offline, session_id, sink, "reject")
    events = await turn_deciding(offline, session_id, text, decide)

    assert events[-1].event == "turn.completed", events[-1].data
    assert len(seen) == 1
    assert declined in reply_text(events)
    assert sink.received() == []
    assert account_email(offline) == LI_LEI_EMAIL


async def test_the_email_carries_the_facts_of_the_order_looked_up_before(
    offline: LiveService, sink: SmtpSink
) -> None:
    session_id = await new_session(offline, LI_LEI)
    first = await stream_turn(offline.client, session_id, f"check order {SHIPPED_ORDER}")
    assert SHIPPED_ORDER in reply_text(first)
    decide, _ = deciding(offline, session_id, sink, "approve")
    events = await turn_deciding(
        offline, session_id, f"thanks, now email me the details at {ADDRESS}", decide
    )

    assert events[-1].event == "turn.completed", events[-1].data
    [message] = sink.received()
    body = message.get_content()
    assert message["Subject"] == "Your requested order details"
    [(total_cents, currency)] = query(
        offline.runtime.settings.demo.db_path,
        "SELECT total_cents, currency FROM orders WHERE id = ?",
        SHIPPED_ORDER,
    )
    total = f"Total {currency} {total_cents / 100:,.2f}"  # the reply templates format money
    for fact in (SHIPPED_ORDER, "is shipped", total, "SF123456789CN"):
        assert fact in body, body
    assert account_email(offline) == LI_LEI_EMAIL


async def test_an_email_request_without_an_address_asks_for_one(
    offline: LiveService, sink: SmtpSink
) -> None:
    session_id = await new_session(offline, LI_LEI)
    first = await stream_turn(offline.client, session_id, "把订单详情发邮件给我")
    assert "邮箱" in reply_text(first)
    assert not any(e.event == "tool.started" for e in first)  # not the address on file
    decide, seen = deciding(offline, session_id, sink, "approve")
    events = await turn_deciding(offline, session_id, ADDRESS, decide)

    assert len(seen) == 1
    assert next(e for e in events if e.event == "intent.classified").data["intent"] == (
        "email_request"  # a bare address answering "which address?" is not a contact change
    )
    [message] = sink.received()
    assert message["To"] == ADDRESS and message["Subject"] == "您要求的订单详情"
    assert account_email(offline) == LI_LEI_EMAIL


async def test_an_approval_nobody_gives_leaves_the_email_waiting_for_a_colleague(
    offline_settings: Callable[..., Any], sink: SmtpSink
) -> None:
    async with serve(offline_settings(approval_timeout_s=0.3)) as svc:
        session_id = await new_session(svc, LI_LEI)
        events = await stream_turn(svc.client, session_id, f"email me the receipt at {ADDRESS}")
    assert events[-1].event == "turn.completed", events[-1].data
    assert any(e.event == "approval.requested" for e in events)
    assert "waiting for a colleague" in reply_text(events)
    assert sink.received() == []
