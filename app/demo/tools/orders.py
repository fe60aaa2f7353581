"""query_order_status: one order of the session's customer (within the session's tenant)."""

from __future__ import annotations

from typing import Any

from app.demo.backend import ShopBackend
from app.demo.errors import order_not_found
from app.demo.texts import order_status_text
from app.demo.tools._shared import money, refuse
from app.tools.context import ToolContext


async def query_order_status(ctx: ToolContext[ShopBackend], order_id: str) -> dict[str, Any]:
    order = await ctx.deps.store.order_for(ctx.tenant_id, ctx.user_id, order_id)
    if order is None:
        raise refuse(order_not_found(order_id))
    return {
        "order_id": order.id,
        "status": order.status,
        "status_text": order_status_text(order.status, order.language),
        "items": [
            {
                "product": line.product,
                "quantity": line.quantity,
                "price": money(line.unit_price_cents),
            }
            for line in order.lines
        ],
        "total_amount": money(order.total_cents),
        "currency": order.currency,
        "created_at": order.created_at,
        "updated_at": order.updated_at,
        "tracking_number": order.tracking_number,
        "carrier": order.carrier,
    }
