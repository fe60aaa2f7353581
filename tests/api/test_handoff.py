"""Human takeover over HTTP: a customer (by their words) or anyone (by the API) asks for a person;
agents see the queue oldest first, claim a session (the bot goes silent: the fake model server
gets no call), write to the customer as `author: agent`, ask the bot for drafts that are never
sent, and hand back; a handoff nobody claims ends in the fallback (ticket + call-back).

Through the service on a real socket, the fake model over HTTP, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.demo.fixtures import DELIVERED_ORDER, LI_LEI
from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.testing import LiveService, SseEvent, read_events, serve
from tests.api.test_sessions import assert_error
from tests.conftest import new_session

ADMIN, AGENT, AGENT_B, OPERATOR, STRANGER = (
    "acme-admin-key-0001",
    "acme-agent-key-0001",
    "acme-agent-key-0002",
    "acme-operator-key-1",
    "other-agent-key-001",
)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


AS_AGENT, AS_AGENT_B, AS_OPERATOR = map(auth, (AGENT, AGENT_B, OPERATOR))


async def as_customer(svc: LiveService, user_id: str = "u1") -> dict[str, str]:
    """A customer-facing frontend's key for one customer (a customer key is always bound)."""
    made = await svc.client.post(
        "/v1/keys", json={"role": "customer", "user_id": user_id}, headers=auth(ADMIN)
    )
    assert made.status_code == 201, made.text
    return auth(made.json()["key"])


def desk_settings(make_settings: Any, **overrides: Any) -> Any:
    return make_settings(
        auth="api_key",
        api_keys=[
            f"acme:admin:{ADMIN}",
            f"acme:agent:{AGENT}",
            f"acme:agent:{AGENT_B}",
            f"acme:operator:{OPERATOR}",
            f"other:agent:{STRANGER}",
        ],
        demo_tenants=["acme"],
        **overrides,
    )


@pytest.fixture
async def svc(make_settings: Any) -> AsyncIterator[LiveService]:
    async with serve(desk_settings(make_settings)) as service:
        service.client.headers.update(await as_customer(service))
        yield service


async def wait_for(
    svc: LiveService,
    session_id: str,
    found: Callable[[SseEvent], bool],
    *,
    after: int = 0,
    timeout_s: float = 10.0,
) -> list[SseEvent]:
    """The session's events from `after` up to the first one `found` accepts (with a deadline)."""
    seen: list[SseEvent] = []
    async with asyncio.timeout(timeout_s):
        async with svc.client.stream(
            "GET", f"/v1/sessions/{session_id}/events", params={"after": after}
        ) as response:
            assert response.status_code == 200
            async for event in read_events(response):
                seen.append(event)
                if found(event):
                    return seen
    raise AssertionError("the stream ended")


def of_type(kind: str, /, **data: Any) -> Callable[[SseEvent], bool]:
    def match(event: SseEvent) -> bool:
        return event.event == kind and all(event.data.get(k) == v for k, v in data.items())

    return match


async def ask(svc: LiveService, session_id: str, reason: str = "") -> httpx.Response:
    return await svc.client.post(f"/v1/sessions/{session_id}/handoff", json={"reason": reason})


async def claim(svc: LiveService, session_id: str, who: dict[str, str]) -> httpx.Response:
    return await svc.client.post(f"/v1/sessions/{session_id}/handoff/claim", headers=who)


async def say(svc: LiveService, session_id: str, text: str, **extra: Any) -> httpx.Response:
    return await svc.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": text, **extra}
    )


