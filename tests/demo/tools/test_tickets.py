"""create_ticket: one ticket per idempotency key, only about the customer's own orders."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.demo.fixtures import FOREIGN_ORDER, LI_LEI, SHIPPED_ORDER
from app.demo.tools.tickets import create_ticket
from app.errors import ToolHandlerError
from tests.demo.tools.conftest import Ctx, conforms, count

SUMMARY = "快递员未通知就把包裹放在门口，包裹丢失。"


async def test_creates_an_open_ticket(ctx: Ctx, demo_path: Path) -> None:
    before = count(demo_path, "tickets WHERE customer_id = ?", LI_LEI)
    data = await create_ticket(
        ctx(), category="complaint", summary=SUMMARY, order_id=SHIPPED_ORDER, priority="high"
    )
    conforms("create_ticket", data)
    assert data["status"] == "open"
    assert (data["category"], data["priority"]) == ("complaint", "high")
    assert count(demo_path, "tickets WHERE customer_id = ?", LI_LEI) == before + 1
    assert (
        count(demo_path, "tickets WHERE id = ? AND order_id = ?", data["ticket_id"], SHIPPED_ORDER)
        == 1
    )


async def test_same_key_returns_the_same_ticket_and_creates_one(ctx: Ctx, demo_path: Path) -> None:
    first = await create_ticket(ctx(key="idem_k1"), category="complaint", summary=SUMMARY)
    again = await create_ticket(ctx(key="idem_k1"), category="complaint", summary=SUMMARY)
    other = await create_ticket(ctx(key="idem_k2"), category="complaint", summary=SUMMARY)
    assert again == first
    assert other["ticket_id"] != first["ticket_id"]
    assert count(demo_path, "tickets WHERE idempotency_key IN ('idem_k1', 'idem_k2')") == 2


async def test_concurrent_calls_with_one_key_create_one_ticket(ctx: Ctx, demo_path: Path) -> None:
    results = await asyncio.gather(
        *(create_ticket(ctx(key="idem_race"), category="other", summary=SUMMARY) for _ in range(5))
    )
    assert len({r["ticket_id"] for r in results}) == 1
    assert count(demo_path, "tickets WHERE idempotency_key = 'idem_race'") == 1


async def test_a_foreign_order_is_refused_and_nothing_is_written(ctx: Ctx, demo_path: Path) -> None:
    before = count(demo_path, "tickets")
    with pytest.raises(ToolHandlerError) as caught:
        await create_ticket(ctx(), category="complaint", summary=SUMMARY, order_id=FOREIGN_ORDER)
    assert caught.value.code == "order_not_found"
    assert count(demo_path, "tickets") == before


async def test_a_session_without_a_customer_cannot_open_tickets(ctx: Ctx) -> None:
    with pytest.raises(ToolHandlerError) as caught:
        await create_ticket(ctx(user_id="u1"), category="other", summary=SUMMARY)
    assert caught.value.code == "customer_not_found"


async def test_a_blank_summary_is_refused(ctx: Ctx, demo_path: Path) -> None:
    before = count(demo_path, "tickets")
    with pytest.raises(ToolHandlerError) as caught:
        await create_ticket(ctx(), category="other", summary="      ")
    assert caught.value.code == "invalid_summary"
    assert count(demo_path, "tickets") == before
