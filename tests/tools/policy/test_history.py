"""Rules over history on real parts: tools from YAML, readers that answer, fail or hang."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.storage.session_writer import SessionWriter
from app.tools.context import ToolContext, TurnScope
from app.tools.loader import load_tools, resolve_python
from app.tools.policy import history
from app.tools.policy.history import History, HistoryQuery
from app.tools.spec import ToolSpec

STATE: dict[str, Any] = {}

YAML = """
version: 1
tools:
  - name: pay_out
    description: Pays money out to the customer; used to test rules over history.
    risk: write
    timeout_s: 5
    parameters:
      type: object
      additionalProperties: false
      required: [account]
      properties:
        account: {type: string}
        amount: {type: number}
    history_rules:
      - kind: cumulative_max
        field: amount
        per: account
        limit: 100
        history: tests.tools.policy.test_history:paid_out
        on_violation: approval
        message: Payouts above 100 per account need a human.
      - kind: sequence
        after: [change_account]
        window_hours: 1
        history: tests.tools.policy.test_history:account_changes
        on_violation: reject
    handler: {python: "tests.tools.fixture_tools:write_note"}
"""


async def paid_out(ctx: ToolContext, query: HistoryQuery) -> History:
    STATE["queries"].append(query)
    if STATE.get("fail"):
        raise RuntimeError("store is down")
    if STATE.get("hang"):
        await asyncio.sleep(3600)
    return History(done=STATE["done"], this_call=STATE.get("whole"))


async def account_changes(ctx: ToolContext, query: HistoryQuery) -> History:
    return History(done=STATE.get("changes", 0))


@pytest.fixture
def spec(tmp_path: Path) -> ToolSpec:
    path = tmp_path / "tools.yaml"
    path.write_text(YAML)
    STATE.clear()
    STATE.update(queries=[], done=0.0)
    return load_tools(path, resolve=resolve_python)[0]


def ctx() -> ToolContext:
    return ToolContext(
        TurnScope("t", "u", "s", "turn", writer=SessionWriter("s")), "c1", "pay_out", "idem", None
    )


async def test_within_the_limit_nothing_is_found(spec: ToolSpec) -> None:
    STATE["done"] = 60.0
    assert await history.findings(spec, ctx(), {"account": "A", "amount": 40}) == []
    query = STATE["queries"][0]
    assert query.arguments["account"] == "A" and query.since is None


async def test_the_sum_over_the_limit_asks_for_approval(spec: ToolSpec) -> None:
    STATE["done"] = 60.0
    found = await history.findings(spec, ctx(), {"account": "A", "amount": 40.01})
    assert [f.action for f in found] == ["approval"]
    assert "40.01 + 60 already done for this account = 100.01, above 100" in found[0].reason


async def test_a_call_without_the_field_adds_what_the_reader_says(spec: ToolSpec) -> None:
    STATE.update(done=60.0, whole=50.0)
    found = await history.findings(spec, ctx(), {"account": "A"})
    assert [f.action for f in found] == ["approval"]
    STATE["whole"] = None
    found = await history.findings(spec, ctx(), {"account": "A"})
    assert "unknown" in found[0].reason  # nobody can say what it adds: fail closed


@pytest.mark.parametrize("trouble", ["fail", "hang"])
async def test_an_unreadable_history_fails_closed(spec: ToolSpec, trouble: str) -> None:
    STATE[trouble] = True
    spec_fast = spec.__class__(**{**spec.__dict__, "timeout_s": 0.05})
    found = await history.findings(spec_fast, ctx(), {"account": "A", "amount": 1})
    assert [f.action for f in found] == ["approval"]
    assert "could not be read" in found[0].reason


async def test_a_sequence_rule_sees_the_earlier_action(spec: ToolSpec) -> None:
    STATE["changes"] = 1
    found = await history.findings(spec, ctx(), {"account": "A", "amount": 1})
    assert [(f.action, "follows change_account within 1h" in f.reason) for f in found] == [
        ("reject", True)
    ]
