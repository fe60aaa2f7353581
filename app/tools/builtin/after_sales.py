"""request_refund and request_return for the session customer's own orders (idempotent)."""

from __future__ import annotations

from typing import Any

from app.tools.builtin._demo import actor, demo_store, money, refusals, to_cents
from app.tools.context import ToolContext


async def request_refund(
    ctx: ToolContext, order_id: str, amount: float | None = None, reason: str | None = None
) -> dict[str, Any]:
    cents = None if amount is None else to_cents(amount)
    with refusals():
        refund = await demo_store(ctx).request_refund(
            actor(ctx), order_id=order_id, amount_cents=cents, reason=reason
        )
    return {
        "refund_id": refund.id,
        "order_id": refund.order_id,
        "amount": money(refund.amount_cents),
        "currency": refund.currency,
        "status": refund.status,
    }


async def request_return(
    ctx: ToolContext, order_id: str, reason: str | None = None
) -> dict[str, Any]:
    with refusals():
        created = await demo_store(ctx).request_return(actor(ctx), order_id=order_id, reason=reason)
    return {
        "return_id": created.id,
        "order_id": created.order_id,
        "status": created.status,
        "label_url": created.label_url,
    }
