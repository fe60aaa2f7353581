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
from app.knowledge.passages import KnowledgeSearch
from app.knowledge.service import KnowledgeBase
from app.llm.gateway import RequestedToolCall
from app.settings import PROJECT_ROOT
from app.storage.port import Database
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.tools.context import TurnScope
from app.tools.deps import Dependencies
from app.tools.executor import ToolExecutor
from app.tools.handlers import build_runner
from app.tools.loader import load_tools, resolve_python
from app.tools.policy import TurnPolicy
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.conftest import a_turn
from tests.demo.tools.conftest import count
from tests.tools.executors import executor_on


class Events:
    def __init__(self) -> None:
        self.finished: list[tuple[str, str]] = []

    async def started(self, call: RequestedToolCall) -> None:
        return None

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None:
        self.finished.append((call.id, result.status))


@pytest.fixture
async def hermes_db(open_db: Any) -> Database:
    """Hermes' own database (idempotency keys, approvals), beside the demo shop's."""
    db: Database = await open_db("hermes.db")
    return db


@pytest.fixture
async def executor(shop: ShopBackend, hermes_db: Database) -> AsyncIterator[ToolExecutor]:
    registry = ToolRegistry()
    async with httpx.AsyncClient() as http:
        for spec in load_tools(PROJECT_ROOT / "tools.yaml", resolve=resolve_python):
            registry.register(spec, build_runner(spec, http_client=lambda: http))
        # The runtime gives search_knowledge its knowledge base (RUNTIME_GIVEN).
        knowledge = KnowledgeBase(hermes_db)
        deps = Dependencies({ShopBackend: shop, KnowledgeSearch: knowledge})
        yield executor_on(hermes_db, registry, deps=deps)


@pytest.fixture
async def scope(hermes_db: Database) -> TurnScope:
    """A turn of Li Lei's session, as stored: the calls it makes are keyed to it."""
    session = await SessionStore(hermes_db).create("default", LI_LEI, {})
    turn_id = await a_turn(hermes_db, "default", session.id)
    return TurnScope(
        "default", LI_LEI, session.id, turn_id, "trace_1", writer=SessionWriter(session.id)
    )


def call(call_id: str, name: str, **arguments: Any) -> RequestedToolCall:
    return RequestedToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))


async def test_reads_and_writes_run_through_the_executor(
    executor: ToolExecutor, scope: TurnScope, demo_path: Path
) -> None:
    calls = [
        call("c1", "query_order_status", order_id=SHIPPED_ORDER),
        call("c2", "track_shipment", tracking_number="SF123456789CN"),
        call("c3", "create_ticket", category="complaint", summary="包裹两天没有更新物流信息。"),
        call("c4", "request_refund", order_id=DELIVERED_ORDER, amount="20.5"),
    ]
    events = Events()
    confirmed = TurnPolicy(confirmed=frozenset({"c4"}))  # the customer said yes to the refund
    results = await executor.run_calls(calls, scope, events, confirmed)
    assert [r.status for r in results] == ["success"] * 4, [r.error for r in results]
    assert results[0].data["tracking_number"] == "SF123456789CN"
    assert results[1].data["status"] == "in_transit"
    assert results[2].data["status"] == "open"
    assert results[3].data["amount"] == 20.5  # "20.5" coerced to a number by the schema
    assert sorted(events.finished) == [(f"c{i}", "success") for i in range(1, 5)]

    # The same turn replayed: same idempotency keys, so no second ticket or refund.
    replayed = await executor.run_calls(calls[2:], scope, Events(), confirmed)
    assert replayed[0].data["ticket_id"] == results[2].data["ticket_id"]
    assert replayed[1].data["refund_id"] == results[3].data["refund_id"]
    assert count(demo_path, f"tickets WHERE session_id = '{scope.session_id}'") == 1
    assert count(demo_path, f"refunds WHERE session_id = '{scope.session_id}'") == 1


async def test_a_foreign_order_reaches_the_model_as_not_found(
    executor: ToolExecutor, scope: TurnScope
) -> None:
    [result] = await executor.run_calls(
        [call("c1", "query_order_status", order_id=FOREIGN_ORDER)], scope, Events()
    )
    assert result.status == "error"
    assert result.error is not None and result.error.code == "order_not_found"
    content = json.loads(result.model_content())
    assert content["status"] == "error"
    assert FOREIGN_ORDER in content["error"]["message"]
    assert "韩梅梅" not in result.model_content()


async def test_bad_arguments_are_caught_before_the_handler(
    executor: ToolExecutor, scope: TurnScope, demo_path: Path
) -> None:
    before = count(demo_path, "refunds")
    [result] = await executor.run_calls(
        [call("c1", "request_refund", order_id="2024", amount=-3)], scope, Events()
    )
    assert result.status == "error"
    assert result.error is not None and result.error.code == "invalid_arguments"
    assert "order_id" in result.error.message and "amount" in result.error.message
    assert count(demo_path, "refunds") == before
