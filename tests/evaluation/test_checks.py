"""Expectations against a played scenario, without a service: what counts, and in which
order failures are listed."""

from __future__ import annotations

import yaml

from app.evaluation.checks import Played, SessionRecord, judge_scenario, reply_language
from app.evaluation.client import ApprovalSeen, ToolRun, TurnRecord
from app.evaluation.load import parse_scenario
from app.evaluation.scenario import Scenario


def scenario(text: str) -> Scenario:
    head = "title: t\ncustomer: cust_0001\ngoal: g\nintents: [refund_request]\n"
    return parse_scenario(yaml.safe_load(head + text), "evals/s.yaml")


def played(*turns: TurnRecord, memories: list[dict[str, object]] | None = None) -> Played:
    replies = [r for t in turns for r in t.replies]
    return Played([SessionRecord(list(turns), replies, memories or [])])


def test_reply_language_is_the_script_of_the_first_word_that_is_not_data() -> None:
    assert reply_language("Your order 202405201234 is shipped. Items: 无线蓝牙耳机 ×1") == "en"
    assert reply_language("SF123456789CN 已到达北京转运中心") == "zh"
    assert reply_language("li.lei@example.com 已更新") == "zh"
    assert reply_language("202405201234") is None


def test_alternatives_case_and_scopes() -> None:
    spec = scenario(
        """
language: en
turns:
  - say: refund please
    expect: {contains: [[order number, 订单号]]}
  - say: "202405201235"
    expect: {contains: [REFUND]}
expect:
  contains: ["89.00"]
"""
    )
    first = TurnRecord("refund please", ["Which order? Give me the Order Number."])
    second = TurnRecord("202405201235", ["Your refund of 89.00 CNY is approved."])
    assert judge_scenario(spec, played(first, second)) == []
    # the turn-level fact must be in *that* turn's reply
    swapped = judge_scenario(spec, played(second, first))
    assert [str(f).split(";")[0] for f in swapped] == [
        "contains (session 1 turn 1): no reply contains 'order number | 订单号'",
        "contains (session 1 turn 2): no reply contains 'REFUND'",
    ]


def test_failures_are_ordered_turn_by_turn_then_the_scenario() -> None:
    spec = scenario(
        """
language: zh
turns: [我要退款, "202405201235"]
expect:
  called: [request_refund]
  not_called: [reset_password]
  memory: {stored: [contact.phone], forgot: true}
"""
    )
    turns = (
        TurnRecord(
            "我要退款", ["Which order?"], approvals=[ApprovalSeen("send_email", "unexpected")]
        ),
        TurnRecord(
            "202405201235",
            ["请提供手机号"],
            tools=[ToolRun("reset_password", "error", "phone_mismatch")],
            status="turn_timeout",
        ),
    )
    memories = [{"key": "contact.phone", "value": "1", "status": "pending", "confidence": 0.8}]
    kinds = [(f.kind, f.where) for f in judge_scenario(spec, played(*turns, memories=memories))]
    assert kinds == [
        ("approval", "session 1 turn 1"),
        ("language", "session 1 turn 1"),
        ("turn", "session 1 turn 2"),
        ("called", "scenario"),
        ("not_called", "scenario"),
        ("memory", "scenario"),  # pending is not stored
        ("memory", "scenario"),  # nothing forgotten
        ("turn", "scenario"),
    ]


def test_a_forbidden_tool_that_succeeded_is_a_forbidden_write_even_without_the_database() -> None:
    spec = scenario("language: zh\nturns: [我要退款]\nexpect: {not_called: [request_refund]}\n")
    refused = TurnRecord("我要退款", ["好的"], tools=[ToolRun("request_refund", "error", "x")])
    ran = TurnRecord("我要退款", ["好的"], tools=[ToolRun("request_refund", "success")])
    assert [f.kind for f in judge_scenario(spec, played(refused))] == ["not_called"]
    assert [f.kind for f in judge_scenario(spec, played(ran))] == ["forbidden_write", "not_called"]


def _citation(title: str, section: str) -> dict[str, object]:
    return {"document_id": "doc_1", "chunk_id": "chk_1", "title": title, "section": section}


def test_citations_are_matched_by_title_substring_in_their_scope() -> None:
    spec = scenario(
        """
language: en
intents: [policy_question]
turns:
  - say: How long does a refund take?
    expect: {cited: [refunds and how long], not_cited: [Spring Festival], contains: ["7-15"]}
  - say: Do you sell laptops?
    expect: {no_citations: true}
expect:
  cited: [Refunds, Return policy]
"""
    )
    answer = TurnRecord(
        "How long does a refund take?",
        ["Credit card | 7-15 working days"],
        citations=[_citation("Refunds and how long they take", "How long until the money arrives")],
    )
    unknown = TurnRecord("Do you sell laptops?", ["I don't know; shall I pass you to a human?"])
    failures = judge_scenario(spec, played(answer, unknown))
    assert [str(f) for f in failures] == [
        "cited (scenario): no citation of 'Return policy'; cited: Refunds and how long they take"
        " › How long until the money arrives"
    ]


def test_a_forbidden_citation_and_a_guess_with_a_source_fail() -> None:
    spec = scenario(
        """
language: zh
intents: [policy_question]
turns:
  - say: 双十一包邮吗
    expect: {not_cited: [双十一], cited: [运费与包邮]}
  - say: 你们卖电脑吗
    expect: {no_citations: true}
"""
    )
    old = _citation("2025年双十一活动规则", "")
    expired = TurnRecord("双十一包邮吗", ["活动期间所有订单全场包邮"], citations=[old])
    guess = TurnRecord("你们卖电脑吗", ["有的"], citations=[_citation("配送范围", "中国大陆")])
    assert [(f.kind, f.where) for f in judge_scenario(spec, played(expired, guess))] == [
        ("cited", "session 1 turn 1"),
        ("not_cited", "session 1 turn 1"),
        ("no_citations", "session 1 turn 2"),
    ]
    messages = [f.message for f in judge_scenario(spec, played(expired, guess))]
    assert messages[1] == "'双十一' was cited; cited: 2025年双十一活动规则"
    assert messages[2] == "a reply cites 配送范围 › 中国大陆"
