"""The harness end to end: scenarios played over the real HTTP API of a real service on a
loopback port (fresh SQLite and demo copy each), with hermes/local and with the project's
fake OpenAI-compatible server; a scenario that must fail fails with the right first
expectation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.evaluation.load import parse_scenario
from app.evaluation.runner import InProcess, InProcessHarness, Remote, run_remote
from app.evaluation.scenario import Scenario
from app.llm.local.templates import ASK
from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.testing import serve
from tests.conftest import copy_demo

HEAD = "title: t\ncustomer: cust_0001\ngoal: g\n"
LOCAL = InProcess({"model": "hermes/local"})


def scenario(text: str, name: str = "s") -> Scenario:
    return parse_scenario(yaml.safe_load(HEAD + text), f"evals/{name}.yaml")


REFUND_89 = """
language: zh
intents: [refund_request]
turns:
  - 我要退款
  - say: "202405201235"
    expect: {contains: [请确认]}
  - say: 是的
    expect: {called: [{tool: request_refund, status: success}], contains: ["89.00"]}
expect:
  not_called: [create_ticket]
  db:
    created: {refunds: [{order_id: "202405201235", amount_cents: 8900, status: approved}]}
    changed: {orders: [{id: "202405201235", status: refunded}]}
"""


async def test_a_scenario_that_holds_passes_with_hermes_local(demo_template: Path) -> None:
    harness = InProcessHarness(LOCAL, demo_template)
    try:
        result = await harness.run(scenario(REFUND_89), 0)
    finally:
        harness.close()
    assert result.failures == []
    assert result.transcript[0] == ("我要退款", ASK["refund_request"]["order_id"]["zh"])
    assert "202405201235" in result.transcript[1][1]


async def test_a_write_the_scenario_does_not_list_is_a_forbidden_write_shown_first(
    demo_template: Path,
) -> None:
    # The same conversation, but the scenario asks for an order lookup only: the refund that
    # happens is a forbidden write, and it comes before the (also failing) fact.
    text = """
language: zh
intents: [order_status]
turns: [我要退款, "202405201235", 是的]
expect:
  contains: [不存在的事实]
"""
    harness = InProcessHarness(LOCAL, demo_template)
    try:
        result = await harness.run(scenario(text), 0)
    finally:
        harness.close()
    assert [f.kind for f in result.failures] == ["forbidden_write", "forbidden_write", "contains"]
    assert result.forbidden_write and not result.passed
    first = str(result.failures[0])
    assert first.startswith(
        "forbidden_write (scenario): orders: unexpected change of {id=202405201235}"
    )
    assert str(result.failures[2]).startswith(
        "contains (scenario): no reply contains '不存在的事实'"
    )


async def test_a_missing_fact_and_a_missing_write_are_failures_but_not_forbidden(
    demo_template: Path,
) -> None:
    text = """
language: en
intents: [order_status]
turns:
  - say: Where is my order 202405201234?
    expect: {contains: [delivered]}
expect:
  db: {created: {tickets: [{category: complaint}]}}
"""
    harness = InProcessHarness(LOCAL, demo_template)
    try:
        result = await harness.run(scenario(text), 0)
    finally:
        harness.close()
    contains, db = (str(f) for f in result.failures)
    assert contains.startswith(
        "contains (session 1 turn 1): no reply contains 'delivered'; last: 'Your order 202405201234"
    )
    assert db == "db (scenario): tickets: no created row {category=complaint}"
    assert not result.forbidden_write


async def test_approvals_are_decided_as_the_scenario_says_and_unexpected_ones_fail(
    demo_template: Path,
) -> None:
    email = """
language: en
intents: [email_request, order_status]
turns:
  - What is the status of order 202405201234?
  - say: Please email me the details at lei@gmail.com
    expect: {approval_requested: [send_email], called: [{tool: send_email, status: success}]}
expect:
  db: {created: {emails: [{recipient: lei@gmail.com, status: sent}]}}
"""
    harness = InProcessHarness(LOCAL, demo_template)
    try:
        approved = await harness.run(scenario(email + "operator: approve\n"), 0)
        unexpected = await harness.run(scenario(email), 0)
    finally:
        harness.close()
    assert approved.failures == []  # approved, sent to the run's SMTP sink, recorded in the demo db
    assert [f.kind for f in unexpected.failures] == ["approval", "called", "db"]
    assert str(unexpected.failures[0]) == (
        "approval (session 1 turn 2): unexpected approval request for send_email"
    )


async def test_memory_across_two_sessions_and_the_simulated_customer(demo_template: Path) -> None:
    text = """
