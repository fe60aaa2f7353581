"""RuleModel answers each request from its own messages: over HTTP through the real service and
the real fake model server, with the demo backend behind the tools."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.llm.testing import FakeLLMServer, RecordedRequest, Reply, ToolCall, ToolCalls
from app.llm.testing_rules import ASK_PHONE, RuleModel
from app.testing import LiveService, SseEvent, serve, stream_turn
from tests.conftest import new_session


def of_type(events: list[SseEvent], kind: str) -> list[Any]:
    return [e.data for e in events if e.event == kind]


def final(events: list[SseEvent]) -> str:
    return str(of_type(events, "message.completed")[-1]["text"])


def tool_calls(fake_llm: FakeLLMServer) -> list[tuple[str, str]]:
    return [
        (c["function"]["name"], c["function"]["arguments"])
        for r in fake_llm.requests
        for m in r.messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]


async def turn(svc: LiveService, customer: str, text: str) -> list[SseEvent]:
    return await stream_turn(svc.client, await new_session(svc, customer), text)


async def test_an_order_question_is_looked_up_and_answered_from_the_result(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.responder = RuleModel()
    async with serve(make_settings()) as svc:
        events = await turn(svc, "cust_0001", "where is my order 202405201234?")
    assert events[-1].event == "turn.completed"
    done = of_type(events, "tool.completed")
    assert [(d["tool"], d["status"]) for d in done] == [("query_order_status", "success")]
    assert final(events) == "Your order 202405201234 is shipped."
    assert len(fake_llm.requests) == 2


async def test_each_task_of_the_load_profile_takes_its_path(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.responder = RuleModel()
    async with serve(make_settings()) as svc:
        parcel = await turn(svc, "cust_0001", "where is my parcel SF123456789CN?")
        # Twelve digits inside a tracking number are not an order number.
        long_parcel = await turn(svc, "cust_0001", "Please track my package JD001234567890")
        complaint = await turn(
            svc, "cust_0001", "I want to complain: the courier left my parcel at the door"
        )
        before = len(fake_llm.requests)
        reset = await turn(svc, "cust_0001", "I forgot my password, can you reset it?")
        assert len(fake_llm.requests) == before + 1  # a one-call turn
    assert [d["tool"] for d in of_type(parcel, "tool.completed")] == ["track_shipment"]
    assert final(parcel) == "Parcel SF123456789CN is in_transit."
    assert [(d["tool"], d["status"]) for d in of_type(long_parcel, "tool.completed")] == [
        ("track_shipment", "success")
    ]
    ticket = of_type(complaint, "tool.completed")
    assert [(d["tool"], d["status"]) for d in ticket] == [("create_ticket", "success")]
    assert final(complaint).startswith("I have opened ticket TK")
    assert not of_type(reset, "tool.started") and final(reset) == ASK_PHONE


async def test_a_password_reset_waits_for_the_customers_yes(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.responder = RuleModel()
    async with serve(make_settings()) as svc:
        session_id = await new_session(svc, "cust_0001")
        await stream_turn(svc.client, session_id, "I forgot my password, please reset it")
        events = await stream_turn(
            svc.client, session_id, "reset my password, my number is 13800138000"
        )
        assert of_type(events, "confirmation.requested")[0]["tool"] == "reset_password"
        held = of_type(events, "tool.completed")[0]["result"]["error"]["code"]
        assert held == "confirmation_required"  # the runtime asks; nothing was sent
        events = await stream_turn(svc.client, session_id, "yes")
    assert of_type(events, "tool.completed")[0]["status"] == "success"
    assert final(events) == "A reset link is on its way to 138****8000."


async def test_it_never_calls_a_tool_the_turn_did_not_offer(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.responder = RuleModel()
    async with serve(make_settings()) as svc:
        events = await turn(
            svc, "cust_0001", "I can't log in to see order 202405201234, reset my password"
        )
    offered = fake_llm.requests[0].tool_names
    assert "query_order_status" not in offered  # a password question does not offer it
    assert tool_calls(fake_llm) == [] and final(events) == ASK_PHONE


async def test_many_sessions_at_once_each_get_their_own_answer(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    # Each session asks about its own order at the same moment; a shared script queue would
    # hand answers across sessions (and the other customer's order is "not found").
    fake_llm.responder = RuleModel(delay=0.05)
    orders = {"cust_0001": "202405201234", "cust_0002": "202405209999"}
    async with serve(make_settings()) as svc:
        results = await asyncio.gather(
            *(turn(svc, c, f"where is my order {o}?") for c, o in orders.items() for _ in "ab")
        )
    for (customer, order), events in zip(
        [(c, o) for c, o in orders.items() for _ in "ab"], results, strict=True
    ):
        assert of_type(events, "tool.completed")[0]["status"] == "success", customer
        assert final(events).startswith(f"Your order {order} is ")


def test_scripted_steps_come_before_the_rules() -> None:
    def ask(server: FakeLLMServer) -> str:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(f"{server.url}/chat/completions", json=body, timeout=10)
        return str(reply.json()["choices"][0]["message"]["content"])

    with FakeLLMServer(responder=RuleModel()) as server:
        server.enqueue(Reply("scripted"))
        assert ask(server) == "scripted"
        assert ask(server) == "How can I help you today?"
        server.responder = None
        assert ask(server) == "Hello from the fake model."
        server.reset()  # back to the responder it was built with
        assert ask(server) == "How can I help you today?"


def test_every_answer_waits_the_models_delay() -> None:
    model = RuleModel(delay=0.3)
    tools = [{"type": "function", "function": {"name": "query_order_status"}}]
    ask = {"messages": [{"role": "user", "content": "order 202405201234?"}], "tools": tools}
    call = model(RecordedRequest("m", ask, 0.0))
    assert call == ToolCalls(
        ToolCall("query_order_status", {"order_id": "202405201234"}), delay=0.3
    )
    result = '{"status": "error", "error": {"code": "order_not_found"}}'
    answered = {**ask, "messages": [*ask["messages"], {"role": "tool", "content": result}]}
    assert model(RecordedRequest("m", answered, 0.0)) == Reply(
        "Sorry, I could not do that just now (order_not_found).", delay=0.3
    )
