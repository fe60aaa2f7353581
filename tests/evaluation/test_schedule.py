"""Scenarios spread over concurrent services and worker processes come back complete, in
scenario order, each run on its own fresh databases."""

from __future__ import annotations

import yaml

from app.evaluation.load import parse_scenario
from app.evaluation.runner import InProcess
from app.evaluation.scenario import Scenario
from app.evaluation.schedule import run_all

REFUND_89 = """
title: t
customer: cust_0001
goal: g
language: zh
intents: [refund_request]
turns: [我要退款, "202405201235", 是的]
expect:
  db:
    created: {refunds: [{order_id: "202405201235", amount_cents: 8900, status: approved}]}
    changed: {orders: [{id: "202405201235", status: refunded}]}
"""
LOCAL = InProcess({"model": "hermes/local"})


def scenario(name: str, first: str = "我要退款") -> Scenario:
    text = REFUND_89.replace("我要退款", first)
    return parse_scenario(yaml.safe_load(text), f"evals/{name}.yaml")


def test_k_runs_of_each_scenario_concurrently_in_one_process() -> None:
    scenarios = [scenario("b"), scenario("a", "退款")]
    seen: list[str] = []
    results = run_all(
        scenarios, LOCAL, runs=2, concurrency=4, progress=lambda r: seen.append(r.scenario)
    )
    assert [(r.scenario, r.run) for r in results] == [("b", 0), ("b", 1), ("a", 0), ("a", 1)]
    # the same refund four times, each on a fresh copy of the demo database: all pass
    assert all(r.passed for r in results), [str(f) for r in results for f in r.failures]
    assert sorted(seen) == ["a", "a", "b", "b"]


def test_worker_processes_share_the_jobs() -> None:
    scenarios = [scenario("c"), scenario("a", "退款"), scenario("b", "申请退款")]
    seen: list[str] = []
    results = run_all(
        scenarios, LOCAL, workers=2, concurrency=1, progress=lambda r: seen.append(r.scenario)
    )
    assert [r.scenario for r in results] == ["c", "a", "b"]
    assert all(r.passed for r in results), [str(f) for r in results for f in r.failures]
    assert sorted(seen) == ["a", "b", "c"]
