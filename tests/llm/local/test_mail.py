"""`email_request` in the offline model: recipient, subject and body, and the replies."""

from __future__ import annotations

from typing import Any

import pytest

from app.llm.local import templates as t
from app.llm.local.mail import compose, latest_facts
from app.llm.local.policy import AskForSlot, CallTool, Decision, DialoguePolicy, Reply
from app.nlu.testing import ScriptedParser
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

ORDER = "202405201234"
OTHER_ORDER = "202405201235"
ADDRESS = "han.work@example.com"
SENT = success({"message_id": "<idem_1@example.com>", "status": "sent"})
EMAIL_ONLY = frozenset({"send_email", "get_current_time"})  # what narrowing offers


@pytest.fixture
def parser() -> ScriptedParser:
    p = ScriptedParser()
    p.on(f"Please email me the receipt at {ADDRESS}", "email_request", slots={"email": ADDRESS})
    p.on("email me the order confirmation too", "email_request")
    p.on("把订单详情发邮件给我", "email_request")
    p.on(f"请把发票发到我的邮箱 {ADDRESS}", "email_request", slots={"email": ADDRESS})
    # Answers to "which address?": alone, or in words the classifier takes for a contact change.
    p.on(ADDRESS, "update_contact", 0.99, slots={"email": ADDRESS})
    p.on(f"发到 {ADDRESS} 吧", "update_contact", 0.9, slots={"email": ADDRESS})
    p.on(f"to {ADDRESS} please", "update_contact", 0.7, slots={"email": ADDRESS})
    p.on(
        "fixed.address@example.com",
        "update_contact",
        0.99,
        slots={"email": "fixed.address@example.com"},
    )
    p.on(
        "change my email to old.one@example.com",
        "update_contact",
        slots={"email": "old.one@example.com"},
    )
    p.on(f"check order {ORDER}", "order_status", slots={"order_id": ORDER})
    p.on(f"查一下订单{ORDER}", "order_status", slots={"order_id": ORDER})
    p.on(f"now email me the details at {ADDRESS}", "email_request", slots={"email": ADDRESS})
    p.on(f"把订单详情发到 {ADDRESS}", "email_request", slots={"email": ADDRESS})
    p.on(
        f"email me the invoice for order {OTHER_ORDER} at {ADDRESS}",
        "email_request",
        slots={"order_id": OTHER_ORDER, "email": ADDRESS},
    )
    return p


def decide(parser: ScriptedParser, messages: list[dict[str, Any]], tools: Any = ALL_TOOLS) -> Any:
    return DialoguePolicy(parser).decide(messages, tools)


def drive(
    parser: ScriptedParser,
    messages: list[dict[str, Any]],
    results: dict[str, dict[str, Any]],
    tools: Any = ALL_TOOLS,
) -> tuple[Decision, list[tuple[str, dict[str, Any]]]]:
    """The turn loop: each call answered from `results`, until the model answers in words."""
    calls: list[tuple[str, dict[str, Any]]] = []
    policy = DialoguePolicy(parser)
    for round_no in range(8):
        decision = policy.decide(messages, tools)
        if not isinstance(decision, CallTool):
            messages.append(assistant(decision.text))
            return decision, calls
        calls.append((decision.name, decision.arguments))
        call_id = f"call_{len(messages)}_{round_no}"
        messages += [tool_call(decision.name, decision.arguments, call_id)]
        messages += [tool_result(call_id, results[decision.name])]
    raise AssertionError(f"no answer after 8 rounds: {calls}")


def order_lookup_turn(text: str, call_id: str = "call_lookup") -> list[dict[str, Any]]:
    return [
        user(text),
        tool_call("query_order_status", {"order_id": ORDER}, call_id),
        tool_result(call_id, success(SHIPPED_ORDER)),
        assistant("Your order 202405201234 is shipped."),
    ]


# -- the recipient -------------------------------------------------------------------------------


def test_the_address_in_the_request_is_the_recipient(parser: ScriptedParser) -> None:
    messages = [user(f"Please email me the receipt at {ADDRESS}")]
    decision = decide(parser, messages, EMAIL_ONLY)
    assert isinstance(decision, CallTool) and decision.intent == "email_request"
    assert decision.name == "send_email"
    assert decision.arguments["to"] == ADDRESS
    assert decision.arguments["subject"] == "Your requested receipt"
    assert "email you the receipt" in decision.arguments["body"]


