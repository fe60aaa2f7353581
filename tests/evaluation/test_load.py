"""Scenario files are read strictly: a typo or a YAML trap is an error naming the place."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.evaluation.load import load_scenarios, parse_scenario
from app.evaluation.scenario import ScenarioError

BASE = """
title: t
language: zh
intents: [order_status]
customer: cust_0001
goal: g
"""


def parse(extra: str, path: str = "evals/x.yaml") -> object:
    return parse_scenario(yaml.safe_load(BASE + extra), path)


def test_a_scripted_scenario_with_every_level_of_expectation() -> None:
    scenario = parse(
        """
operator: approve
turns:
  - 我的订单到哪了
  - say: "202405201234"
    operator: {decision: reject, reason: not this one}
    expect: {called: [{tool: query_order_status, status: success}], contains: [[已发货, shipped]]}
expect:
  not_called: [request_refund]
  memory: {stored: [{key: contact.phone, value: "138", min_confidence: 0.9}], forgot: true}
  db:
    created: {refunds: [{order_id: "202405201234", amount_cents: 100}]}
    changed: {orders: [{id: "202405201234", status: refunded}]}
"""
    )
    assert scenario.id == "x" and not scenario.heldout
    (session,) = scenario.sessions
    assert [t.say for t in session.turns] == ["我的订单到哪了", "202405201234"]
    second = session.turns[1]
    assert second.operator is not None and second.operator.decision == "reject"
    assert second.expect.contains == (("已发货", "shipped"),)
    assert second.expect.called[0].describe() == "query_order_status(success)"
    assert scenario.operator is not None and scenario.operator.decision == "approve"
    assert scenario.db.created["refunds"][0]["amount_cents"] == 100
    assert scenario.expect.memory is not None and scenario.expect.memory.forgot


def test_a_simulated_session_with_reactions() -> None:
    scenario = parse(
        """
facts: {order_id: "202405201234"}
simulate:
  opening: 我要退款
  style: bare
  reactions: [{when: order_id, say: "202405201299"}, {when: any, say: 说错了}]
"""
    )
    plan = scenario.sessions[0].simulate
    assert plan is not None and [r.when for r in plan.reactions] == ["order_id", "any"]
    assert scenario.facts == {"order_id": "202405201234"}


@pytest.mark.parametrize(
    ("extra", "where", "problem"),
    [
        ("turns: [hi]\nexpect: {contain: [x]}", "expect", "unknown field(s) contain"),
        ("turns: [{say: hi, operater: approve}]", "turns[0]", "unknown field(s) operater"),
        ("turns: [{say: 202405201234}]", "turns[0].say", "quote numbers that are text"),
        ("turns: [{say: yes}]", "turns[0].say", "quote it"),
        (
            "simulate: {opening: hi, reactions: [{on: order_id, say: x}]}",
            "simulate.reactions[0]",
            "unknown field(s) True",  # YAML 1.1 reads a bare `on` as true: hence `when`
        ),
        ("turns: [hi]\nsimulate: {opening: hi}", "top level", "exactly one of"),
        (
            "turns: [hi]\nexpect: {db: {created: {refund: [{id: x}]}}}",
            "expect.db.created",
            "refund",
        ),
        (
            "sessions: [{turns: [hi], expect: {db: {}}}]",
            "sessions[0].expect",
            "unknown field(s) db",
        ),
        ("turns: [hi]\nexpect: {language: fr}", "expect.language", "zh, en or any"),
        ("turns: [hi]\nexpect: {cited: Return policy}", "expect.cited", "expected a list"),
        ("turns: [hi]\nexpect: {no_citations: 1}", "expect.no_citations", "true or false"),
        (
            "turns: [hi]\nexpect: {cited: [Return policy], no_citations: true}",
            "expect.no_citations",
            "contradicts cited",
        ),
        ("documents: [{title: t, content: c}]\nturns: [hi]", "top level", "documents"),
        (
            "sessions: [{documents: [{title: t}], turns: [hi]}]",
            "sessions[0].documents[0]",
            "missing required field(s) content",
        ),
        (
            "sessions: [{documents: [{title: t, content: c, format: pdf}], turns: [hi]}]",
            "sessions[0].documents[0].format",
            "markdown, html, text",
        ),
        (
            "sessions: [{documents: [{title: t, content: c, valid_until: 30.11.2025}],"
            " turns: [hi]}]",
            "sessions[0].documents[0].valid_until",
            "ISO date",
        ),
    ],
)
def test_mistakes_are_errors_that_name_the_place(extra: str, where: str, problem: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse(extra)
    assert caught.value.source == f"evals/x.yaml: {where}"
    assert problem in caught.value.problem


def test_knowledge_documents_per_session_and_citation_expectations() -> None:
    scenario = parse(
        """
sessions:
  - documents:
      - title: 礼品包装
        content: "# 礼品包装\\n\\n礼品包装每件5元。"
        language: zh
        tags: [包装]
        valid_from: 2025-11-01
        valid_until: "2099-12-31T23:59:59"
    turns:
      - say: 礼品包装多少钱
        expect: {cited: [礼品包装], not_cited: [双十一], contains: [5元]}
  - turns: [你们卖电脑吗]
    expect: {no_citations: true}
"""
    )
    first, second = scenario.sessions
    (document,) = first.documents
    assert document.as_json() == {
        "title": "礼品包装",
        "content": "# 礼品包装\n\n礼品包装每件5元。",
        "format": "markdown",
        "language": "zh",
        "tags": ["包装"],
        "valid_from": "2025-11-01",  # YAML's date, back to ISO text
        "valid_until": "2099-12-31T23:59:59",
    }
    assert first.turns[0].expect.cited == ("礼品包装",)
    assert first.turns[0].expect.not_cited == ("双十一",)
    assert second.documents == () and second.expect.no_citations
    assert not first.turns[0].expect.no_citations


def test_an_unknown_intent_is_an_error() -> None:
    data = yaml.safe_load(BASE.replace("order_status", "order_stauts") + "turns: [hi]")
    with pytest.raises(ScenarioError, match="order_stauts"):
        parse_scenario(data, "evals/x.yaml")


def test_the_heldout_folder_marks_the_heldout_set_and_ids_are_unique(tmp_path: Path) -> None:
    (tmp_path / "evals" / "heldout").mkdir(parents=True)
    (tmp_path / "evals" / "a.yaml").write_text(BASE + "turns: [hi]\n", "utf-8")
    (tmp_path / "evals" / "heldout" / "b.yaml").write_text(BASE + "turns: [hi]\n", "utf-8")
    loaded = load_scenarios([tmp_path / "evals"])
    assert [(s.id, s.heldout) for s in loaded] == [("a", False), ("b", True)]
    (tmp_path / "evals" / "heldout" / "c.yaml").write_text(BASE + "id: a\nturns: [hi]\n", "utf-8")
    with pytest.raises(ScenarioError, match="id a is also used by"):
        load_scenarios([tmp_path / "evals"])


def test_the_project_scenarios_all_load() -> None:
    scenarios = load_scenarios([Path(__file__).resolve().parents[2] / "evals"])
    assert len(scenarios) >= 10
