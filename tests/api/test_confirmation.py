"""Confirm before changing the account: the runtime reads the change back, and only a yes in
the next turn runs it. Over HTTP with the fake model server and with hermes/local."""

from __future__ import annotations

from typing import Any

from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.testing import LiveService, SseEvent, serve, stream_turn, stream_turn_deciding
from tests.api.test_trust import demo, tool_results
from tests.conftest import new_session

NEW_EMAIL = "han.work@example.com"


def email_of(svc: LiveService, customer: str = "cust_0001") -> str:
    with demo(svc) as conn:
        return str(
            conn.execute("SELECT email FROM customers WHERE id = ?", (customer,)).fetchone()[0]
        )


def final(events: list[SseEvent]) -> str:
    return str(next(e.data["text"] for e in events if e.event == "message.completed"))


def of_type(events: list[SseEvent], kind: str) -> list[Any]:
    return [e.data for e in events if e.event == kind]


def change_email() -> ToolCalls:
    return ToolCalls(ToolCall("update_contact_info", {"field": "email", "value": NEW_EMAIL}))


async def test_a_contact_change_runs_only_after_a_yes(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(make_settings()) as svc:
        session_id = await new_session(svc, "cust_0001")
        fake_llm.enqueue(change_email())
        events = await stream_turn(svc.client, session_id, f"please change my email to {NEW_EMAIL}")
        assert events[-1].event == "turn.completed"
        assert final(events) == (
            "Please confirm: change the email address on your account to h***@example.com. "
            "Reply yes or no: shall I go ahead?"
        )
        asked = of_type(events, "confirmation.requested")
        assert asked[0]["tool"] == "update_contact_info" and NEW_EMAIL not in str(asked)
        assert len(fake_llm.requests) == 1  # the runtime asked, not the model
        assert email_of(svc) == "li.lei@example.com"

        fake_llm.enqueue(Reply("Your email address is updated."))
        events = await stream_turn(svc.client, session_id, "yes")
        assert of_type(events, "confirmation.resolved")[0]["status"] == "confirmed"
        assert tool_results(events)[0]["status"] == "success"
        assert final(events) == "Your email address is updated."
        assert email_of(svc) == NEW_EMAIL
        steps = (await svc.client.get(f"/v1/sessions/{session_id}/steps")).json()["items"]
        assert [s["name"] for s in steps if s["action_type"] == "ask_user"][:1] == ["ask_user"]


async def test_no_or_something_else_changes_nothing(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(make_settings()) as svc:
        session_id = await new_session(svc, "cust_0001")
        fake_llm.enqueue(change_email())
        await stream_turn(svc.client, session_id, f"change my email to {NEW_EMAIL}")
        calls_so_far = len(fake_llm.requests)
        events = await stream_turn(svc.client, session_id, "no")
        assert final(events).startswith("OK, I have not changed anything")
        assert of_type(events, "confirmation.resolved")[0]["status"] == "declined"
        assert len(fake_llm.requests) == calls_so_far  # no model needed to say so

        fake_llm.enqueue(change_email())
        await stream_turn(svc.client, session_id, f"change my email to {NEW_EMAIL}")
        fake_llm.enqueue(Reply("Your order 202405201234 has shipped."))
        events = await stream_turn(svc.client, session_id, "where is order 202405201234?")
        assert of_type(events, "confirmation.resolved")[0]["status"] == "superseded"
        fake_llm.enqueue(Reply("Glad to help."))
        events = await stream_turn(svc.client, session_id, "yes")  # nothing is pending now
        assert not tool_results(events) and final(events) == "Glad to help."
        assert email_of(svc) == "li.lei@example.com"


async def test_a_late_yes_changes_nothing(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    async with serve(make_settings(confirmation_timeout_s=0.001)) as svc:
        session_id = await new_session(svc, "cust_0001")
        fake_llm.enqueue(change_email())
        await stream_turn(svc.client, session_id, f"change my email to {NEW_EMAIL}")
        events = await stream_turn(svc.client, session_id, "yes")
        assert of_type(events, "confirmation.resolved")[0]["status"] == "expired"
        assert "expired" in final(events) and email_of(svc) == "li.lei@example.com"


async def test_a_password_reset_right_after_a_contact_change_needs_an_operator(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(make_settings()) as svc:
        session_id = await new_session(svc, "cust_0001")
        new_phone = {"field": "phone", "value": "13912345678"}
        fake_llm.enqueue(ToolCalls(ToolCall("update_contact_info", new_phone)))
        await stream_turn(svc.client, session_id, "change my phone number to 13912345678")
        fake_llm.enqueue(Reply("Updated."))
        await stream_turn(svc.client, session_id, "yes")

        fake_llm.enqueue(ToolCalls(ToolCall("reset_password", {"phone": "13912345678"})))
        events = await stream_turn(svc.client, session_id, "I forgot my password, reset it")
        assert "139****5678" in final(events)  # read back masked
        fake_llm.enqueue(Reply("A colleague declined the reset."))
        events = await stream_turn_deciding(svc.client, session_id, "yes", decision="reject")
        requested = of_type(events, "approval.requested")
        assert "follows update_contact_info" in requested[0]["reason"]
        assert tool_results(events)[0]["result"]["error"]["code"] == "approval_rejected"
        with demo(svc) as conn:
            resets = conn.execute(
                "SELECT COUNT(*) FROM password_resets WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
        assert resets == 0


async def test_offline_model_change_is_confirmed_in_chinese(make_settings: Any) -> None:
    async with serve(make_settings(model="hermes/local")) as svc:
        session_id = await new_session(svc, "cust_0001")
        events = await stream_turn(svc.client, session_id, f"把我的邮箱改成 {NEW_EMAIL}")
        assert final(events) == (
            "请确认：将您账户的邮箱改为 h***@example.com。请回复“是”或“不”：现在为您办理吗？"
        )
        assert email_of(svc) == "li.lei@example.com"
        events = await stream_turn(svc.client, session_id, "是的")
        assert tool_results(events)[0]["status"] == "success"
        assert email_of(svc) == NEW_EMAIL
        assert "h***@example.com" in final(events)


async def test_emailing_a_receipt_never_changes_the_account_unasked(make_settings: Any) -> None:
    async with serve(make_settings(model="hermes/local")) as svc:
        session_id = await new_session(svc, "cust_0001")
        events = await stream_turn_deciding(
            svc.client, session_id, f"Please email me the receipt at {NEW_EMAIL}", "reject"
        )
        # An email for an operator to approve, not a change of the account.
        assert [a["tool"] for a in of_type(events, "approval.requested")] == ["send_email"]
        assert not of_type(events, "confirmation.requested")
        assert email_of(svc) == "li.lei@example.com"
