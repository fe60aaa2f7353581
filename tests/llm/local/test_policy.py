from __future__ import annotations

import json
from typing import Any

import pytest

from app.llm.local import templates as t
from app.llm.local.policy import AskForSlot, CallTool, Decision, DialoguePolicy, Handoff, Reply
from app.nlu.testing import ScriptedParser
from tests.llm.local.chat import (
    ALL_TOOLS,
    PAID_ORDER,
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


@pytest.fixture
def parser() -> ScriptedParser:
    p = ScriptedParser()
    p.on("我的订单到哪了", "order_status")
    p.on("Where is my order?", "order_status")
    p.on(ORDER, "out_of_scope", 0.3, slots={"order_id": ORDER})
    p.on(f"订单号是{ORDER}", "order_status", 0.6, slots={"order_id": ORDER})
    p.on(f"我的订单{ORDER}到哪了", "order_status", slots={"order_id": ORDER})
    p.on(f"Where is order {ORDER}?", "order_status", slots={"order_id": ORDER})
    p.on("我要退货", "return_request")
    p.on("I'd like to return it", "return_request")
    p.on("你好", "greeting")
    p.on("Hello there", "greeting")
    p.on("再见", "goodbye")
    p.on("bye", "goodbye")
    p.on("转人工", "human_handoff")
    p.on("What's the weather like?", "out_of_scope", 0.9)
    p.on("嗯那个呃", "order_status", 0.3)
    return p


def decide(
    parser: ScriptedParser, *messages: dict[str, Any], tools: frozenset[str] = ALL_TOOLS
) -> Decision:
    return DialoguePolicy(parser).decide(list(messages), tools)


# -- asking, remembering, continuing ------------------------------------------------------------


@pytest.mark.parametrize(
    ("opening", "lang"), [("我的订单到哪了", "zh"), ("Where is my order?", "en")]
)
def test_asks_for_the_order_number_in_the_users_language(
    parser: ScriptedParser, opening: str, lang: str
) -> None:
    decision = decide(parser, user(opening))
    assert decision == AskForSlot(
        t.ASK["order_status"]["order_id"][lang], "order_status", "order_id"
    )


@pytest.mark.parametrize(
    ("opening", "lang"), [("我的订单到哪了", "zh"), ("Where is my order?", "en")]
)
def test_a_bare_answer_continues_the_intent_it_answers(
    parser: ScriptedParser, opening: str, lang: str
) -> None:
    asked = t.ASK["order_status"]["order_id"][lang]
    # The bare number parses as out_of_scope with low confidence on its own.
    decision = decide(parser, user(opening), assistant(asked), user(ORDER))
    assert decision == CallTool("query_order_status", {"order_id": ORDER}, "order_status")


def test_a_bare_answer_continues_even_when_the_classifier_is_sure_of_something_else() -> None:
    parser = ScriptedParser()
    parser.on("我要退款", "refund_request")
    parser.on(f"订单号 {ORDER}", "order_status", 0.9, slots={"order_id": ORDER})
    asked = t.ASK["refund_request"]["order_id"]["zh"]
    decision = decide(parser, user("我要退款"), assistant(asked), user(f"订单号 {ORDER}"))
    assert decision == CallTool("request_refund", {"order_id": ORDER}, "refund_request")


def test_a_new_request_with_a_slot_starts_a_new_intent() -> None:
    parser = ScriptedParser()
    parser.on("我的订单到哪了", "order_status")
    parser.on(f"算了，我要退货，订单{ORDER}", "return_request", slots={"order_id": ORDER})
    asked = t.ASK["order_status"]["order_id"]["zh"]
    messages = [user("我的订单到哪了"), assistant(asked), user(f"算了，我要退货，订单{ORDER}")]
    decision = decide(parser, *messages)
    assert decision == CallTool("request_return", {"order_id": ORDER}, "return_request")


def test_continues_after_a_question_another_model_asked(parser: ScriptedParser) -> None:
    asked = "Could you share your order number, please?"
    decision = decide(parser, user("Where is my order?"), assistant(asked), user(ORDER))
    assert decision == CallTool("query_order_status", {"order_id": ORDER}, "order_status")


def test_a_bare_answer_without_a_question_is_not_taken_as_an_answer(
    parser: ScriptedParser,
) -> None:
    messages = [user("Where is my order?"), assistant("Okay."), user(ORDER)]
    decision = decide(parser, *messages)
    assert isinstance(decision, Handoff) and decision.reason == "low_confidence"


def test_slots_from_earlier_turns_are_remembered(parser: ScriptedParser) -> None:
    messages = [
        user(f"我的订单{ORDER}到哪了"),
        tool_call("query_order_status", {"order_id": ORDER}),
        tool_result("call_1", success(SHIPPED_ORDER)),
        assistant("您的订单已发货。"),
        user("我要退货"),
    ]
    decision = decide(parser, *messages)
    assert decision == CallTool("request_return", {"order_id": ORDER}, "return_request")


def test_slot_memory_comes_only_from_the_messages(parser: ScriptedParser) -> None:
    policy = DialoguePolicy(parser)
    first = policy.decide([user(f"Where is order {ORDER}?")], ALL_TOOLS)
    assert isinstance(first, CallTool)
    # A new conversation with the same policy knows nothing of the first one.
    second = policy.decide([user("I'd like to return it")], ALL_TOOLS)
    assert second == AskForSlot(
        t.ASK["return_request"]["order_id"]["en"], "return_request", "order_id"
    )


def test_the_latest_value_of_a_slot_wins() -> None:
    parser = ScriptedParser()
    parser.on("Where is order 202405201234?", "order_status", slots={"order_id": "202405201234"})
    parser.on("and order 202405201235?", "order_status", 0.7, slots={"order_id": "202405201235"})
    messages = [
        user("Where is order 202405201234?"),
        assistant("Your order 202405201234 is shipped."),
        user("and order 202405201235?"),
    ]
    decision = decide(parser, *messages)
    assert decision == CallTool("query_order_status", {"order_id": "202405201235"}, "order_status")


# -- confidence, scope, handoff -----------------------------------------------------------------


def test_low_confidence_hands_off_politely(parser: ScriptedParser) -> None:
    decision = decide(parser, user("嗯那个呃"))
    assert decision == Handoff(t.HANDOFF["low_confidence"]["zh"], "low_confidence")


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Will you send a replacement for a broken item, and how quickly?", "en"),
        ("坏了的东西能换新的吗", "zh"),
    ],
)
def test_a_question_the_classifier_cannot_place_is_put_to_the_documents(
    text: str, lang: str
) -> None:
    parser = ScriptedParser().on(text, "order_status", 0.3)
    decision = decide(parser, user(text), tools=ALL_TOOLS | {"search_knowledge"})
    assert decision == CallTool(
        "search_knowledge", {"query": text, "language": lang}, "policy_question"
    )
    search = tool_call("search_knowledge", {"query": text, "language": lang})
    # the documents do not recognise it either: answered as any message we cannot place
    nothing = tool_result("call_1", success({"passages": []}))
    decision = decide(parser, user(text), search, nothing, tools=ALL_TOOLS | {"search_knowledge"})
    assert decision == Handoff(t.HANDOFF["low_confidence"][lang], "low_confidence")
    # they do: the answer is theirs
    passage = {"title": "Damaged items", "section": "Replacements", "language": lang,
               "text": "A damaged item is replaced within 3 days."}  # fmt: skip
    found = tool_result("call_1", success({"passages": [passage]}))
    decision = decide(parser, user(text), search, found, tools=ALL_TOOLS | {"search_knowledge"})
    assert isinstance(decision, Reply) and decision.intent == "policy_question"
    assert "3 days" in decision.text
    # the same words about an order are no question about the rules: as unsure as before
    about = f"{text} {ORDER}"
    parser.on(about, "order_status", 0.3, {"order_id": ORDER})
    decision = decide(parser, user(about), tools=ALL_TOOLS | {"search_knowledge"})
    assert decision == Handoff(t.HANDOFF["low_confidence"][lang], "low_confidence")