async def test_asking_for_a_person_in_words_queues_the_session_with_what_the_agent_needs(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("Let me find a colleague for you."))
    svc.client.headers.update(await as_customer(svc, "cust_0014"))
    session_id = await new_session(svc, "cust_0014")
    answered = await say(svc, session_id, "Can I talk to a real person please?")
    assert answered.status_code == 200, answered.text

    events = await wait_for(svc, session_id, of_type("message.completed", author="bot"))
    requested = next(e for e in events if e.event == "handoff.requested")
    assert requested.data["requested_by"] == "customer"
    assert requested.data["position"] == 1
    notice = events[-1].data
    assert notice["kind"] == "handoff_position" and notice["position"] == 1
    assert "number 1 in the queue" in notice["text"]

    queue = await svc.client.get("/v1/handoffs", headers=AS_AGENT)
    assert queue.status_code == 200, queue.text
    [item] = queue.json()["data"]
    assert item["session_id"] == session_id and item["status"] == "waiting"
    assert item["language"] == "en" and item["position"] == 1
    assert item["reason"] == "the customer asked for a person"
    authors = [(m["author"], m["content"]) for m in item["last_messages"]]
    assert ("customer", "Can I talk to a real person please?") in authors
    assert authors[-1][0] == "bot"
    assert "human_handoff" in item["summary"]


async def test_the_queue_is_oldest_first_and_a_second_request_is_the_same_handoff(
    svc: LiveService,
) -> None:
    svc.client.headers.update(AS_AGENT)  # a staff key asks for a person for three customers
    sessions = [await new_session(svc, f"u{i}") for i in range(3)]
    for i, session_id in enumerate(sessions):
        response = await ask(svc, session_id, f"reason {i}")
        assert response.status_code == 202, response.text
        assert response.json()["position"] == i + 1
    again = await ask(svc, sessions[0], "again")
    assert again.status_code == 202 and again.json()["reason"] == "reason 0"

    queue = (await svc.client.get("/v1/handoffs", headers=AS_AGENT)).json()["data"]
    assert [h["session_id"] for h in queue] == sessions
    assert [h["position"] for h in queue] == [1, 2, 3]
    assert (await claim(svc, sessions[0], AS_AGENT)).status_code == 200
    waiting = (await svc.client.get("/v1/handoffs", headers=AS_AGENT)).json()["data"]
    assert [h["session_id"] for h in waiting] == sessions[1:]
    assert [h["position"] for h in waiting] == [1, 2]
    held = await svc.client.get("/v1/handoffs", params={"status": "claimed"}, headers=AS_AGENT)
    assert [h["session_id"] for h in held.json()["data"]] == sessions[:1]


async def test_claims_need_the_agent_role_and_one_agent_at_a_time(svc: LiveService) -> None:
    session_id = await new_session(svc)
    assert_error(await claim(svc, session_id, AS_AGENT), 404, "handoff_not_found")
    await ask(svc, session_id)
    assert_error(await claim(svc, session_id, svc.client.headers), 403, "forbidden")
    assert_error(await svc.client.get("/v1/handoffs"), 403, "forbidden")
    # Another tenant's agent neither sees nor takes it: the session does not exist for them.
    assert_error(await claim(svc, session_id, auth(STRANGER)), 404, "session_not_found")
    theirs = await svc.client.get("/v1/handoffs", headers=auth(STRANGER))
    assert theirs.status_code == 200 and theirs.json()["data"] == []

    claimed = await claim(svc, session_id, AS_AGENT)
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["status"] == "claimed"
    assert (await claim(svc, session_id, AS_AGENT)).status_code == 200  # their own again
    assert_error(await claim(svc, session_id, AS_AGENT_B), 409, "handoff_conflict")
    release = f"/v1/sessions/{session_id}/handoff/release"
    assert_error(await svc.client.post(release, headers=AS_AGENT_B), 403, "handoff_not_yours")
    released = await svc.client.post(release, headers=AS_OPERATOR)
    assert released.status_code == 200 and released.json()["status"] == "released"

    audit = await svc.runtime.db.fetchall(
        "SELECT action, role, session_id FROM audit_log WHERE action LIKE 'handoff.%' ORDER BY id"
    )
    assert [tuple(r) for r in audit] == [
        ("handoff.claim", "agent", session_id),
        ("handoff.release", "operator", session_id),
    ]
    other = await new_session(svc)
    assert_error(await claim(svc, other, AS_AGENT), 404, "handoff_not_found")


