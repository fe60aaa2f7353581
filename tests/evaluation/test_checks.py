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
