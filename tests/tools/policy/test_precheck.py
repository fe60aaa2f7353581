"""The tool's own precheck on real parts: a tool from YAML whose precheck refuses, asks to
retry, crashes or hangs."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from app.errors import ToolHandlerError, ToolsFileError
from app.tools.context import ToolContext
from app.tools.policy import precheck
from app.tools.spec import ToolSpec
from tests.tools.policy.yaml_tool import call_context, load_one

STATE: dict[str, Any] = {}

YAML = """
version: 1
tools:
  - name: pay_out
    description: Pays money out to the customer; used to test a tool's precheck.
    risk: write
    timeout_s: 5
    parameters:
      type: object
      additionalProperties: false
      required: [account]
      properties:
        account: {type: string}
        amount: {type: number}
    precheck: tests.tools.policy.test_precheck:{check}
    handler: {python: "tests.tools.fixture_tools:write_note"}
"""


async def account_check(ctx: ToolContext, account: str, amount: float | None = None) -> None:
    STATE["seen"] = (ctx.tool, account, amount)
    trouble = STATE.get("trouble")
    if trouble == "closed":
        raise ToolHandlerError("account_closed", f"account {account} is closed")
    if trouble == "retry":
        raise ToolHandlerError("backend_unavailable", "try later", retryable=True)
    if trouble == "crash":
        raise RuntimeError("a bug in the check")
    if trouble == "hang":
        await asyncio.sleep(3600)


def load(tmp_path: Path, check: str = "account_check") -> ToolSpec:
    return load_one(tmp_path, YAML.replace("{check}", check))


@pytest.fixture
def spec(tmp_path: Path) -> ToolSpec:
    STATE.clear()
    return load(tmp_path)


def ctx() -> ToolContext:
    return call_context("pay_out")


async def test_a_refusal_is_the_tools_own_answer(spec: ToolSpec) -> None:
    STATE["trouble"] = "closed"
    refused = await precheck.refusal(spec, ctx(), {"account": "A", "amount": 900})
    assert refused is not None and refused.status == "error"
    assert refused.error is not None and refused.error.code == "account_closed"
    assert STATE["seen"] == ("pay_out", "A", 900)  # called with the validated arguments


async def test_a_call_it_lets_through_goes_on(spec: ToolSpec) -> None:
    assert await precheck.refusal(spec, ctx(), {"account": "A"}) is None
    assert STATE["seen"] == ("pay_out", "A", None)


@pytest.mark.parametrize("trouble", ["retry", "crash", "hang"])
async def test_a_precheck_that_cannot_answer_refuses_nothing(spec: ToolSpec, trouble: str) -> None:
    # The approval and the tool's own checks still stand: a broken precheck must not turn a
    # call it cannot judge into a refusal, nor hold the turn.
    STATE["trouble"] = trouble
    fast = dataclasses.replace(spec, timeout_s=0.05)
    assert await precheck.refusal(fast, ctx(), {"account": "A", "amount": 1}) is None


async def test_a_tool_without_a_precheck_is_not_checked(spec: ToolSpec) -> None:
    STATE["trouble"] = "closed"
    plain = dataclasses.replace(spec, precheck=None)
    assert await precheck.refusal(plain, ctx(), {"account": "A"}) is None
    assert "seen" not in STATE


def test_a_precheck_that_does_not_exist_stops_loading(tmp_path: Path) -> None:
    with pytest.raises(ToolsFileError, match="precheck not found"):
        load(tmp_path, check="no_such_check")