@pytest.mark.parametrize(
    ("answer", "lang", "subject"),
    [
        (ADDRESS, "zh", "您要求的订单详情"),
        (f"发到 {ADDRESS} 吧", "zh", "您要求的订单详情"),
        (f"to {ADDRESS} please", "en", "Your requested order details"),  # the latest language
    ],
)
def test_without_an_address_it_asks_and_the_answer_is_the_recipient(
    parser: ScriptedParser, answer: str, lang: str, subject: str
) -> None:
    messages = [user("把订单详情发邮件给我")]
    ask = decide(parser, messages, EMAIL_ONLY)
    assert ask == AskForSlot(t.ASK["email_request"]["email"]["zh"], "email_request", "email")
    messages += [assistant(ask.text), user(answer)]
    # Read on its own the answer is a contact change; as an answer it is this email's address.
    assert DialoguePolicy(parser).understand_messages(messages).intent == "email_request"
    reply, calls = drive(parser, messages, {"send_email": SENT}, EMAIL_ONLY)
    assert [name for name, _ in calls] == ["send_email"]
    assert calls[0][1]["to"] == ADDRESS
    assert calls[0][1]["subject"] == subject
    sent = t.RESULT["email_request"]["success"][lang][0].format(to=ADDRESS, subject=subject)
    assert reply == Reply(sent, "email_request")


def test_an_address_from_an_earlier_request_is_never_reused(parser: ScriptedParser) -> None:
    messages = [user(f"Please email me the receipt at {ADDRESS}")]
    drive(parser, messages, {"send_email": SENT}, EMAIL_ONLY)
    messages.append(user("email me the order confirmation too"))
    ask = decide(parser, messages, EMAIL_ONLY)
    assert ask == AskForSlot(t.ASK["email_request"]["email"]["en"], "email_request", "email")


def test_an_address_given_for_a_contact_change_is_not_a_recipient(
    parser: ScriptedParser,
) -> None:
    messages = [
        user("change my email to old.one@example.com"),
        assistant("Your email address has been updated to o***@example.com."),
        user("把订单详情发邮件给我"),
    ]
    ask = decide(parser, messages, EMAIL_ONLY)
    assert isinstance(ask, AskForSlot) and ask.slot == "email"


# -- the body --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lookup", "asked", "facts"),
    [
        (
            f"check order {ORDER}",
            f"now email me the details at {ADDRESS}",
            ["Your order 202405201234 is shipped.", "Total CNY 299.00.", "SF123456789CN"],
        ),
        (
            f"查一下订单{ORDER}",
            f"把订单详情发到 {ADDRESS}",
            ["您的订单 202405201234 当前状态：已发货。", "合计 299.00元。", "SF123456789CN"],
        ),
    ],
)
def test_the_body_carries_the_latest_tool_result_of_the_conversation(
    parser: ScriptedParser, lookup: str, asked: str, facts: list[str]
) -> None:
    messages = [*order_lookup_turn(lookup), user(asked)]
    decision = decide(parser, messages, EMAIL_ONLY)
    assert isinstance(decision, CallTool) and decision.name == "send_email"
    body = decision.arguments["body"]
    for fact in facts:
        assert fact in body, body


def test_facts_about_another_order_stay_out_and_the_named_order_is_looked_up(
    parser: ScriptedParser,
) -> None:
    request = f"email me the invoice for order {OTHER_ORDER} at {ADDRESS}"
    # Only send_email offered (narrowing): the email names the order, with no facts about it.
    messages = [*order_lookup_turn(f"check order {ORDER}"), user(request)]
    alone = decide(parser, messages, EMAIL_ONLY)
    assert isinstance(alone, CallTool) and alone.name == "send_email"
    assert OTHER_ORDER in alone.arguments["body"] and ORDER not in alone.arguments["body"]
    assert "invoice details for order 202405201235" in alone.arguments["subject"]
    # With the lookup offered, the named order is read first and its facts go in.
    other = {**SHIPPED_ORDER, "order_id": OTHER_ORDER, "status": "delivered"}
    messages = [*order_lookup_turn(f"check order {ORDER}"), user(request)]
    _, calls = drive(parser, messages, {"query_order_status": success(other), "send_email": SENT})
    assert [name for name, _ in calls] == ["query_order_status", "send_email"]
    assert "Your order 202405201235 is delivered." in calls[1][1]["body"]


def test_an_order_that_cannot_be_found_is_answered_instead_of_emailed(
    parser: ScriptedParser,
) -> None:
    messages = [user(f"email me the invoice for order {OTHER_ORDER} at {ADDRESS}")]
    results = {"query_order_status": failure("order_not_found"), "send_email": SENT}
    reply, calls = drive(parser, messages, results)
    assert [name for name, _ in calls] == ["query_order_status"]
    assert OTHER_ORDER in reply.text and "couldn't find" in reply.text


