"""The whole service with no API key: hermes/local, the real NLU models, the demo tools,
over HTTP and SSE; the dual channel in front of a remote model; falling back to local."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.llm.testing import Fail, FakeLLMServer, Reply
from app.testing import LiveService, serve, stream_turn
from tests.conftest import new_session


@pytest.fixture
async def offline(make_settings: Any) -> AsyncIterator[LiveService]:
    settings = make_settings(model="hermes/local", model_api_base=None, model_api_key=None)
    async with serve(settings) as svc:
        yield svc


def reply_text(events: list[Any]) -> str:
    completed = [e for e in events if e.event == "message.completed"]
    assert completed, [e.event for e in events]
    return str(completed[-1].data["text"])


async def test_chinese_order_status_conversation(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    first = await stream_turn(offline.client, session_id, "我的订单到哪了")
    assert first[-1].event == "turn.completed"
    intent = next(e for e in first if e.event == "intent.classified")
    assert intent.data["intent"] == "order_status"
    asked = reply_text(first)
    assert "订单号" in asked
    assert not any(e.event == "tool.started" for e in first)  # nothing to look up yet

    second = await stream_turn(offline.client, session_id, "202405201234")
    tool = next(e for e in second if e.event == "tool.completed")
    assert tool.data["tool"] == "query_order_status" and tool.data["status"] == "success"
    answer = reply_text(second)
    assert "202405201234" in answer
    assert "SF123456789CN" in answer or "发货" in answer or "运输" in answer
    deltas = [e for e in second if e.event == "message.delta"]
    assert len(deltas) > 1  # the offline model streams
    body = second[-1].data
    assert body["model"] == "hermes/local"


async def test_english_conversation_and_tracking(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    first = await stream_turn(offline.client, session_id, "Hi, where is my order?")
    assert "order number" in reply_text(first).lower()
    second = await stream_turn(offline.client, session_id, "it's 202405201234")
    answer = reply_text(second)
    assert "202405201234" in answer and "shipped" in answer.lower()
    third = await stream_turn(offline.client, session_id, "can you track parcel SF123456789CN")
    tool = next(e for e in third if e.event == "tool.completed")
    assert tool.data["tool"] == "track_shipment" and tool.data["status"] == "success"
    assert "SF123456789CN" in reply_text(third)


async def test_someone_elses_order_is_not_found(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    events = await stream_turn(offline.client, session_id, "查一下订单202405209999的状态")
    tool = next(e for e in events if e.event == "tool.completed")
    assert tool.data["status"] == "error"
    assert tool.data["result"]["error"]["code"] == "order_not_found"
    text = reply_text(events)
    assert "202405209999" in text and ("找不到" in text or "没有找到" in text or "未找到" in text)
    messages = (await offline.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    assert "paid" not in json.dumps(messages)  # nothing of the other customer's order leaked


async def test_handoff_for_out_of_scope(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    events = await stream_turn(offline.client, session_id, "帮我写一首关于月亮的诗")
    assert events[-1].event == "turn.completed"
    assert "人工" in reply_text(events)


async def test_intent_is_stored_on_the_user_message(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    await offline.client.post(
        f"/v1/sessions/{session_id}/messages",
        json={"content": "I want a refund for order 202405201235"},
    )
    messages = (await offline.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    nlu = messages[0]["metadata"]["nlu"]
    assert nlu["intent"] == "refund_request"
    assert {"name": "order_id", "value": "202405201235"} in [
        {"name": s["name"], "value": s["value"]} for s in nlu["slots"]
    ]


async def test_parse_endpoint(offline: LiveService) -> None:
    response = await offline.client.post(
        "/v1/nlu/parse", json={"text": "我的快递SF123456789CN到哪了"}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["intent"] == "track_shipment"
    assert len(body["ranking"]) == 3
    slot = body["slots"][0]
    assert slot["name"] == "tracking_number" and slot["value"] == "SF123456789CN"
    text = "我的快递SF123456789CN到哪了"
    assert text[slot["start"] : slot["end"]] == "SF123456789CN"


async def test_dual_channel_narrows_tools_and_prefills_slots(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("let me see"), Reply("sure"))
    session_id = await new_session(service, "cust_0001")
    await service.client.post(
        f"/v1/sessions/{session_id}/messages",
        json={"content": "what is the status of order 202405201234"},
    )
    request = fake_llm.requests[-1]
    always_on = {"get_current_time", "search_knowledge"}
    assert set(request.tool_names) == {"query_order_status", *always_on}
    notes = [m["content"] for m in request.messages if m["role"] == "system"]
    assert any("order_status" in n and "order_id=202405201234" in n for n in notes)
    # The next message is not understood with confidence: every tool is offered again, and
    # the order id from before is still handed over.
    await service.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "嗯嗯"})
    request = fake_llm.requests[-1]
    registry = service.runtime.registry
    assert service.runtime.nlu.parse("嗯嗯").confidence < 0.5  # a filler: not confident
    assert set(request.tool_names) == {t.spec.name for t in registry.all() if t.offered}
    notes = [m["content"] for m in request.messages if m["role"] == "system"]
    assert any("order_id=202405201234" in n for n in notes)


async def test_a_provider_outage_degrades_to_the_local_model(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(*[Fail(500) for _ in range(6)])
    async with serve(make_settings(local_fallback=True)) as svc:
        session_id = await new_session(svc, "cust_0001")
        events = await stream_turn(svc.client, session_id, "where is my order 202405201234")
    assert events[-1].event == "turn.completed", events[-1].data
    assert events[-1].data["model"] == "hermes/local"
    assert "202405201234" in reply_text(events)
    assert len(fake_llm.requests) >= 2  # the remote model was tried (and retried) first


async def test_a_bare_answer_continues_the_refund(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    first = await stream_turn(offline.client, session_id, "我要退款")
    assert "订单号" in reply_text(first)
    second = await stream_turn(offline.client, session_id, "202405201235")
    intent = next(e for e in second if e.event == "intent.classified")
    assert intent.data["intent"] == "refund_request"  # not order_status: it answered a question
    assert reply_text(second).startswith("请确认：为订单 202405201235 退款")  # read back first
    third = await stream_turn(offline.client, session_id, "是的")
    intent = next(e for e in third if e.event == "intent.classified")
    assert intent.data["intent"] == "refund_request"  # the yes continues the request it confirms
    tool = next(e for e in third if e.event == "tool.completed")
    assert tool.data["tool"] == "request_refund" and tool.data["status"] == "success"
    assert "202405201235" in reply_text(third)


async def test_a_bare_number_takes_the_conversations_language(offline: LiveService) -> None:
    for opening, lang in (("我的订单到哪了", "zh"), ("Where is my order?", "en")):
        session_id = await new_session(offline, "cust_0001")
        await stream_turn(offline.client, session_id, opening)
        events = await stream_turn(offline.client, session_id, "202405201234")
        intent = next(e for e in events if e.event == "intent.classified")
        assert intent.data["language"] == lang, opening
        url = f"/v1/sessions/{session_id}/messages"
        stored = (await offline.client.get(url)).json()["items"]
        [mine] = [m for m in stored if m["role"] == "user" and m["content"] == "202405201234"]
        assert mine["metadata"]["nlu"]["language"] == lang


async def test_replies_write_times_dates_and_money_the_customers_way(
    offline: LiveService,
) -> None:
    session_id = await new_session(offline, "cust_0001")
    zh = reply_text(await stream_turn(offline.client, session_id, "查一下快递 SF123456789CN"))
    assert "2024年5月21日 21:15" in zh and "T21:15" not in zh
    assert "预计送达：2024年5月23日。" in zh
    order = reply_text(await stream_turn(offline.client, session_id, "订单202405201234到哪了"))
    assert "合计 377.00元。" in order
    session_id = await new_session(offline, "cust_0001")
    en = reply_text(await stream_turn(offline.client, session_id, "track parcel SF123456789CN"))
    assert "May 21, 2024, 9:15 PM" in en and "Estimated delivery: May 23, 2024." in en
    order = reply_text(await stream_turn(offline.client, session_id, "where is order 202405201234"))
    assert "Total CNY 377.00." in order