def test_an_unsure_question_right_after_an_answer_asks_it_again_for_its_case() -> None:
    question, answer = "How long does a refund take?", "Refunds start when… (Source: Refunds)"
    parser = ScriptedParser().on(question, "policy_question")
    parser.on("I paid by credit card", "policy_question", 0.43)
    parser.on("ok", "out_of_scope", 0.24)
    passage = {"title": "Refunds", "section": "Times", "language": "en", "text": "…"}
    before = [
        user(question),
        tool_call("search_knowledge", {"query": question, "language": "en"}),
        tool_result("call_1", success({"passages": [passage]})),
        assistant(answer),
    ]
    tools = ALL_TOOLS | {"search_knowledge"}
    decision = decide(parser, *before, user("I paid by credit card"), tools=tools)
    assert decision == CallTool(
        "search_knowledge",
        {"query": "Refunds I paid by credit card", "language": "en"},  # the answer's document
        "policy_question",
    )
    # what it leans to read as something else is no follow-up
    decision = decide(parser, *before, user("ok"), tools=tools)
    assert decision == Handoff(t.HANDOFF["low_confidence"]["en"], "low_confidence")


@pytest.mark.parametrize(
    ("text", "top", "amount", "refund"),
    [
        (f"订单{ORDER}有个手机壳裂了，退50块", "order_status", "50", True),
        (f"Another 250 CNY back on order {ORDER}", "track_shipment", "250", True),
        (f"订单{ORDER}退货，运费12元", "return_request", "12", False),  # 退货 is a return
        (f"订单{ORDER}花了50元", "order_status", "50", False),  # an amount, no refund word
    ],
)
def test_an_unsure_parse_with_an_amount_and_a_refund_word_is_a_refund(
    text: str, top: str, amount: str, refund: bool
) -> None:
    parser = ScriptedParser()
    parser.on(text, top, 0.4, {"order_id": ORDER, "amount": amount}, runner_up="refund_request")
    decision = decide(parser, user(text))
    if refund:
        assert decision == CallTool(
            "request_refund", {"order_id": ORDER, "amount": float(amount)}, "refund_request"
        )
    else:
        assert decision == Handoff(t.HANDOFF["low_confidence"][_lang(text)], "low_confidence")


