"""Refunds and returns are read back and run only on the customer's yes, as password resets are
(issue 27): the same confirmation, with hermes/local over HTTP, in both languages."""

from __future__ import annotations

from typing import Any

from app.llm.local.templates import READBACK_OPENINGS
from app.testing import LiveService, serve, stream_turn
from app.tools.policy.confirm import QUESTION
from tests.api.test_confirmation import final, of_type
from tests.api.test_trust import demo, refunds_on, tool_results
from tests.conftest import new_session

ORDER = "202405201235"  # cust_0001's delivered order of 89.00


def returns_on(svc: LiveService, order_id: str) -> int:
    with demo(svc) as conn:
        row = conn.execute("SELECT COUNT(*) FROM returns WHERE order_id = ?", (order_id,))
        return int(row.fetchone()[0])


async def test_a_refund_is_read_back_in_chinese_and_runs_on_yes(make_settings: Any) -> None:
    async with serve(make_settings(model="hermes/local")) as svc:
        session_id = await new_session(svc, "cust_0001")
        events = await stream_turn(svc.client, session_id, f"订单{ORDER}帮我退款")
        assert final(events) == (
            f"请确认：为订单 {ORDER} 退款，金额：89.00（整单金额）。"
            "请回复“是”或“不”：现在为您办理吗？"
        )
        assert of_type(events, "confirmation.requested")[0]["tool"] == "request_refund"
        assert refunds_on(svc, ORDER) == []
        events = await stream_turn(svc.client, session_id, "是的")
        assert tool_results(events)[0]["status"] == "success"
        assert refunds_on(svc, ORDER) == [89.0]
        assert "退款" in final(events)


async def test_a_refund_with_an_amount_is_read_back_in_english_and_no_files_nothing(
    make_settings: Any,
) -> None:
    async with serve(make_settings(model="hermes/local")) as svc:
        session_id = await new_session(svc, "cust_0001")
        events = await stream_turn(
            svc.client, session_id, f"I want a refund of 50 yuan for order {ORDER}"
        )
        assert final(events) == (
            f"Please confirm: refund 50.00 on order {ORDER}. Reply yes or no: shall I go ahead?"
        )
        events = await stream_turn(svc.client, session_id, "no")
        assert of_type(events, "confirmation.resolved")[0]["status"] == "declined"
        assert final(events).startswith("OK, I have not changed anything")
        assert not tool_results(events) and refunds_on(svc, ORDER) == []


async def test_a_corrected_amount_is_read_back_again_and_only_it_runs(make_settings: Any) -> None:
    async with serve(make_settings(model="hermes/local")) as svc:
        session_id = await new_session(svc, "cust_0001")
        await stream_turn(svc.client, session_id, f"I want a refund of 50 yuan for order {ORDER}")
        events = await stream_turn(
            svc.client, session_id, f"no, refund 20 yuan on order {ORDER} instead"
        )
        assert of_type(events, "confirmation.resolved")[0]["status"] == "superseded"
        assert "refund 20.00 on order" in final(events) and refunds_on(svc, ORDER) == []
        await stream_turn(svc.client, session_id, "yes")
        assert refunds_on(svc, ORDER) == [20.0]


async def test_a_return_is_read_back_in_both_languages_and_runs_only_on_yes(
    make_settings: Any,
) -> None:
    async with serve(make_settings(model="hermes/local")) as svc:
        session_id = await new_session(svc, "cust_0001")
        events = await stream_turn(svc.client, session_id, f"I want to return order {ORDER}")
        assert final(events) == (
            f"Please confirm: start a return of all the items in order {ORDER}. "
            "Reply yes or no: shall I go ahead?"
        )
        await stream_turn(svc.client, session_id, "no")
        assert returns_on(svc, ORDER) == 0

        session_id = await new_session(svc, "cust_0001")
        events = await stream_turn(svc.client, session_id, f"订单{ORDER}我要退货")
        assert final(events) == (
            f"请确认：为订单 {ORDER} 的全部商品办理退货。请回复“是”或“不”：现在为您办理吗？"
        )
        assert returns_on(svc, ORDER) == 0
        events = await stream_turn(svc.client, session_id, "确认")
        assert tool_results(events)[0]["status"] == "success"
        assert returns_on(svc, ORDER) == 1 and "退货" in final(events)


def test_the_offline_model_knows_how_a_read_back_begins() -> None:
    zh, en = READBACK_OPENINGS
    assert QUESTION["zh"].startswith(zh) and QUESTION["en"].startswith(en)
