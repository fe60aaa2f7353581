"""The read-back of a confirmed call, from a tool loaded from YAML: what an argument left out
means, and what its resolver says it comes to now; a resolver that fails, hangs or answers for
an argument the call gave changes nothing of what the customer is told."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from app.errors import ToolsFileError
from app.tools.context import ToolContext
from app.tools.policy import confirm
from app.tools.shaping import Redactor
from app.tools.spec import ToolSpec
from tests.tools.policy.yaml_tool import call_context, load_one

STATE: dict[str, Any] = {}

YAML = """
version: 1
tools:
  - name: pay_back
    description: Pays an order's money back; used to test a confirmation's read-back.
    risk: write
    timeout_s: 5
    parameters:
      type: object
      additionalProperties: false
      required: [order]
      properties:
        order: {type: string}
        amount: {type: number}
    confirm:
      en: "pay back {amount} on {order}"
      zh: "为 {order} 退回 {amount}"
      absent:
        amount: {en: the whole order, zh: 整单}
      resolve: tests.tools.policy.test_confirm:{resolver}
    handler: {python: "tests.tools.fixture_tools:write_note"}
"""


async def what_is_left(ctx: ToolContext, order: str, amount: float | None = None) -> dict[str, Any]:
    STATE["seen"] = (ctx.tool, order, amount)
    trouble = STATE.get("trouble")
    if trouble == "crash":
        raise RuntimeError("a bug in the resolver")
    if trouble == "hang":
        await asyncio.sleep(3600)
    return {"amount": 179.0, "order": "someone else's"}


def load(tmp_path: Path, resolver: str = "what_is_left") -> ToolSpec:
    return load_one(tmp_path, YAML.replace("{resolver}", resolver))


@pytest.fixture
def spec(tmp_path: Path) -> ToolSpec:
    STATE.clear()
    return load(tmp_path)


def ctx() -> ToolContext:
    return call_context("pay_back")


async def test_a_left_out_argument_is_read_back_as_its_figure_and_its_meaning(
    spec: ToolSpec,
) -> None:
    args = {"order": "A1"}
    now = await confirm.resolved(spec, ctx(), args)
    assert now == {"amount": 179.0}  # only what the call left out: never its own "order"
    assert STATE["seen"] == ("pay_back", "A1", None)
    said = confirm.readback(spec, args, Redactor(), now)
    assert (said.en, said.zh) == (
        "pay back 179.00 (the whole order) on A1",
        "为 A1 退回 179.00（整单）",
    )


async def test_a_call_that_leaves_nothing_out_is_read_back_as_given(spec: ToolSpec) -> None:
    args = {"order": "A1", "amount": 20.0}
    assert await confirm.resolved(spec, ctx(), args) == {}
    assert "seen" not in STATE  # not even asked
    assert confirm.readback(spec, args, Redactor()).en == "pay back 20.00 on A1"


@pytest.mark.parametrize("trouble", ["crash", "hang"])
async def test_a_resolver_that_cannot_answer_leaves_the_meaning_alone(
    spec: ToolSpec, trouble: str
) -> None:
    STATE["trouble"] = trouble
    fast = dataclasses.replace(spec, timeout_s=0.05)
    args = {"order": "A1"}
    now = await confirm.resolved(fast, ctx(), args)
    assert now == {}
    assert confirm.readback(fast, args, Redactor(), now).en == "pay back the whole order on A1"


def test_a_resolver_that_does_not_exist_stops_loading(tmp_path: Path) -> None:
    with pytest.raises(ToolsFileError, match="confirm resolver not found"):
        load(tmp_path, resolver="no_such_resolver")