def _lang(text: str) -> str:
    return "zh" if "订单" in text else "en"


def test_the_confidence_threshold_is_a_constructor_argument(parser: ScriptedParser) -> None:
    decision = DialoguePolicy(parser, min_confidence=0.25).decide([user("嗯那个呃")], ALL_TOOLS)
    assert decision == AskForSlot(
        t.ASK["order_status"]["order_id"]["zh"], "order_status", "order_id"
    )


def test_out_of_scope_and_human_handoff_hand_off(parser: ScriptedParser) -> None:
    assert decide(parser, user("What's the weather like?")) == Handoff(
        t.HANDOFF["out_of_scope"]["en"], "out_of_scope"
    )
    assert decide(parser, user("转人工")) == Handoff(
        t.HANDOFF["human_handoff"]["zh"], "human_handoff"
    )


def test_a_tool_that_is_not_offered_hands_off(parser: ScriptedParser) -> None:
    tools = ALL_TOOLS - {"query_order_status"}
    decision = decide(parser, user(f"我的订单{ORDER}到哪了"), tools=tools)
    assert decision == Handoff(t.HANDOFF["tool_not_offered"]["zh"], "tool_not_offered")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你好", Reply(t.GREETING["zh"], "greeting")),
        ("Hello there", Reply(t.GREETING["en"], "greeting")),
        ("再见", Reply(t.GOODBYE["zh"], "goodbye")),
        ("bye", Reply(t.GOODBYE["en"], "goodbye")),
    ],
)
def test_greeting_and_goodbye_get_template_replies(
    parser: ScriptedParser, text: str, expected: Reply
) -> None:
    assert decide(parser, user(text)) == expected


def test_a_conversation_without_a_user_message_gets_a_greeting(parser: ScriptedParser) -> None:
    decision = decide(parser, {"role": "system", "content": "You are a helpful agent."})
    assert decision == Reply(t.GREETING["en"], "greeting")


# -- answering from tool results ----------------------------------------------------------------


