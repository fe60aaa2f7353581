"""query_order_status: the customer's own orders only; a foreign order looks missing."""

from __future__ import annotations

import pytest

from app.demo.fixtures import (
    DELIVERED_ORDER,
    FOREIGN_ORDER,
    HAN_MEIMEI,
    SHIPPED_ORDER,
    SHIPPED_TRACKING,
)
from app.demo.tools.orders import query_order_status
from app.errors import ToolHandlerError
from tests.demo.tools.conftest import Ctx, conforms


async def test_shipped_fixture_order(ctx: Ctx) -> None:
    data = await query_order_status(ctx(), order_id=SHIPPED_ORDER)
    conforms("query_order_status", data)
    assert data["order_id"] == SHIPPED_ORDER
    assert data["status"] == "shipped"
    assert data["status_text"] == "已发货"
    assert data["tracking_number"] == SHIPPED_TRACKING
    assert data["carrier"] == "SF Express"
    assert data["currency"] == "CNY"
    assert data["total_amount"] == pytest.approx(
        sum(i["price"] * i["quantity"] for i in data["items"])
    )


async def test_delivered_fixture_order_totals_89(ctx: Ctx) -> None:
    data = await query_order_status(ctx(), order_id=DELIVERED_ORDER)
    conforms("query_order_status", data)
    assert data["status"] == "delivered"
    assert data["total_amount"] == 89.0
    assert data["currency"] == "CNY"


async def test_unshipped_order_has_no_tracking(ctx: Ctx) -> None:
    data = await query_order_status(ctx(user_id=HAN_MEIMEI), order_id=FOREIGN_ORDER)
    conforms("query_order_status", data)
    assert data["status"] == "paid"
    assert data["tracking_number"] is None
    assert data["carrier"] is None


async def _refusal(ctx: Ctx, order_id: str) -> ToolHandlerError:
    with pytest.raises(ToolHandlerError) as caught:
        await query_order_status(ctx(), order_id=order_id)
    return caught.value


async def test_foreign_order_answers_exactly_like_a_missing_one(ctx: Ctx) -> None:
    missing_id = "202405209998"
    foreign = await _refusal(ctx, FOREIGN_ORDER)
    missing = await _refusal(ctx, missing_id)
    assert foreign.code == missing.code == "order_not_found"
    assert foreign.message.replace(FOREIGN_ORDER, "<id>") == missing.message.replace(
        missing_id, "<id>"
    )
    assert foreign.retryable is missing.retryable is False
