"""`hermes eval`: the report on stdout, the JSON file, and an exit status CI can gate on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main

PASSES = """
title: a refund under the limit
language: en
intents: [refund_request]
customer: cust_0001
goal: 89.00 back for order 202405201235
turns: [I want a refund, "202405201235", "yes"]
expect:
  called: [{tool: request_refund, status: success}]
  db:
    created: {refunds: [{order_id: "202405201235", amount_cents: 8900}]}
    changed: {orders: [{id: "202405201235", status: refunded}]}
"""
FAILS = """
title: a fact the reply does not have
language: en
intents: [order_status]
customer: cust_0001
goal: g
turns: ["Where is order 202405201234?"]
expect: {contains: [teleported]}
"""


@pytest.fixture
def evals(tmp_path: Path) -> Path:
    root = tmp_path / "evals"
    (root / "heldout").mkdir(parents=True)
    (root / "passes.yaml").write_text(PASSES, "utf-8")
    (root / "heldout" / "fails.yaml").write_text(FAILS, "utf-8")
    return root


def test_below_target_exits_1_and_writes_the_json(
    evals: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report" / "eval.json"
    code = main(["eval", str(evals), "--workers", "1", "--json", str(out), "-q"])
    printed = capsys.readouterr().out
    assert code == 1
    assert "FAIL fails [held-out]: contains (session 1 turn 1)" not in printed  # scenario-level
    assert "FAIL fails [held-out]: contains (scenario): no reply contains 'teleported'" in printed
    assert "hermes eval: 1/2 scenarios passed, model hermes/local" in printed
    assert printed.rstrip().endswith("BELOW TARGET: success, heldout")
    report = json.loads(out.read_text("utf-8"))
    assert (report["success"], report["tuned"]["success"], report["heldout"]["success"]) == (
        0.5,
        1.0,
        0.0,
    )
    assert report["forbidden_writes"] == 0 and report["met"] is False
    assert report["failed"][0]["transcript"][0]["customer"] == "Where is order 202405201234?"


def test_targets_met_exit_0_and_only_selects(
    evals: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", str(evals), "--workers", "1", "--only", "pass*", "-q"])
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.rstrip().endswith("targets met")


def test_a_bad_file_or_bad_flags_exit_2(evals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (evals / "broken.yaml").write_text(PASSES.replace("goal:", "gaol:"), "utf-8")
    assert main(["eval", str(evals)]) == 2
    assert "broken.yaml: top level: unknown field(s) gaol" in capsys.readouterr().err
    assert main(["eval", str(evals / "passes.yaml"), "--api-key", "k"]) == 2
    assert main(["eval", str(evals / "passes.yaml"), "--runs", "0"]) == 2


def test_pending_scenarios_are_loaded_but_run_only_when_asked(
    evals: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pending = FAILS.replace("intents: [order_status]", "intents: [order_status]\ntags: [knowledge]")
    (evals / "pending.yaml").write_text(pending, "utf-8")
    args = ["eval", str(evals), "--workers", "1", "--only", "pass*", "--only", "pending", "-q"]
    assert main(args) == 0
    printed = capsys.readouterr()
    assert "1 pending scenarios skipped (tagged knowledge); --include-pending runs them" in (
        printed.err
    )
    assert "hermes eval: 1/1 scenarios passed" in printed.out
    assert main([*args, "--include-pending"]) == 1
    assert "FAIL pending: contains (scenario)" in capsys.readouterr().out
    (evals / "pending.yaml").write_text(pending.replace("goal:", "gaol:"), "utf-8")
    assert main(args) == 2  # skipped or not, a pending file must stay valid
