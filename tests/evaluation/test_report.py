"""The numbers: pass^k as τ-bench defines it, rates per intent, language and set, the
targets, and the text people read."""

from __future__ import annotations

import pytest
import yaml

from app.evaluation.checks import Failure
from app.evaluation.load import parse_scenario
from app.evaluation.report import Targets, pass_hat_k, render, summarize
from app.evaluation.runner import RunResult
from app.evaluation.scenario import Scenario


def make(sid: str, language: str, intents: str, heldout: bool = False) -> Scenario:
    text = (
        f"title: t\ncustomer: c\ngoal: g\nlanguage: {language}\nintents: {intents}\nturns: [hi]\n"
    )
    folder = "evals/heldout" if heldout else "evals"
    return parse_scenario(yaml.safe_load(text), f"{folder}/{sid}.yaml", heldout=heldout)


def result(sid: str, run: int, *failures: Failure) -> RunResult:
    return RunResult(sid, run, list(failures), 0.5, [("hi", "hello")])


def test_pass_hat_k() -> None:
    assert pass_hat_k(4, 4, 4) == 1.0
    assert pass_hat_k(3, 4, 1) == 0.75
    assert pass_hat_k(3, 4, 2) == pytest.approx(0.5)  # C(3,2)/C(4,2) = 3/6
    assert pass_hat_k(3, 4, 4) == 0.0


def test_summary_rates_targets_and_first_failures() -> None:
    scenarios = [
        make("a", "zh", "[refund_request]"),
        make("b", "en", "[refund_request, order_status]"),
        make("h", "zh", "[complaint]", heldout=True),
    ]
    forbidden = Failure("forbidden_write", "scenario", "refunds: unexpected row created {}")
    missing = Failure("contains", "scenario", "no reply contains '89'")
    results = [
        result("a", 0),
        result("a", 1),
        result("b", 0, forbidden, missing),
        result("b", 1),
        result("h", 0),
        result("h", 1, missing),
    ]
    summary = summarize(scenarios, results, runs=2, model="m", seconds=1.0, targets=Targets())
    assert summary["success"] == pytest.approx((1 + 0.5 + 0.5) / 3, abs=1e-4)
    assert summary["pass_hat_k"] == {
        "1": pytest.approx(0.6667, abs=1e-4),
        "2": pytest.approx(0.3333, abs=1e-4),
    }
    assert summary["heldout"] == {"scenarios": 1, "success": 0.5}
    assert summary["tuned"] == {"scenarios": 2, "success": 0.75}
    assert summary["per_intent"]["refund_request"] == {"scenarios": 2, "success": 0.75}
    assert summary["per_language"]["en"] == {"scenarios": 1, "success": 0.5}
    assert summary["forbidden_writes"] == 1 and summary["forbidden_write_scenarios"] == ["b"]
    assert [f["first_failure"] for f in summary["failed"]] == [str(forbidden), str(missing)]
    assert summary["verdicts"] == {"success": False, "heldout": False, "forbidden_writes": False}
    assert not summary["met"]
    text = render(summary)
    assert (
        "FAIL b (1/2 runs): forbidden_write (scenario): refunds: unexpected row created {}" in text
    )
    assert "FAIL h [held-out] (1/2 runs)" in text
    assert text.endswith("BELOW TARGET: success, heldout, forbidden_writes")


def test_all_passing_meets_the_targets() -> None:
    scenarios = [make("a", "zh", "[greeting]")]
    summary = summarize(
        scenarios, [result("a", 0)], runs=1, model="m", seconds=1.0, targets=Targets()
    )
    assert summary["met"] and summary["heldout"]["success"] is None
    assert render(summary).endswith("targets met")