def order_turn(opening: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        user(opening),
        tool_call("query_order_status", {"order_id": ORDER}),
        tool_result("call_1", body),
    ]


def test_answers_from_a_successful_result_in_chinese(parser: ScriptedParser) -> None:
    decision = decide(parser, *order_turn(f"我的订单{ORDER}到哪了", success(SHIPPED_ORDER)))
    assert isinstance(decision, Reply) and decision.intent == "order_status"
    for part in (ORDER, "已发货", "蓝牙耳机 ×1", "299.00元", "SF Express", "SF123456789CN"):
        assert part in decision.text
    assert "None" not in decision.text


def test_answers_from_a_successful_result_in_english(parser: ScriptedParser) -> None:
    decision = decide(parser, *order_turn(f"Where is order {ORDER}?", success(PAID_ORDER)))
    assert isinstance(decision, Reply)
    assert f"Your order {ORDER} is paid and waiting to be shipped." in decision.text
    # The order has no carrier yet: nothing about one is said, nothing is made up.
    assert "Carrier" not in decision.text and "None" not in decision.text


def test_a_missing_order_gets_the_not_found_reply(parser: ScriptedParser) -> None:
    body = failure("order_not_found", "no such order")
    zh = decide(parser, *order_turn(f"我的订单{ORDER}到哪了", body))
    en = decide(parser, *order_turn(f"Where is order {ORDER}?", body))
    assert zh == Reply(f"没有找到订单 {ORDER}，请核对订单号后再告诉我。", "order_status")
    assert en == Reply(
        f"I couldn't find order {ORDER}. Could you check the order number?", "order_status"
    )


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_corrected_number_after_not_found_retries_the_same_request(lang: str) -> None:
    other = "202405201235"
    parser = ScriptedParser()
    opening = "我要退款，订单202405209999" if lang == "zh" else "Refund order 202405209999"
    parser.on(opening, "refund_request", slots={"order_id": "202405209999"})
    parser.on(
        other, "order_status", 0.99, slots={"order_id": other}
    )  # alone it reads as a status query
    policy = DialoguePolicy(parser)
    messages = [
        user(opening),
        tool_call("request_refund", {"order_id": "202405209999"}),
        tool_result("call_1", failure("order_not_found")),
    ]
    not_found = policy.decide(messages, ALL_TOOLS)
    assert isinstance(not_found, Reply)
    messages += [assistant(not_found.text), user(other)]
    decision = policy.decide(messages, ALL_TOOLS)
    assert decision == CallTool("request_refund", {"order_id": other}, "refund_request")


def test_a_tool_error_gets_the_error_reply(parser: ScriptedParser) -> None:
    decision = decide(parser, *order_turn(f"我的订单{ORDER}到哪了", failure("timeout")))
    assert decision == Reply(t.RESULT_DEFAULT["error"]["zh"][0], "order_status")


def test_a_fallback_result_says_so_without_passing_on_instructions(parser: ScriptedParser) -> None:
    # A tool's fallback message is written for a model ("Tell the customer ..."), not for them.
    message = "The order system is unavailable. Tell the customer to try again later."
    body = {"status": "fallback", "data": {"message": message}}
    decision = decide(parser, *order_turn(f"Where is order {ORDER}?", body))
    assert decision == Reply(t.RESULT_DEFAULT["fallback"]["en"][0], "order_status")


@pytest.mark.parametrize(
    ("code", "lang", "expected"),
    [
        ("order_not_returnable", "zh", f"只有已签收的订单才能退货，订单 {ORDER} 目前还不能退货。"),
        (
            "order_not_returnable",
            "en",
            f"Only delivered orders can be returned; order {ORDER} isn't delivered yet.",
        ),
        ("return_already_requested", "en", f"A return already exists for order {ORDER}."),
        ("some_new_rule", "zh", t.RESULT_DEFAULT["refused"]["zh"][0]),
        ("circuit_open", "en", t.RESULT_DEFAULT["error"]["en"][0]),
        ("email_unavailable", "en", t.RESULT_DEFAULT["error"]["en"][0]),
    ],
)
def test_refusals_say_why_and_outages_say_try_later(code: str, lang: str, expected: str) -> None:
    parser = ScriptedParser()
    opening = f"我要退货，订单{ORDER}" if lang == "zh" else f"I want to return order {ORDER}"
    parser.on(opening, "return_request", slots={"order_id": ORDER})
    messages = [
        user(opening),
        tool_call("request_return", {"order_id": ORDER}),
        tool_result("call_1", failure(code)),
    ]
    assert decide(parser, *messages) == Reply(expected, "return_request")