def test_no_long_number_and_none_of_the_customers_words_go_into_the_email() -> None:
    card = "6222 0212 3456 7890 123"
    shipment = {**SHIPMENT, "events": [{"time": "2024-05-22", "description": f"card {card}"}]}
    facts = latest_facts(
        [
            user("where is SF123456789CN"),
            tool_call("track_shipment", {"tracking_number": "SF123456789CN"}, "c1"),
            tool_result("c1", success(shipment)),
        ]
    )
    said = f"my card is {card}, tell them I said hi, and email me the tracking details"
    subject, body = compose([said], facts, "en")
    assert subject == "Your requested tracking details"
    assert "card ****0123" in body and "6222" not in body and "7890" not in body
    assert "said hi" not in body and "said hi" not in subject
    assert "SF123456789CN" in body  # the facts are there, masked where they must be


def test_latest_facts_skips_failures_emails_unknown_tools_and_pruned_results() -> None:
    messages = [
        *order_lookup_turn(f"check order {ORDER}", "c1"),
        tool_call("track_shipment", {"tracking_number": "SF1"}, "c2"),
        tool_result("c2", failure("shipment_not_found")),
        tool_call("send_email", {"to": ADDRESS, "subject": "s", "body": "b"}, "c3"),
        tool_result("c3", SENT),
        tool_call("mcp__crm__lookup", {}, "c4"),
        tool_result("c4", success({"anything": 1})),
        tool_call("track_shipment", {"tracking_number": "SF2"}, "c5"),
        {"role": "tool", "tool_call_id": "c5", "content": "[track_shipment success; pruned…]"},
    ]
    facts = latest_facts(messages)
    assert facts is not None and facts.name == "query_order_status"
    assert latest_facts([user("hi")]) is None


@pytest.mark.parametrize(
    ("texts", "facts_tool", "subject"),
    [
        (["email me the refund confirmation"], None, "Your requested refund details"),
        (
            ["can you send the order confirmation to my email"],
            None,
            "Your requested order confirmation",
        ),
        (["请把发票发到我的邮箱"], None, "您要求的发票信息"),
        (["email me that"], "track_shipment", "Your requested tracking details"),
        (["email me that"], None, "Your requested information"),
        (["确认邮件没收到，能再发一次吗"], None, "您要求的确认信息"),
    ],
)
def test_the_subject_says_what_was_asked_for(
    texts: list[str], facts_tool: str | None, subject: str
) -> None:
    facts = None
    if facts_tool:
        facts = latest_facts(
            [
                tool_call(facts_tool, {"tracking_number": "SF1"}, "c"),
                tool_result("c", success(SHIPMENT)),
            ]
        )
    lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in texts[0]) else "en"
    assert compose(texts, facts, lang)[0] == subject


# -- the replies -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "lang", "words"),
    [
        (SENT, "en", f"The email has been sent to {ADDRESS}"),
        (SENT, "zh", f"邮件已发送至 {ADDRESS}"),
        (failure("approval_rejected"), "en", "declined it, so it was not sent"),
        (failure("approval_rejected"), "zh", "没有批准发送这封邮件"),
        (failure("approval_expired"), "en", "waiting for a colleague"),
        (failure("approval_expired"), "zh", "等待同事确认"),
        (failure("email_unavailable"), "en", "email service is unavailable"),
        (failure("email_unavailable"), "zh", "邮件服务暂时不可用"),
        (failure("email_rejected"), "en", "mail server refused"),
        (failure("invalid_arguments"), "zh", "邮箱地址好像不对"),
        (failure("timeout"), "en", "the email can't be sent right now"),
    ],
)
def test_each_outcome_has_its_own_reply(
    parser: ScriptedParser, result: dict[str, Any], lang: str, words: str
) -> None:
    text = (
        f"Please email me the receipt at {ADDRESS}"
        if lang == "en"
        else f"请把发票发到我的邮箱 {ADDRESS}"
    )
    reply, calls = drive(parser, [user(text)], {"send_email": result}, EMAIL_ONLY)
    assert len(calls) == 1  # never sent twice in a turn, whatever the outcome
    assert isinstance(reply, Reply) and words in reply.text, reply.text


def test_a_refused_address_can_be_corrected(parser: ScriptedParser) -> None:
    messages = [user(f"Please email me the receipt at {ADDRESS}")]
    reply, _ = drive(parser, messages, {"send_email": failure("email_rejected")}, EMAIL_ONLY)
    assert "check the email address" in reply.text  # worded as the question for the address
    messages.append(user("fixed.address@example.com"))
    _, calls = drive(parser, messages, {"send_email": SENT}, EMAIL_ONLY)
    assert [(name, args["to"]) for name, args in calls] == [
        ("send_email", "fixed.address@example.com")
    ]
