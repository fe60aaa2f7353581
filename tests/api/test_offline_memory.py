"""What the offline model's conversations teach memory, through the whole service: contact
details a tool confirmed or refused, preferences said as "remember ...", and replies that
acknowledge and use what is remembered."""

from __future__ import annotations

from typing import Any

from app.testing import LiveService, stream_turn
from tests.api.test_offline_refunds import calls as tools
from tests.api.test_offline_refunds import offline, reply_text
from tests.conftest import new_session

__all__ = ["offline"]  # the fixture, shared with the refund conversations


async def memories(svc: LiveService, user: str) -> dict[str, dict[str, Any]]:
    items = (await svc.client.get(f"/v1/users/{user}/memories")).json()["items"]
    return {str(m["key"]): m for m in items if m.get("key")}


async def test_a_phone_the_tool_updated_is_stored_as_confirmed(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    await stream_turn(offline.client, session_id, "把手机号改成13912345678")
    done = await stream_turn(offline.client, session_id, "是")
    assert tools(done) == [("update_contact_info", "success")]
    phone = (await memories(offline, "cust_0001"))["contact.phone"]
    assert (phone["value"], phone["confidence"], phone["source"]) == ("13912345678", 1.0, "tool")


async def test_a_phone_the_tool_rejected_is_not_stored(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    await stream_turn(offline.client, session_id, "我的手机号是13700000000，帮我重置密码")
    refused = await stream_turn(offline.client, session_id, "是")
    [(tool, status)] = tools(refused)
    assert (tool, status) == ("reset_password", "error")
    assert "不一致" in reply_text(refused)  # phone_mismatch
    stored = await memories(offline, "cust_0001")
    # Heard as stated when asked for (0.8), then refused by the tool: no longer held as theirs.
    held = stored.get("contact.phone")
    assert held is None or held["value"] != "13700000000" or held["status"] == "rejected"
    recalled = await stream_turn(offline.client, session_id, "我的手机号是多少")
    assert "13700000000" not in str([e.data for e in recalled])


async def test_remember_that_i_prefer_email_stores_the_preference(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    await stream_turn(
        offline.client, session_id, "Please remember that I prefer to be contacted by email"
    )
    stored = await memories(offline, "cust_0001")
    assert stored["preference.contact_channel"]["value"] == "email"


async def test_remember_and_forget_are_stored_and_acknowledged(offline: LiveService) -> None:
    session_id = await new_session(offline, "cust_0001")
    said = await stream_turn(offline.client, session_id, "记住：我下午三点以后才方便接电话")
    assert reply_text(said) == "好的，我记住了：您下午三点以后才方便接电话。"
    items = (await offline.client.get("/v1/users/cust_0001/memories")).json()["items"]
    assert [m["value"] for m in items] == ["我下午三点以后才方便接电话"]

    forgot = await stream_turn(offline.client, session_id, "忘掉这个")
    [event] = [e for e in forgot if e.event == "memory.forgotten"]
    assert event.data["count"] == 1
    assert reply_text(forgot) == "好的，已经删除了，我不会再记着这条信息。"
    assert (await offline.client.get("/v1/users/cust_0001/memories")).json()["items"] == []

    english = await stream_turn(
        offline.client, session_id, "Please remember that I prefer to be contacted by email"
    )
    assert reply_text(english) == (
        "Got it, I'll remember that you prefer to be contacted by email."
    )
    assert tools(english) == []  # not a request to send an email


async def test_a_remembered_courier_is_used_when_a_return_is_created(
    offline: LiveService,
) -> None:
    first = await new_session(offline, "cust_0001")
    await stream_turn(offline.client, first, "记住：我喜欢顺丰")
    assert (await memories(offline, "cust_0001"))["preference.courier"]["value"] == "顺丰"

    second = await new_session(offline, "cust_0001")  # another day, another session
    asked = await stream_turn(offline.client, second, "我要退货，订单202405201235")
    assert reply_text(asked).startswith("请确认")  # read back first (issue 27)
    events = await stream_turn(offline.client, second, "是的")
    assert tools(events) == [("request_return", "success")]
    assert "偏好顺丰" in reply_text(events)