def test_a_phone_mismatch_asks_again_and_the_answer_is_used() -> None:
    parser = ScriptedParser()
    parser.on("我忘记密码了，手机号13800138001", "password_reset", slots={"phone": "13800138001"})
    parser.on("13800138000", "password_reset", 0.96, slots={"phone": "13800138000"})
    policy = DialoguePolicy(parser)
    messages = [
        user("我忘记密码了，手机号13800138001"),
        tool_call("reset_password", {"phone": "13800138001"}),
        tool_result("call_1", failure("phone_mismatch")),
    ]
    mismatch = policy.decide(messages, ALL_TOOLS)
    assert mismatch == Reply(t.ERROR_CODE["phone_mismatch"]["zh"][0], "password_reset")
    messages += [assistant(mismatch.text), user("13800138000")]
    decision = policy.decide(messages, ALL_TOOLS)
    assert decision == CallTool("reset_password", {"phone": "13800138000"}, "password_reset")


def test_a_refund_above_the_limit_takes_the_amount_from_the_order() -> None:
    parser = ScriptedParser()
    parser.on(f"我要退款，订单{ORDER}", "refund_request", slots={"order_id": ORDER})
    big_order = {**SHIPPED_ORDER, "total_amount": 899.0}
    refund = {
        "refund_id": "RF00000001",
        "order_id": ORDER,
        "amount": 899.0,
        "currency": "CNY",
        "status": "pending_review",
    }
    policy = DialoguePolicy(parser)
    messages = [user(f"我要退款，订单{ORDER}")]
    answers = iter([failure("amount_required"), success(big_order), success(refund)])
    calls = []
    for round_no in range(5):
        decision = policy.decide(messages, ALL_TOOLS)
        if not isinstance(decision, CallTool):
            break
        calls.append((decision.name, decision.arguments))
        messages += [
            tool_call(decision.name, decision.arguments, f"call_{round_no}"),
            tool_result(f"call_{round_no}", next(answers)),
        ]
    assert calls == [
        ("request_refund", {"order_id": ORDER}),
        ("query_order_status", {"order_id": ORDER}),
        ("request_refund", {"order_id": ORDER, "amount": 899.0}),
    ]
    assert isinstance(decision, Reply)
    assert "RF00000001" in decision.text and "899.00元" in decision.text
    assert "待人工审核" in decision.text


def test_a_refund_whose_order_cannot_be_read_asks_for_the_amount() -> None:
    parser = ScriptedParser()
    parser.on(f"Refund order {ORDER}", "refund_request", slots={"order_id": ORDER})
    parser.on("Refund 899 yuan", "refund_request", 0.6, slots={"amount": "899"})
    policy = DialoguePolicy(parser)
    messages = [
        user(f"Refund order {ORDER}"),
        tool_call("request_refund", {"order_id": ORDER}, "call_1"),
        tool_result("call_1", failure("amount_required")),
        tool_call("query_order_status", {"order_id": ORDER}, "call_2"),
        tool_result("call_2", failure("timeout")),
    ]
    ask = policy.decide(messages, ALL_TOOLS)
    assert ask == Reply(
        f"Order {ORDER} is over 500, so a colleague has to review the refund. "
        "How much should be refunded?",
        "refund_request",
    )
    messages += [assistant(ask.text), user("Refund 899 yuan")]
    decision = policy.decide(messages, ALL_TOOLS)
    assert decision == CallTool(
        "request_refund", {"order_id": ORDER, "amount": 899.0}, "refund_request"
    )


def test_rejected_arguments_ask_the_user_to_check_the_value(parser: ScriptedParser) -> None:
    body = failure("invalid_arguments", "order_id must match ^\\d{12}$")
    decision = decide(parser, *order_turn(f"Where is order {ORDER}?", body))
    assert decision == Reply(
        "The order number you gave doesn't look right. Could you check it and send it again?",
        "order_status",
    )


