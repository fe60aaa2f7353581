"""The handlers behind the real ToolExecutor, with a registry built from tools.yaml."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.demo.backend import ShopBackend
from app.demo.fixtures import DELIVERED_ORDER, FOREIGN_ORDER, LI_LEI, SHIPPED_ORDER
from app.llm.gateway import RequestedToolCall
from app.settings import PROJECT_ROOT
from app.tools.context import TurnScope
from app.tools.deps import Dependencies
from app.tools.executor import ToolExecutor
from app.tools.handlers import build_runner
from app.tools.loader import load_tools, resolve_python
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.demo.tools.conftest import count


class Events:
    def __init__(self) -> None:
        self.finished: list[tuple[str, str]] = []

    async def started(self, call: RequestedToolCall) -> None:
        return None

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None:
        self.finished.append((call.id, result.status))


@pytest.fixture
async def executor(shop: ShopBackend) -> AsyncIterator[ToolExecutor]:
    registry = ToolRegistry()
    async with httpx.AsyncClient() as http:
        for spec in load_tools(PROJECT_ROOT / "tools.yaml", resolve=resolve_python):
            registry.register(spec, build_runner(spec, http_client=lambda: http))
        yield ToolExecutor(registry, deps=Dependencies({ShopBackend: shop}))


def call(call_id: str, name: str, **arguments: Any) -> RequestedToolCall:
    return RequestedToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))


SCOPE = TurnScope("default", LI_LEI, "sess_wiring", "turn_1", "trace_1")


async def test_reads_and_writes_run_through_the_executor(
    executor: ToolExecutor, demo_path: Path
) -> None:
    calls = [
        call("c1", "query_order_status", order_id=SHIPPED_ORDER),
        call("c2", "track_shipment", tracking_number="SF123456789CN"),
        call("c3", "create_ticket", category="complaint", summary="包裹两天没有更新物流信息。"),
        call("c4", "request_refund", order_id=DELIVERED_ORDER, amount="20.5"),
    ]
    events = Events()
    results = await executor.run_calls(calls, SCOPE, events)
    assert [r.status for r in results] == ["success"] * 4, [r.error for r in results]
    assert results[0].data["tracking_number"] == "SF123456789CN"
    assert results[1].data["status"] == "in_transit"
    assert results[2].data["status"] == "open"
    assert results[3].data["amount"] == 20.5  # "20.5" coerced to a number by the schema
    assert sorted(events.finished) == [(f"c{i}", "success") for i in range(1, 5)]

    # The same turn replayed: same idempotency keys, so no second ticket or refund.
    replayed = await executor.run_calls(calls[2:], SCOPE, Events())
    assert replayed[0].data["ticket_id"] == results[2].data["ticket_id"]
    assert replayed[1].data["refund_id"] == results[3].data["refund_id"]
    assert count(demo_path, "tickets WHERE session_id = 'sess_wiring'") == 1
    assert count(demo_path, "refunds WHERE session_id = 'sess_wiring'") == 1


async def test_a_foreign_order_reaches_the_model_as_not_found(executor: ToolExecutor) -> None:
    [result] = await executor.run_calls(
        [call("c1", "query_order_status", order_id=FOREIGN_ORDER)], SCOPE, Events()
    )
    assert result.status == "error"
    assert result.error is not None and result.error.code == "order_not_found"
    content = json.loads(result.model_content())
    assert content["status"] == "error"
    assert FOREIGN_ORDER in content["error"]["message"]
    assert "韩梅梅" not in result.model_content()


async def test_bad_arguments_are_caught_before_the_handler(
    executor: ToolExecutor, demo_path: Path
) -> None:
    before = count(demo_path, "refunds")
    [result] = await executor.run_calls(
        [call("c1", "request_refund", order_id="2024", amount=-3)], SCOPE, Events()
    )
    assert result.status == "error"
    assert result.error is not None and result.error.code == "invalid_arguments"
    assert "order_id" in result.error.message and "amount" in result.error.message
    assert count(demo_path, "refunds") == before
