"""request_refund and request_return: own orders, amount limits, one record per key."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.demo.fixtures import DELIVERED_ORDER, FOREIGN_ORDER, LI_LEI, SHIPPED_ORDER
from app.demo.tools.after_sales import request_refund, request_return
from app.errors import ToolHandlerError
from tests.demo.tools.conftest import Ctx, conforms, count


async def _refused(coro: object) -> ToolHandlerError:
    with pytest.raises(ToolHandlerError) as caught:
        await coro  # type: ignore[misc]
    return caught.value


async def test_refund_defaults_to_the_order_total(ctx: Ctx, demo_path: Path) -> None:
    data = await request_refund(ctx(), order_id=DELIVERED_ORDER, reason="质量问题")
    conforms("request_refund", data)
    assert (data["amount"], data["currency"], data["status"]) == (89.0, "CNY", "approved")
    # A full, approved refund closes the order.
    assert count(demo_path, "orders WHERE id = ? AND status = 'refunded'", DELIVERED_ORDER) == 1


async def test_refund_above_the_order_total_is_refused(ctx: Ctx, demo_path: Path) -> None:
    error = await _refused(request_refund(ctx(), order_id=DELIVERED_ORDER, amount=89.01))
    assert error.code == "amount_exceeds_total"
    assert "89.00" in error.message
    assert count(demo_path, "refunds WHERE order_id = ?", DELIVERED_ORDER) == 0


async def test_partial_refunds_cannot_add_up_past_the_total(ctx: Ctx) -> None:
    first = await request_refund(ctx(key="idem_a"), order_id=DELIVERED_ORDER, amount=60)
    assert first["amount"] == 60.0
    error = await _refused(request_refund(ctx(key="idem_b"), order_id=DELIVERED_ORDER, amount=30))
    assert error.code == "amount_exceeds_refundable"
    assert "29.00" in error.message
    rest = await request_refund(ctx(key="idem_c"), order_id=DELIVERED_ORDER, amount=29)
    assert rest["status"] == "approved"


async def test_same_key_returns_the_same_refund(ctx: Ctx, demo_path: Path) -> None:
    first = await request_refund(ctx(key="idem_r"), order_id=DELIVERED_ORDER, amount=10)
    again = await request_refund(ctx(key="idem_r"), order_id=DELIVERED_ORDER, amount=10)
    assert again == first
    assert count(demo_path, "refunds WHERE order_id = ?", DELIVERED_ORDER) == 1


async def test_refund_for_a_foreign_order_looks_like_a_missing_one(ctx: Ctx) -> None:
    foreign = await _refused(request_refund(ctx(), order_id=FOREIGN_ORDER, amount=1))
    missing = await _refused(request_refund(ctx(), order_id="202405209998", amount=1))
    assert foreign.code == missing.code == "order_not_found"


def _big_delivered_order(path: Path) -> tuple[str, str, int]:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT id, customer_id, total_cents FROM orders"
            " WHERE status = 'delivered' AND total_cents > 60000 ORDER BY id LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    return row[0], row[1], row[2]


async def test_large_refunds_name_their_amount_and_wait_for_review(
    ctx: Ctx, demo_path: Path
) -> None:
    order_id, owner, total = _big_delivered_order(demo_path)
    # By default the amount would slip past the approval rule, which only sees arguments.
    error = await _refused(request_refund(ctx(user_id=owner), order_id=order_id))
    assert error.code == "amount_required"
    data = await request_refund(ctx(user_id=owner), order_id=order_id, amount=total / 100)
    conforms("request_refund", data)
    assert data["status"] == "pending_review"
    assert count(demo_path, "orders WHERE id = ? AND status = 'delivered'", order_id) == 1


async def test_refund_amount_with_fractions_of_a_fen_is_refused(ctx: Ctx) -> None:
    error = await _refused(request_refund(ctx(), order_id=DELIVERED_ORDER, amount=1.005))
    assert error.code == "invalid_amount"


@pytest.mark.parametrize("amount", [float("inf"), float("nan")])
async def test_a_non_finite_amount_is_refused_by_the_handler_too(ctx: Ctx, amount: float) -> None:
    error = await _refused(request_refund(ctx(), order_id=DELIVERED_ORDER, amount=amount))
    assert error.code == "invalid_amount"


async def test_return_of_a_delivered_order(ctx: Ctx, demo_path: Path) -> None:
    data = await request_return(ctx(), order_id=DELIVERED_ORDER, reason="尺码不合适")
    conforms("request_return", data)
    assert data["status"] == "created"
    assert data["label_url"].startswith("https://") and data["return_id"] in data["label_url"]
    again = await request_return(ctx(), order_id=DELIVERED_ORDER, reason="尺码不合适")
    assert again == data
    assert count(demo_path, "returns WHERE order_id = ?", DELIVERED_ORDER) == 1
    second = await _refused(request_return(ctx(key="idem_other"), order_id=DELIVERED_ORDER))
    assert second.code == "return_already_requested"


async def test_return_of_an_undelivered_or_foreign_order_is_refused(ctx: Ctx) -> None:
    shipped = await _refused(request_return(ctx(), order_id=SHIPPED_ORDER))
    assert shipped.code == "order_not_returnable"
    foreign = await _refused(request_return(ctx(), order_id=FOREIGN_ORDER))
    assert foreign.code == "order_not_found"


async def test_writes_are_recorded_against_the_session(ctx: Ctx, demo_path: Path) -> None:
    await request_return(ctx(key="idem_audit"), order_id=DELIVERED_ORDER)
    assert (
        count(
            demo_path,
            "returns WHERE idempotency_key = 'idem_audit' AND customer_id = ?"
            " AND tenant_id = 'default' AND session_id = 'sess_test'",
            LI_LEI,
        )
        == 1
    )
