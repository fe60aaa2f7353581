"""Memory and the context budget through the whole service, with the fake model over HTTP."""

from __future__ import annotations

import json
from typing import Any

from app.api.testing import LiveService, serve, stream_turn
from app.llm.testing import FakeLLMServer, Reply
from tests.conftest import new_session

PREFERENCE = "以后都用简体中文回复我，发票也请发PDF"


def system_text(request: Any) -> str:
    return "\n".join(m["content"] for m in request.messages if m["role"] == "system")


async def test_a_preference_from_one_session_is_used_in_the_next(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("好的，记住了。"), Reply("好的，按您的偏好处理。"), Reply("OK"))
    first = await new_session(service, "cust_0001")
    await service.client.post(f"/v1/sessions/{first}/messages", json={"content": PREFERENCE})
    stored = (await service.client.get("/v1/users/cust_0001/memories")).json()["items"]
    assert stored, "the preference was not remembered"
    assert any("PDF" in json.dumps(m, ensure_ascii=False) for m in stored)

    second = await new_session(service, "cust_0001")  # a new session, same customer
    events = await stream_turn(service.client, second, "还是按我之前的偏好来开发票")
    recalled = [e for e in events if e.event == "memory.recalled"]
    assert recalled, [e.event for e in events]
    keys = [item["key"] for item in recalled[0].data["items"]]
    assert "preference.invoice_format" in keys  # what was used (the event carries no values)
    assert "PDF" not in json.dumps(recalled[0].data)
    context = system_text(fake_llm.requests[-1])
    assert "PDF" in context
    assert "may be outdated" in context  # fenced as memory, to be confirmed

    # Another customer asking the same never sees it.
    other = await new_session(service, "cust_0002")
    events = await stream_turn(service.client, other, "还是按我之前的偏好来开发票")
    assert not any(e.event == "memory.recalled" for e in events)
    assert "PDF" not in system_text(fake_llm.requests[-1])
    assert (await service.client.get("/v1/users/cust_0002/memories")).json()["items"] == []


async def test_small_talk_is_not_remembered(service: LiveService, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Reply("听起来不错！"))
    session_id = await new_session(service, "cust_0003")
    await service.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "今天想吃面"})
    assert (await service.client.get("/v1/users/cust_0003/memories")).json()["items"] == []


async def test_forget_that_in_conversation(service: LiveService, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Reply("好的。"), Reply("已删除。"))
    session_id = await new_session(service, "cust_0004")
    await service.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": "记住：我的快递只要顺丰"}
    )
    assert (await service.client.get("/v1/users/cust_0004/memories")).json()["items"]
    events = await stream_turn(service.client, session_id, "忘掉这个吧")
    forgotten = [e for e in events if e.event == "memory.forgotten"]
    assert forgotten and forgotten[0].data["count"] >= 1
    assert (await service.client.get("/v1/users/cust_0004/memories")).json()["items"] == []
    assert "deleted for good" in system_text(fake_llm.requests[-1])


async def test_operator_entered_fact_newer_wins(service: LiveService) -> None:
    url = "/v1/users/cust_0005/memories"
    first = await service.client.post(url, json={"key": "contact.email", "value": "a@example.com"})
    assert first.status_code in (200, 201), first.text
    second = await service.client.post(url, json={"key": "contact.email", "value": "b@example.com"})
    assert second.status_code in (200, 201)
    items = (await service.client.get(url, params={"key": "contact.email"})).json()["items"]
    assert len(items) == 1 and items[0]["value"] == "b@example.com"
    history = (await service.client.get(f"{url}/{items[0]['id']}/history")).json()["items"]
    assert len(history) == 2


async def test_the_goal_survives_forty_turns_within_the_budget(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    goal = "我要把订单202405201234的收货地址改到上海浦东新区世纪大道100号"
    settings = make_settings(context_budget_tokens=1500)
    fake_llm.default = Reply("好的，我们继续处理您的请求，请问还有其他需要补充的信息吗")
    async with serve(settings) as svc:
        session_id = await new_session(svc, "cust_0006")
        await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": goal})
        for i in range(2, 41):
            text = f"第{i}轮：再确认一下细节，编号{i:03d}，麻烦您耐心核对一下这一轮的信息是否都准确"
            response = await svc.client.post(
                f"/v1/sessions/{session_id}/messages", json={"content": text}
            )
            assert response.status_code == 200
        snapshot = await svc.runtime.conversation.turns.db.fetchone(
            "SELECT summary, summary_version, summarized_turns FROM session_snapshots"
            " WHERE session_id = ?",
            (session_id,),
        )
    last = fake_llm.requests[-1]
    assert goal in system_text(last)  # turn 1's goal, at turn 40
    sent_tokens = sum(len(json.dumps(m, ensure_ascii=False)) for m in last.messages)
    assert sent_tokens < 1500 * 4  # well inside the budget, not forty turns' worth
    assert "编号040" in json.dumps(last.messages, ensure_ascii=False)  # recent turns kept
    assert snapshot is not None
    assert snapshot["summary_version"] >= 1 and snapshot["summarized_turns"] >= 10
    assert snapshot["summary"]