async def test_while_claimed_the_agent_talks_the_bot_only_drafts_and_hands_back_intact(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    session_id = await new_session(svc)
    fake_llm.enqueue(Reply("Hello, how can I help?"))
    assert (await say(svc, session_id, "hello")).status_code == 200
    await ask(svc, session_id, "billing dispute")
    assert (await claim(svc, session_id, AS_AGENT)).status_code == 200
    calls = len(fake_llm.requests)

    # The agent writes; only the holder may.
    assert_error(await say(svc, session_id, "hi", author="agent"), 403, "forbidden")
    wrong = await svc.client.post(
        f"/v1/sessions/{session_id}/messages",
        json={"content": "hi", "author": "agent"},
        headers=AS_AGENT_B,
    )
    assert_error(wrong, 409, "handoff_conflict")
    sent = await svc.client.post(
        f"/v1/sessions/{session_id}/messages",
        json={"content": "Hi, I'm Ana from billing.", "author": "agent"},
        headers=AS_AGENT,
    )
    assert sent.status_code == 201, sent.text
    assert sent.json()["metadata"]["author"] == "agent"
    events = await wait_for(svc, session_id, of_type("message.completed", author="agent"))
    assert events[-1].data["text"] == "Hi, I'm Ana from billing."

    # The customer's message waits for the agent: no turn, no model call.
    held = await say(svc, session_id, "I was charged twice")
    assert held.status_code == 202, held.text
    assert held.json()["status"] == "held"
    received = await wait_for(svc, session_id, of_type("message.received"))
    assert received[-1].data["text"] == "I was charged twice"
    assert received[-1].data["author"] == "customer"
    assert len(fake_llm.requests) == calls, "the bot ran while an agent held the session"

    # The bot drafts on request; the draft is an event, never a message.
    fake_llm.enqueue(Reply("I'm sorry about the double charge; I'll refund one of them."))
    drafted = await svc.client.post(
        f"/v1/sessions/{session_id}/handoff/suggestions", headers=AS_AGENT
    )
    assert drafted.status_code == 201, drafted.text
    draft = drafted.json()
    assert draft["for_message_id"] == held.json()["message"]["id"]
    ready = await wait_for(svc, session_id, of_type("suggestion.ready"))
    assert ready[-1].data == draft
    assert fake_llm.requests[-1].messages[-1]["content"] == "I was charged twice"
    page = (await svc.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    assert draft["text"] not in [m["content"] for m in page]
    sent_as_text = [e for e in ready if e.event != "suggestion.ready"]
    assert not any(e.data.get("text") == draft["text"] for e in sent_as_text)

    # Handed back: the bot answers again and sees what was said meanwhile.
    release = f"/v1/sessions/{session_id}/handoff/release"
    assert (await svc.client.post(release, headers=AS_AGENT)).status_code == 200
    fake_llm.enqueue(Reply("Anything else?"))
    again = await say(svc, session_id, "thanks, all good")
    assert again.status_code == 200, again.text
    assert again.json()["message"]["content"] == "Anything else?"
    contents = [m.get("content") for m in fake_llm.requests[-1].messages]
    for text in ("hello", "Hi, I'm Ana from billing.", "I was charged twice", "thanks, all good"):
        assert text in contents
    assert contents.index("I was charged twice") < contents.index("thanks, all good")


async def test_an_unclaimed_handoff_ends_in_a_ticket_and_a_call_back(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    settings = desk_settings(make_settings, handoff_fallback_s=0.3, handoff_sweep_interval_s=0.05)
    async with serve(settings) as svc:
        svc.client.headers.update(await as_customer(svc))
        session_id = await new_session(svc)
        await ask(svc, session_id, "wants a person")
        fallback = of_type("message.completed", kind="handoff_fallback")
        events = await wait_for(svc, session_id, fallback)
        expired = next(e for e in events if e.event == "handoff.expired")
        ticket = expired.data["ticket_id"]
        assert ticket.startswith("CB-")
        assert ticket in events[-1].data["text"] and "call you back" in events[-1].data["text"]
        handoff = (await svc.client.get(f"/v1/sessions/{session_id}/handoff")).json()
        assert handoff["status"] == "expired" and handoff["ticket_id"] == ticket
        assert_error(await claim(svc, session_id, AS_AGENT), 404, "handoff_not_found")
        metrics = (await svc.client.get("/metrics")).text
        assert 'hermes_handoff_wait_seconds_count{outcome="expired"}' in metrics
        assert "hermes_handoff_queue_length 0.0" in metrics
        assert fake_llm.requests == []


def sample(metrics: str, name: str) -> float:
    """The value of one series in a /metrics text (0 when it has no sample yet)."""
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


async def test_the_queue_gauge_and_the_wait_histogram_move(svc: LiveService) -> None:
    claimed = 'hermes_handoff_wait_seconds_count{outcome="claimed"}'
    before = sample((await svc.client.get("/metrics")).text, claimed)
    svc.client.headers.update(AS_AGENT)
    sessions = [await new_session(svc, f"u{i}") for i in range(2)]
    for session_id in sessions:
        await ask(svc, session_id)
    metrics = (await svc.client.get("/metrics")).text
    assert sample(metrics, "hermes_handoff_queue_length") == 2
    await claim(svc, sessions[0], AS_AGENT)
    await claim(svc, sessions[0], AS_AGENT)  # again: no second wait
    metrics = (await svc.client.get("/metrics")).text
    assert sample(metrics, "hermes_handoff_queue_length") == 1
    assert sample(metrics, claimed) == before + 1


# -- wrap-up --------------------------------------------------------------------------------------


async def test_goodbye_writes_the_contact_summary_with_what_was_done(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("query_order_status", {"order_id": DELIVERED_ORDER})),
        Reply("Your order was delivered."),
        Reply("Goodbye!"),
    )
    svc.client.headers.update(await as_customer(svc, LI_LEI))
    session_id = await new_session(svc, LI_LEI)
    summary_url = f"/v1/sessions/{session_id}/summary"
    assert_error(await svc.client.get(summary_url), 404, "summary_not_found")
    assert (await say(svc, session_id, f"where is my order {DELIVERED_ORDER}")).status_code == 200
    assert (await say(svc, session_id, "Thank you, goodbye!")).status_code == 200

    events = await wait_for(svc, session_id, of_type("session.summary"))
    body = (await svc.client.get(summary_url)).json()
    assert events[-1].data == body
    assert body["ended_by"] == "customer"
    assert body["intents"] == ["order_status", "goodbye"]
    assert [(a["tool"], a["status"]) for a in body["actions"]] == [
        ("query_order_status", "success")
    ]
    assert body["open_items"] == [] and body["disposition"] == "resolved"
    assert "query_order_status (success)" in body["text"]
    session = (await svc.client.get(f"/v1/sessions/{session_id}")).json()
    assert session["status"] == "active"  # the customer may still come back


async def test_an_agent_closes_a_session_with_a_disposition(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    session_id = await new_session(svc)
    await ask(svc, session_id, "wants a person")
    await claim(svc, session_id, AS_AGENT)
    close = f"/v1/sessions/{session_id}/close"
    assert_error(await svc.client.post(close, json={}), 403, "forbidden")
    closed = await svc.client.post(close, json={"disposition": "refund_promised"}, headers=AS_AGENT)
    assert closed.status_code == 200, closed.text
    body = closed.json()
    assert body["ended_by"] == "agent" and body["disposition"] == "refund_promised"
    events = await wait_for(svc, session_id, of_type("session.summary"))
    kinds = [e.event for e in events]
    assert kinds.index("handoff.released") < kinds.index("session.archived")
    assert events[-1].data == body
    handoff = (await svc.client.get(f"/v1/sessions/{session_id}/handoff")).json()
    assert handoff["status"] == "closed"
    session = (await svc.client.get(f"/v1/sessions/{session_id}")).json()
    assert session["status"] == "archived"
    assert (await svc.client.get(f"/v1/sessions/{session_id}/summary")).json() == body
    assert fake_llm.requests == []


async def test_an_idle_session_is_wrapped_up_when_archived(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("Which order do you mean?"))
    session_id = await new_session(svc)
    assert (await say(svc, session_id, "I have a question about my order")).status_code == 200
    archived = await svc.runtime.conversation.archive_idle(time.time() + 1)
    assert session_id in archived
    body = (await svc.client.get(f"/v1/sessions/{session_id}/summary")).json()
    assert body["ended_by"] == "idle" and body["disposition"] == "abandoned"
    assert body["open_items"] == ["unanswered question: Which order do you mean?"]