def test_an_unreadable_result_is_an_error_not_a_guess(parser: ScriptedParser) -> None:
    messages = order_turn(f"Where is order {ORDER}?", success(SHIPPED_ORDER))
    messages[-1] = {"role": "tool", "tool_call_id": "call_1", "content": "<html>oops</html>"}
    assert decide(parser, *messages) == Reply(t.RESULT_DEFAULT["error"]["en"][0], "order_status")


def test_never_repeats_the_same_call_in_one_turn(parser: ScriptedParser) -> None:
    # Another model already made the call this turn, then something else; the plan still
    # wants the same call, so the answer comes from that call's result.
    messages = [
        *order_turn(f"Where is order {ORDER}?", success(SHIPPED_ORDER)),
        tool_call("create_ticket", {"category": "other", "summary": "a note"}, "call_2"),
        tool_result("call_2", success({"ticket_id": "T1", "status": "open"})),
    ]
    decision = decide(parser, *messages)
    assert isinstance(decision, Reply) and decision.intent == "order_status"
    assert f"Your order {ORDER} is shipped." in decision.text


def test_a_new_user_turn_may_make_the_same_call_again(parser: ScriptedParser) -> None:
    messages = [
        *order_turn(f"Where is order {ORDER}?", success(SHIPPED_ORDER)),
        assistant("Your order is shipped."),
        user(f"Where is order {ORDER}?"),
    ]
    decision = decide(parser, *messages)
    assert decision == CallTool("query_order_status", {"order_id": ORDER}, "order_status")


# -- the agent loop, driven to the end ----------------------------------------------------------


