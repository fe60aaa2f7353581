"""Whole conversations with the real NLU pipeline (trained models in models/nlu) deciding."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pytest

from app.llm.gateway import ModelRequest, collect
from app.llm.local import templates as t
from app.llm.local.model import LocalModel
from app.llm.local.policy import AskForSlot, CallTool, Decision, DialoguePolicy, Handoff, Reply
from app.llm.local.templates import Lang
from app.nlu.pipeline import NLUPipeline
from app.settings import PROJECT_ROOT
from tests.llm.local.chat import (
    ALL_TOOLS,
    SHIPMENT,
    SHIPPED_ORDER,
    assistant,
    failure,
    success,
    tool_call,
    tool_result,
    user,
)

MODEL_DIR = PROJECT_ROOT / "models" / "nlu"
ORDER = "202405201234"


@pytest.fixture(scope="module")
def nlu() -> Iterator[NLUPipeline]:
    pipeline = NLUPipeline.load(MODEL_DIR, today=lambda: date(2024, 5, 22))
    yield pipeline
    pipeline.close()


@dataclass
class Chat:
    """Plays the turn loop: tool calls are answered from `results` (by tool name)."""

    policy: DialoguePolicy
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def say(self, text: str) -> Decision:
        self.messages.append(user(text))
        for round_no in range(8):
            decision = self.policy.decide(self.messages, ALL_TOOLS)
            if not isinstance(decision, CallTool):
                self.messages.append(assistant(decision.text))
                return decision
            self.calls.append((decision.name, decision.arguments))
            call_id = f"call_{len(self.calls)}_{round_no}"
            self.messages.append(tool_call(decision.name, decision.arguments, call_id))
            self.messages.append(tool_result(call_id, self.results[decision.name]))
        raise AssertionError(f"no answer after 8 rounds: {self.calls}")


def chat(nlu: NLUPipeline, **results: dict[str, Any]) -> Chat:
    return Chat(DialoguePolicy(nlu), results)


@pytest.mark.parametrize(
    ("opening", "lang", "status"),
    [("我的订单到哪了", "zh", "已发货"), ("Where is my order?", "en", "is shipped")],
)
def test_order_status_asks_for_the_number_then_answers_from_the_result(
    nlu: NLUPipeline, opening: str, lang: str, status: str
) -> None:
    c = chat(nlu, query_order_status=success(SHIPPED_ORDER))
    assert c.say(opening) == AskForSlot(
        t.ASK["order_status"]["order_id"][lang], "order_status", "order_id"
    )
    reply = c.say(ORDER)
    assert c.calls == [("query_order_status", {"order_id": ORDER})]
    assert isinstance(reply, Reply) and reply.intent == "order_status"
    assert ORDER in reply.text and status in reply.text and "SF123456789CN" in reply.text


@pytest.mark.parametrize(
    ("opening", "answer", "lang"),
    [("我要退款", f"订单号是{ORDER}", "zh"), ("I want a refund", f"It is {ORDER}", "en")],
)
def test_an_answer_to_the_question_continues_the_refund(
    nlu: NLUPipeline, opening: str, answer: str, lang: str
) -> None:
    # Alone, the answer reads as an order-status question; after the question it is the
    # order number for the refund.
    data = {
        "refund_id": "RF1",
        "order_id": ORDER,
        "amount": 299.0,
        "currency": "CNY",
        "status": "approved",
    }
    c = chat(nlu, request_refund=success(data))
    assert c.say(opening) == AskForSlot(
        t.ASK["refund_request"]["order_id"][lang], "refund_request", "order_id"
    )
    reply = c.say(answer)
    assert c.calls == [("request_refund", {"order_id": ORDER})]
    assert isinstance(reply, Reply) and "RF1" in reply.text


def test_tracking_a_parcel_by_its_number_in_chinese(nlu: NLUPipeline) -> None:
    c = chat(nlu, track_shipment=success(SHIPMENT))
    first = c.say("我的快递到哪了")
    assert isinstance(first, AskForSlot) and first.slot == "tracking_or_order"
    reply = c.say("SF123456789CN")
    assert c.calls == [("track_shipment", {"tracking_number": "SF123456789CN"})]
    assert isinstance(reply, Reply) and reply.text.startswith("您的包裹")


def test_tracking_by_order_number_goes_through_the_order(nlu: NLUPipeline) -> None:
    c = chat(nlu, query_order_status=success(SHIPPED_ORDER), track_shipment=success(SHIPMENT))
    first = c.say("Track my package")
    assert isinstance(first, AskForSlot)
    reply = c.say(ORDER)
    assert [name for name, _ in c.calls] == ["query_order_status", "track_shipment"]
    assert isinstance(reply, Reply) and "in transit" in reply.text


def test_a_missing_order_is_reported_not_invented(nlu: NLUPipeline) -> None:
    c = chat(nlu, query_order_status=failure("order_not_found", "no such order"))
    reply = c.say(f"我的订单{'202405209999'}到哪了")
    assert reply == Reply("没有找到订单 202405209999，请核对订单号后再告诉我。", "order_status")


def test_password_reset_in_english(nlu: NLUPipeline) -> None:
    data = {"status": "reset_link_sent", "channel": "sms", "masked_phone": "138****8000"}
    c = chat(nlu, reset_password=success(data))
    first = c.say("I forgot my password")
    assert isinstance(first, AskForSlot) and first.slot == "phone"
    reply = c.say("13800138000")
    assert c.calls == [("reset_password", {"phone": "13800138000"})]
    assert reply == Reply(
        "A password reset link has been sent by SMS to 138****8000.", "password_reset"
    )


def test_changing_the_phone_number_in_chinese(nlu: NLUPipeline) -> None:
    data = {"field": "phone", "status": "updated", "masked_value": "139****5678"}
    c = chat(nlu, update_contact_info=success(data))
    first = c.say("我想改一下手机号")
    assert first == AskForSlot(t.ASK["update_contact"]["phone"]["zh"], "update_contact", "phone")
    reply = c.say("13912345678")
    assert c.calls == [("update_contact_info", {"field": "phone", "value": "13912345678"})]
    assert reply == Reply("您的手机号已更新为 139****5678。", "update_contact")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你好", Reply(t.GREETING["zh"], "greeting")),
        ("Hi", Reply(t.GREETING["en"], "greeting")),
        ("再见", Reply(t.GOODBYE["zh"], "goodbye")),
        ("转人工", Handoff(t.HANDOFF["human_handoff"]["zh"], "human_handoff")),
        ("I want to talk to a human", Handoff(t.HANDOFF["human_handoff"]["en"], "human_handoff")),
        ("what is the weather", Handoff(t.HANDOFF["out_of_scope"]["en"], "out_of_scope")),
    ],
)
def test_replies_without_tools(nlu: NLUPipeline, text: str, expected: Decision) -> None:
    assert chat(nlu).say(text) == expected


async def test_the_model_serves_the_real_pipeline(nlu: NLUPipeline) -> None:
    gateway = LocalModel(nlu)
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in sorted(ALL_TOOLS)
    ]
    asked = await collect(
        gateway.stream(ModelRequest(messages=[user("我的订单到哪了")], tools=tools))
    )
    assert asked.text == t.ASK["order_status"]["order_id"]["zh"]
    messages = [user("我的订单到哪了"), assistant(asked.text), user(ORDER)]
    call = await collect(gateway.stream(ModelRequest(messages=messages, tools=tools)))
    assert [(c.name, c.arguments) for c in call.tool_calls] == [
        ("query_order_status", '{"order_id": "202405201234"}')
    ]


def test_a_vague_complaint_asks_what_happened_then_logs_it(nlu: NLUPipeline) -> None:
    data = {"ticket_id": "TK-9", "status": "open", "category": "complaint", "priority": "normal"}
    c = chat(nlu, create_ticket=success(data))
    first = c.say("I want to file a complaint")
    assert first == AskForSlot(t.ASK["complaint"]["summary"]["en"], "complaint", "summary")
    reply = c.say("The courier was rude and left my parcel outside in the rain")
    summary = (
        "I want to file a complaint The courier was rude and left my parcel outside in the rain"
    )
    assert c.calls == [("create_ticket", {"category": "complaint", "summary": summary})]
    assert reply == Reply(
        "I've logged your complaint as ticket TK-9; we'll follow up soon.", "complaint"
    )


def test_a_return_in_chinese(nlu: NLUPipeline) -> None:
    data = {
        "return_id": "RT-1",
        "order_id": "202405201235",
        "status": "created",
        "label_url": "https://example.com/labels/RT-1.pdf",
    }
    c = chat(nlu, request_return=success(data))
    first = c.say("我要退货")
    assert first == AskForSlot(
        t.ASK["return_request"]["order_id"]["zh"], "return_request", "order_id"
    )
    reply = c.say("202405201235")
    assert c.calls == [("request_return", {"order_id": "202405201235"})]
    assert isinstance(reply, Reply) and "RT-1" in reply.text and "RT-1.pdf" in reply.text


def test_changing_the_email_in_english(nlu: NLUPipeline) -> None:
    data = {"field": "email", "status": "updated", "masked_value": "n***@example.com"}
    c = chat(nlu, update_contact_info=success(data))
    first = c.say("I want to change my email")
    assert first == AskForSlot(t.ASK["update_contact"]["email"]["en"], "update_contact", "email")
    reply = c.say("new.mail@example.com")
    assert c.calls == [("update_contact_info", {"field": "email", "value": "new.mail@example.com"})]
    assert reply == Reply(
        "Your email address has been updated to n***@example.com.", "update_contact"
    )


SENT = {"message_id": "<idem_1@example.com>", "status": "sent"}


@pytest.mark.parametrize(
    "text",
    [
        "Please email me the receipt at han.work@example.com",
        "请把发票发到我的邮箱 han.work@example.com",
        "could you send the order confirmation to han.work@example.com?",
    ],
)
def test_email_me_x_at_an_address_sends_an_email_and_changes_nothing(
    nlu: NLUPipeline, text: str
) -> None:
    c = chat(nlu, send_email=success(SENT), update_contact_info=success({}))
    reply = c.say(text)
    assert [(name, args["to"]) for name, args in c.calls] == [
        ("send_email", "han.work@example.com")
    ]
    assert isinstance(reply, Reply) and reply.intent == "email_request"
    assert "han.work@example.com" in reply.text


def test_checking_an_order_then_emailing_it_sends_the_orders_facts(nlu: NLUPipeline) -> None:
    c = chat(nlu, query_order_status=success(SHIPPED_ORDER), send_email=success(SENT))
    c.say(f"check order {ORDER}")
    c.say("can you send the order confirmation to my email")
    assert c.calls == [("query_order_status", {"order_id": ORDER})]  # asked for the address
    reply = c.say("han.work@example.com")
    name, args = c.calls[-1]
    assert (name, args["to"]) == ("send_email", "han.work@example.com")
    assert "Your order 202405201234 is shipped." in args["body"]
    assert "Total CNY 299.00." in args["body"]
    assert isinstance(reply, Reply) and "han.work@example.com" in reply.text


@pytest.mark.parametrize(
    ("opening", "answer", "lang"),
    [
        (f"我要退款，订单{ORDER}", "948", "zh"),
        (f"I want a refund for order {ORDER}", "1786", "en"),
        (f"I want a refund for order {ORDER}", "¥948.50", "en"),
    ],
)
def test_a_bare_amount_answers_the_refunds_own_question(
    nlu: NLUPipeline, opening: str, answer: str, lang: str
) -> None:
    # Alone, "948" reads as anything (password_reset, 0.56); after "how much should be
    # refunded?" it can only be the amount.
    policy = DialoguePolicy(nlu)
    messages = [
        user(opening),
        tool_call("request_refund", {"order_id": ORDER}, "call_1"),
        tool_result("call_1", failure("amount_required")),
    ]
    ask = policy.decide(messages, ALL_TOOLS - {"query_order_status"})
    assert isinstance(ask, Reply) and ask.text == t.ERROR_CODE["amount_required"][lang][0].format(
        order_id=ORDER
    )
    messages += [assistant(ask.text), user(answer)]
    understood = policy.understand_messages(messages)
    assert understood.intent == "refund_request" and understood.continued
    assert understood.language == lang
    amount = float(answer.lstrip("¥"))
    assert policy.decide(messages, ALL_TOOLS) == CallTool(
        "request_refund", {"order_id": ORDER, "amount": amount}, "refund_request"
    )


def test_a_bare_number_without_the_amount_question_is_not_an_amount(nlu: NLUPipeline) -> None:
    policy = DialoguePolicy(nlu)
    messages = [user("我要退款"), assistant(t.ASK["refund_request"]["order_id"]["zh"]), user("948")]
    assert "amount" not in policy.understand_messages(messages).memory.slots


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        (f"Please refund 100 on order {ORDER}", 100.0),
        (f"订单{ORDER}退款100", 100.0),
        (f"I want 948 refunded for order {ORDER}", 948.0),
        (f"退款88.5，订单{ORDER}", 88.5),
    ],
)
def test_a_refund_amount_without_a_unit_is_the_amount_not_the_whole_order(
    nlu: NLUPipeline, text: str, amount: float
) -> None:
    # Unitless amounts are not tagged; refunding the whole order instead is a write nobody
    # asked for.
    decision = DialoguePolicy(nlu).decide([user(text)], ALL_TOOLS)
    assert decision == CallTool(
        "request_refund", {"order_id": ORDER, "amount": amount}, "refund_request"
    )


def test_a_quantity_in_a_refund_request_is_not_an_amount(nlu: NLUPipeline) -> None:
    decision = DialoguePolicy(nlu).decide([user(f"我买了2件，想退款，订单{ORDER}")], ALL_TOOLS)
    assert decision == CallTool("request_refund", {"order_id": ORDER}, "refund_request")


def test_a_stated_preference_is_acknowledged_not_handed_off(nlu: NLUPipeline) -> None:
    c = chat(nlu)
    assert c.say("以后都用简体中文跟我沟通") == Reply(
        "好的，已记下：以后用简体中文和您沟通。", "memory"
    )
    assert c.calls == []


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("查一下运单SF999999999CN", f"那用订单号查吧，{ORDER}"),
        ("Track SF999999999CN please", f"Hmm, try the order number instead, {ORDER}"),
    ],
)
def test_an_order_number_after_an_unknown_tracking_number_tracks_the_order(
    nlu: NLUPipeline, first: str, then: str
) -> None:
    c = chat(nlu, track_shipment=failure("shipment_not_found"))
    c.say(first)
    c.results.update(track_shipment=success(SHIPMENT), query_order_status=success(SHIPPED_ORDER))
    reply = c.say(then)
    assert c.calls[1:] == [
        ("query_order_status", {"order_id": ORDER}),
        ("track_shipment", {"tracking_number": "SF123456789CN"}),
    ]
    assert "SF123456789CN" in reply.text


TICKET = {"ticket_id": "TK00000073", "status": "open", "category": "complaint"}


def test_a_long_complaint_the_classifier_is_unsure_of_creates_a_ticket(nlu: NLUPipeline) -> None:
    c = chat(nlu, create_ticket=success(TICKET))
    text = "我要投诉，订单202405201235显示已经签收了，可我根本没收到，东西丢了"
    c.say(text)
    assert c.calls == [
        (
            "create_ticket",
            {
                "category": "complaint",
                "summary": text,
                "order_id": "202405201235",
                "priority": "high",
            },
        )
    ]


def test_a_story_answering_describe_it_is_the_complaint_not_a_tracking_request(
    nlu: NLUPipeline,
) -> None:
    c = chat(nlu, create_ticket=success(TICKET))
    c.say("我要投诉")
    c.say("快递员没有打电话就把包裹扔在门口，订单202405201235，差点丢了")
    assert [name for name, _ in c.calls] == ["create_ticket"]
    assert "priority" not in c.calls[0][1]  # nearly lost is not lost


def test_a_clear_request_answering_describe_it_still_switches(nlu: NLUPipeline) -> None:
    c = chat(nlu, query_order_status=success(SHIPPED_ORDER))
    c.say("I want to make a complaint")
    c.say(f"Before that, what's the status of order {ORDER}?")
    assert c.calls == [("query_order_status", {"order_id": ORDER})]


# -- questions about a rule (issue 27): answered, never acted on ------------------------------

_WRITES = {"request_refund", "request_return", "create_ticket", "reset_password"}


@pytest.mark.parametrize(
    ("lookup", "question", "lang"),
    [
        (f"订单{ORDER}到了吗", "退货运费谁出", "zh"),
        (f"Has order {ORDER} arrived?", "What is your return policy?", "en"),
        (f"帮我查一下订单{ORDER}", "退款多久能到账", "zh"),
        (f"Where is order {ORDER}?", "How long does a refund take?", "en"),
    ],
)
def test_a_question_right_after_an_order_lookup_never_writes(
    nlu: NLUPipeline, lookup: str, question: str, lang: Lang
) -> None:
    c = chat(nlu, query_order_status=success(SHIPPED_ORDER))
    c.say(lookup)
    reply = c.say(question)
    assert reply == Reply(t.POLICY_UNKNOWN[lang], "policy_question")
    # The order number given after the question, as if it had been asked for: a lookup at most.
    c.say(ORDER)
    assert {name for name, _ in c.calls} == {"query_order_status"}


@pytest.mark.parametrize(
    ("opening", "question", "lang"),
    [
        ("我要退款", f"订单{ORDER}的退款多久能到账", "zh"),
        ("I want a refund", f"how long does a refund take for order {ORDER}?", "en"),
    ],
)
def test_a_question_carrying_the_asked_order_number_does_not_answer_the_refund(
    nlu: NLUPipeline, opening: str, question: str, lang: Lang
) -> None:
    c = chat(nlu)
    assert isinstance(c.say(opening), AskForSlot)
    assert c.say(question) == Reply(t.POLICY_UNKNOWN[lang], "policy_question")
    assert c.calls == []


@pytest.mark.parametrize(
    ("question", "yes", "lang"),
    [("发票怎么开", "好的", "zh"), ("Do you ship to Hong Kong?", "yes please", "en")],
)
def test_yes_to_the_offered_colleague_is_a_handoff_the_nlu_channel_reports(
    nlu: NLUPipeline, question: str, yes: str, lang: Lang
) -> None:
    c = chat(nlu)
    c.say(question)
    assert c.say(yes) == Handoff(t.HANDOFF["human_handoff"][lang], "human_handoff")
    folded = c.policy.understand_messages(c.messages[:-1])
    assert (folded.intent, folded.continued) == ("human_handoff", True)


def test_anything_but_yes_after_the_offer_is_read_as_itself(nlu: NLUPipeline) -> None:
    c = chat(nlu, query_order_status=success(SHIPPED_ORDER))
    c.say("会员积分怎么用")
    reply = c.say(f"好的，那帮我查一下订单{ORDER}")
    assert isinstance(reply, Reply) and reply.intent == "order_status"
    assert not _WRITES & {name for name, _ in c.calls}
