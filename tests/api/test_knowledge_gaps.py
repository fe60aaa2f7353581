"""Knowledge gaps over HTTP: a question no passage answered, and a question a human agent
answered after a handoff, counted per tenant and listed for operators, masked. Through the
service on a real socket with the fake model server (on SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.testing import LiveService, serve, stream_turn
from tests.api.test_handoff import (
    AS_AGENT,
    AS_OPERATOR,
    as_customer,
    ask,
    claim,
    desk_settings,
    say,
)
from tests.api.test_sessions import assert_error
from tests.conftest import new_session

LAPTOPS = "Do you sell laptops? Call me on 13800138000"


@pytest.fixture
async def svc(make_settings: Any) -> AsyncIterator[LiveService]:
    async with serve(desk_settings(make_settings)) as service:
        yield service


async def _gaps(svc: LiveService, **params: Any) -> list[dict[str, Any]]:
    listed = await svc.client.get("/v1/knowledge/gaps", params=params, headers=AS_OPERATOR)
    assert listed.status_code == 200, listed.text
    items: list[dict[str, Any]] = listed.json()["items"]
    return items


async def _unanswered(svc: LiveService, fake_llm: FakeLLMServer, user: str, text: str) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("search_knowledge", {"query": "sell laptops"}, id="k1")),
        Reply("I don't know that; shall I get a colleague?"),
    )
    customer = await as_customer(svc, user)
    svc.client.headers.update(customer)
    session_id = await new_session(svc, user)
    events = await stream_turn(svc.client, session_id, text)
    (search,) = [e.data for e in events if e.event == "tool.completed"]
    assert search["result"]["data"]["found"] is False


async def test_a_question_nothing_answered_is_counted_masked(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    await _unanswered(svc, fake_llm, "cust_0014", LAPTOPS)
    await _unanswered(svc, fake_llm, "cust_0015", "do you sell laptops?  call me on 13800138000 ")
    (gap,) = await _gaps(svc)
    assert gap["reason"] == "no_answer" and gap["count"] == 2
    assert "laptops" in gap["question"] and "13800138000" not in gap["question"]
    assert gap["first_seen_at"] <= gap["last_seen_at"]
    assert await _gaps(svc, reason="human") == []


async def test_a_question_a_human_answered_is_counted_once(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    svc.client.headers.update(await as_customer(svc, "cust_0014"))
    session_id = await new_session(svc, "cust_0014")
    fake_llm.enqueue(Reply("Let me find a colleague for you."))
    assert (await say(svc, session_id, "Can I pay with cryptocurrency?")).status_code == 200
    assert (await ask(svc, session_id, "payment question")).status_code == 202
    assert (await claim(svc, session_id, AS_AGENT)).status_code == 200
    url = f"/v1/sessions/{session_id}/messages"
    for text in ("No, we do not accept cryptocurrency.", "Anything else I can do?"):
        said = await svc.client.post(
            url, json={"content": text, "author": "agent"}, headers=AS_AGENT
        )
        assert said.status_code in (200, 201, 202), said.text
    gaps = await _gaps(svc, reason="human")
    assert [(g["question"], g["count"]) for g in gaps] == [("Can I pay with cryptocurrency?", 1)]


async def test_only_operators_read_the_gaps(svc: LiveService) -> None:
    assert_error(await svc.client.get("/v1/knowledge/gaps", headers=AS_AGENT), 403, "forbidden")
    customer = await as_customer(svc, "cust_0014")
    assert_error(await svc.client.get("/v1/knowledge/gaps", headers=customer), 403, "forbidden")
    assert_error(
        await svc.client.get("/v1/knowledge/gaps", params={"limit": 0}, headers=AS_OPERATOR),
        422,
        "validation_error",
    )