def drive(
    policy: DialoguePolicy,
    messages: list[dict[str, Any]],
    results: dict[str, dict[str, Any]],
    tools: frozenset[str] = ALL_TOOLS,
    max_rounds: int = 8,
) -> tuple[Decision, list[tuple[str, dict[str, Any]]]]:
    """Play the turn loop: run each call against `results` (by tool name) until an answer."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for round_no in range(max_rounds):
        decision = policy.decide(messages, tools)
        if not isinstance(decision, CallTool):
            return decision, calls
        calls.append((decision.name, decision.arguments))
        call_id = f"call_{round_no}"
        messages.append(tool_call(decision.name, decision.arguments, call_id))
        messages.append(tool_result(call_id, results[decision.name]))
    raise AssertionError(f"no answer after {max_rounds} rounds: {calls}")


def test_tracking_by_order_number_looks_the_order_up_then_the_shipment() -> None:
    parser = ScriptedParser()
    parser.on(f"帮我查一下订单{ORDER}的物流", "track_shipment", slots={"order_id": ORDER})
    results = {
        "query_order_status": success(SHIPPED_ORDER),
        "track_shipment": success(SHIPMENT),
    }
    reply, calls = drive(DialoguePolicy(parser), [user(f"帮我查一下订单{ORDER}的物流")], results)
    assert calls == [
        ("query_order_status", {"order_id": ORDER}),
        ("track_shipment", {"tracking_number": "SF123456789CN"}),
    ]
    assert isinstance(reply, Reply) and reply.intent == "track_shipment"
    assert "运输中" in reply.text and "2024年5月22日 06:30 上海 到达转运中心" in reply.text
    assert "预计送达：2024年5月23日。" in reply.text and "2024-05" not in reply.text


def test_tracking_an_order_that_has_not_shipped_answers_from_the_order() -> None:
    parser = ScriptedParser()
    parser.on(f"Track order {ORDER}", "track_shipment", slots={"order_id": ORDER})
    results = {"query_order_status": success(PAID_ORDER)}
    reply, calls = drive(DialoguePolicy(parser), [user(f"Track order {ORDER}")], results)
    assert calls == [("query_order_status", {"order_id": ORDER})]
    assert isinstance(reply, Reply) and "paid and waiting to be shipped" in reply.text


def test_tracking_without_the_shipment_tool_answers_from_the_order() -> None:
    parser = ScriptedParser()
    parser.on(f"Track order {ORDER}", "track_shipment", slots={"order_id": ORDER})
    tools = ALL_TOOLS - {"track_shipment"}
    results = {"query_order_status": success(SHIPPED_ORDER)}
    reply, calls = drive(DialoguePolicy(parser), [user(f"Track order {ORDER}")], results, tools)
    assert len(calls) == 1
    assert isinstance(reply, Reply) and "SF123456789CN" in reply.text


def test_a_bare_tracking_number_keeps_the_conversation_in_chinese() -> None:
    parser = ScriptedParser()
    parser.on("我的快递到哪了", "track_shipment")
    parser.on("SF123456789CN", "out_of_scope", 0.2, slots={"tracking_number": "SF123456789CN"})
    asked = t.ASK["track_shipment"]["tracking_or_order"]["zh"]
    messages = [user("我的快递到哪了"), assistant(asked), user("SF123456789CN")]
    reply, calls = drive(DialoguePolicy(parser), messages, {"track_shipment": success(SHIPMENT)})
    assert calls == [("track_shipment", {"tracking_number": "SF123456789CN"})]
    assert isinstance(reply, Reply) and reply.text.startswith("您的包裹")


def test_a_refund_over_the_limit_says_it_needs_review() -> None:
    parser = ScriptedParser()
    parser.on(
        f"I want a refund of 800 for order {ORDER}",
        "refund_request",
        slots={"order_id": ORDER, "amount": "800"},
    )
    data = {
        "refund_id": "R1",
        "order_id": ORDER,
        "amount": 800,
        "currency": "CNY",
        "status": "pending_review",
    }
    reply, calls = drive(
        DialoguePolicy(parser),
        [user(f"I want a refund of 800 for order {ORDER}")],
        {"request_refund": success(data)},
    )
    assert calls == [("request_refund", {"order_id": ORDER, "amount": 800.0})]
    assert isinstance(reply, Reply)
    assert "R1" in reply.text and "CNY 800.00" in reply.text and "pending review" in reply.text


def test_password_reset_asks_for_the_phone_then_sends_the_link() -> None:
    parser = ScriptedParser()
    parser.on("忘记密码了", "password_reset")
    parser.on("13800138000", "out_of_scope", 0.3, slots={"phone": "13800138000"})
    first = decide(parser, user("忘记密码了"))
    assert isinstance(first, AskForSlot) and first.slot == "phone"
    messages = [user("忘记密码了"), assistant(first.text), user("13800138000")]
    data = {"status": "reset_link_sent", "channel": "sms", "masked_phone": "138****8000"}
    reply, calls = drive(DialoguePolicy(parser), messages, {"reset_password": success(data)})
    assert calls == [("reset_password", {"phone": "13800138000"})]
    assert reply == Reply("重置密码的链接已通过短信发送到 138****8000，请查收。", "password_reset")


def test_a_short_complaint_asks_for_details_then_logs_a_ticket() -> None:
    parser = ScriptedParser()
    parser.on("差评", "complaint")
    parser.on("快递员把包裹扔在门口就走了", "out_of_scope", 0.6)
    first = decide(parser, user("差评"))
    assert first == AskForSlot(t.ASK["complaint"]["summary"]["zh"], "complaint", "summary")
    messages = [user("差评"), assistant(first.text), user("快递员把包裹扔在门口就走了")]
    data = {"ticket_id": "TK-1", "status": "open", "category": "complaint", "priority": "normal"}
    reply, calls = drive(DialoguePolicy(parser), messages, {"create_ticket": success(data)})
    assert calls == [
        ("create_ticket", {"category": "complaint", "summary": "差评 快递员把包裹扔在门口就走了"})
    ]
    assert isinstance(reply, Reply) and "TK-1" in reply.text


def test_updating_contact_details_never_reuses_an_older_value() -> None:
    parser = ScriptedParser()
    parser.on(
        "I forgot my password, my phone is 13800138000",
        "password_reset",
        slots={"phone": "13800138000"},
    )
    parser.on("I want to change my phone number", "update_contact")
    parser.on("13912345678", "out_of_scope", 0.3, slots={"phone": "13912345678"})
    messages = [
        user("I forgot my password, my phone is 13800138000"),
        assistant("A password reset link has been sent."),
        user("I want to change my phone number"),
    ]
    ask = decide(parser, *messages)
    assert ask == AskForSlot(t.ASK["update_contact"]["phone"]["en"], "update_contact", "phone")
    messages += [assistant(ask.text), user("13912345678")]
    call = decide(parser, *messages)
    assert call == CallTool(
        "update_contact_info", {"field": "phone", "value": "13912345678"}, "update_contact"
    )


def test_a_second_contact_change_changes_what_it_names_not_the_first_again() -> None:
    parser = ScriptedParser()
    parser.on(
        "change my email to a@example.com", "update_contact", slots={"email": "a@example.com"}
    )
    parser.on("and my phone to 13912345678", "update_contact", slots={"phone": "13912345678"})
    parser.on("我想改地址", "update_contact")
    parser.on("北京市朝阳区建国路88号", "out_of_scope", 0.8)
    done = {"field": "email", "status": "updated", "masked_value": "a***@example.com"}
    messages = [
        user("change my email to a@example.com"),
        tool_call("update_contact_info", {"field": "email", "value": "a@example.com"}, "c1"),
        tool_result("c1", success(done)),
        assistant("Your email address has been updated to a***@example.com."),
        user("and my phone to 13912345678"),
    ]
    assert decide(parser, *messages) == CallTool(
        "update_contact_info", {"field": "phone", "value": "13912345678"}, "update_contact"
    )
    # An address given for an earlier change is not the answer to a later request either.
    messages = [user("我想改地址")]
    messages += [
        assistant(t.ASK["update_contact"]["address"]["zh"]),
        user("北京市朝阳区建国路88号"),
    ]
    messages += [assistant("您的地址已更新为 北京市***。"), user("我想改地址")]
    ask = decide(parser, *messages)
    assert ask == AskForSlot(t.ASK["update_contact"]["address"]["zh"], "update_contact", "address")


def test_updating_an_address_takes_the_answer_as_the_value() -> None:
    parser = ScriptedParser()
    parser.on("我想改一下联系方式", "update_contact")
    parser.on("地址", "out_of_scope", 0.4)
    parser.on("北京市朝阳区建国路88号", "out_of_scope", 0.8)
    messages = [user("我想改一下联系方式")]
    steps = []
    for answer in ("地址", "北京市朝阳区建国路88号"):
        decision = decide(parser, *messages)
        assert isinstance(decision, AskForSlot)
        steps.append(decision.slot)
        messages += [assistant(decision.text), user(answer)]
    assert steps == ["contact_field", "address"]
    final = decide(parser, *messages)
    assert final == CallTool(
        "update_contact_info",
        {"field": "address", "value": "北京市朝阳区建国路88号"},
        "update_contact",
    )


def test_tool_arguments_are_json_serialisable_and_follow_the_contract(
    parser: ScriptedParser,
) -> None:
    decision = decide(parser, user(f"我的订单{ORDER}到哪了"))
    assert isinstance(decision, CallTool)
    assert json.loads(json.dumps(decision.arguments)) == {"order_id": ORDER}


def test_a_detailed_complaint_is_logged_at_once() -> None:
    parser = ScriptedParser()
    text = "The courier was rude and left my parcel outside in the rain"
    parser.on(text, "complaint")
    decision = decide(parser, user(text))
    assert decision == CallTool(
        "create_ticket", {"category": "complaint", "summary": text}, "complaint"
    )


def test_the_effective_intent_is_available_for_narrowing_tools() -> None:
    parser = ScriptedParser()
    parser.on("我要退款", "refund_request")
    parser.on("202405201235", "order_status", 0.97, slots={"order_id": "202405201235"})
    asked = t.ASK["refund_request"]["order_id"]["zh"]
    policy = DialoguePolicy(parser)
    u = policy.understand_messages([user("我要退款"), assistant(asked), user("202405201235")])
    assert (u.intent, u.continued) == ("refund_request", True)
    fresh = policy.understand_messages([user("202405201235")])
    assert (fresh.intent, fresh.continued) == ("order_status", False)
