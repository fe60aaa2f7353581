"""request_refund and request_return for the session customer's own orders (idempotent)."""

from __future__ import annotations

from typing import Any

from app.demo.backend import ShopBackend
from app.demo.tools._shared import actor, money, refusals, refuse, to_cents
from app.tools.context import ToolContext
from app.tools.policy.history import History, HistoryQuery


async def request_refund(
    ctx: ToolContext[ShopBackend],
    order_id: str,
    amount: float | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    cents = None if amount is None else to_cents(amount)
    with refusals():
        refund = await ctx.deps.store.request_refund(
            actor(ctx), order_id=order_id, amount_cents=cents, reason=reason
        )
    return {
        "refund_id": refund.id,
        "order_id": refund.order_id,
        "amount": money(refund.amount_cents),
        "currency": refund.currency,
        "status": refund.status,
    }


async def refund_precheck(
    ctx: ToolContext[ShopBackend],
    order_id: str,
    amount: float | None = None,
    reason: str | None = None,
) -> None:
    """request_refund's precheck (tools.yaml): raises the refusal the refund would get now, so
    a refund the backend refuses (a cancelled or unpaid order, a missing amount above 500)
    is answered at once instead of first waiting for a human's approval."""
    cents = None if amount is None else to_cents(amount)
    store = ctx.deps.store
    refusal = await store.refund_refusal(actor(ctx), order_id=order_id, amount_cents=cents)
    if refusal is not None:
        raise refuse(refusal)


async def refund_left(
    ctx: ToolContext[ShopBackend],
    order_id: str,
    amount: float | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """request_refund's read-back figure (tools.yaml, `confirm.resolve`): a refund without an
    amount refunds what is left of the order, and this is how much that is now."""
    left = await _left_cents(ctx, order_id)
    return {} if left is None else {"amount": money(left)}


async def _left_cents(ctx: ToolContext[ShopBackend], order_id: str) -> int | None:
    """What is left to refund of the customer's order; None when it is not theirs."""
    store = ctx.deps.store
    order = await store.order_for(ctx.tenant_id, ctx.user_id, order_id)
    if order is None:
        return None
    done = await store.refunded_cents(ctx.tenant_id, ctx.user_id, order_id=order_id)
    return max(order.total_cents - done, 0)


async def request_return(
    ctx: ToolContext[ShopBackend], order_id: str, reason: str | None = None
) -> dict[str, Any]:
    with refusals():
        created = await ctx.deps.store.request_return(actor(ctx), order_id=order_id, reason=reason)
    return {
        "return_id": created.id,
        "order_id": created.order_id,
        "status": created.status,
        "label_url": created.label_url,
    }


async def return_precheck(
    ctx: ToolContext[ShopBackend], order_id: str, reason: str | None = None
) -> None:
    """request_return's precheck (tools.yaml): a return the backend refuses (someone else's
    order, one not delivered, one already returned) is answered before any read-back."""
    refusal = await ctx.deps.store.return_refusal(actor(ctx), order_id=order_id)
    if refusal is not None:
        raise refuse(refusal)


async def refund_history(ctx: ToolContext[ShopBackend], query: HistoryQuery) -> History:
    """What was already refunded to this customer: on the call's order (`per: order_id`) or
    in the rule's window (`per: customer`). A call without an amount refunds what is left of
    the order, so that is what it adds."""
    store = ctx.deps.store
    order_id = str(query.arguments.get("order_id", ""))
    per_order = query.rule.per == "order_id"
    done = await store.refunded_cents(
        ctx.tenant_id, ctx.user_id, order_id=order_id if per_order else None, since=query.since
    )
    this_call = None
    if query.arguments.get("amount") is None:
        this_call = money(await _left_cents(ctx, order_id) or 0)
    return History(done=money(done), this_call=this_call)