language: zh
intents: [track_shipment]
setup:
  memories: [{key: preference.courier, value: 顺丰}]
facts: {tracking_number: SF123456789CN}
sessions:
  - simulate: {opening: 我的快递到哪了, style: bare}
    expect:
      called: [{tool: track_shipment, status: success}]
      memory: {stored: [{key: preference.courier, value: 顺丰}]}
  - turns: [记住：我下午三点以后才方便接电话]
    expect:
      memory: {absent: [preference.courier]}
"""
    harness = InProcessHarness(LOCAL, demo_template)
    try:
        result = await harness.run(scenario(text), 0)
    finally:
        harness.close()
    assert result.transcript[:2] == [
        ("我的快递到哪了", ASK["track_shipment"]["tracking_or_order"]["zh"]),
        ("SF123456789CN", result.transcript[1][1]),
    ]
    # the seeded memory is there in session 1 and still there in session 2: one failure
    assert [str(f) for f in result.failures] == [
        "memory (session 2): preference.courier=顺丰 is stored (active, 1.0)"
    ]


def _fake_target(llm: FakeLLMServer) -> InProcess:
    overrides: dict[str, Any] = {
        "model": "openai/test-model",
        "model_api_base": llm.url,
        "model_api_key": "sk-test",
        "local_fallback": False,
        "llm_retries": 0,
    }
    return InProcess(overrides)


async def test_the_same_harness_against_the_fake_openai_compatible_server(
    fake_llm: FakeLLMServer, demo_template: Path
) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("query_order_status", {"order_id": "202405201234"})),
        Reply("Your order 202405201234 has shipped with SF Express (SF123456789CN)."),
        ToolCalls(ToolCall("request_refund", {"order_id": "202405201235"})),
        Reply("Done: 89.00 CNY refunded."),
    )
    text = """
language: en
intents: [order_status]
turns:
  - say: Where is my order 202405201234?
    expect: {called: [{tool: query_order_status, status: success}], contains: [SF123456789CN]}
  - I want a refund for order 202405201235
  - "yes"
expect:
  not_called: [request_refund]
"""
    harness = InProcessHarness(_fake_target(fake_llm), demo_template)
    try:
        result = await harness.run(scenario(text), 0)
    finally:
        harness.close()
    kinds = [f.kind for f in result.failures]
    # the model refunded although the scenario forbids it: the refund row, the order's new
    # status and the tool that ran are forbidden writes; then the not_called expectation
    assert kinds == ["forbidden_write", "forbidden_write", "forbidden_write", "not_called"]
    assert "request_refund ran although the scenario forbids it" in str(result.failures[2])
    assert len(fake_llm.requests) == 4 and fake_llm.pending() == 0
    assert "query_order_status" in fake_llm.requests[0].tool_names


async def test_a_running_service_over_its_url_with_an_operator_key(
    make_settings: Any, tmp_path: Path, demo_template: Path
) -> None:
    demo = copy_demo(demo_template, tmp_path / "remote-demo.db")
    key = "operator-key-0123456789"
    settings = make_settings(
        model="hermes/local",
        demo_db_path=demo,
        auth="api_key",
        api_keys=[f"default:operator:{key}"],
    )
    async with serve(settings) as service:
        result = await run_remote(Remote(service.base_url, key, demo), scenario(REFUND_89), 0)
        assert result.failures == []
        # run again on the same service: the order is refunded now, so the scenario fails,
        # and without the demo file only the events can be judged
        again = await run_remote(Remote(service.base_url, key, None), scenario(REFUND_89), 1)
    assert again.failures and all(f.kind != "forbidden_write" for f in again.failures)
    assert str(again.failures[0]).startswith(  # refused at once: nothing to read back
        "contains (session 1 turn 2): no reply contains '请确认'"
    )
    assert any(
        str(f).startswith("called (session 1 turn 3): request_refund") for f in again.failures
    )


async def test_a_recalled_note_is_named_by_its_key(demo_template: Path) -> None:
    # The memory.recalled event names knowledge nodes by id only; the harness looks the key up.
    from app.memory.extract import text_key

    key = text_key("note", "我下午三点以后才方便接电话")
    text = f"""
language: zh
intents: [out_of_scope]
sessions:
  - turns: [记住：我下午三点以后才方便接电话]
  - turns:
      - say: 还记得我什么时候方便接电话吗？
        expect: {{memory: {{recalled: ["{key}"]}}, contains: [三点]}}
"""
    harness = InProcessHarness(LOCAL, demo_template)
    try:
        result = await harness.run(scenario(text), 0)
    finally:
        harness.close()
    assert result.failures == []
