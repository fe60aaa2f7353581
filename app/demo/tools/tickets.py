"""create_ticket: a service ticket for the session's customer (idempotent per call).

The summary is the model's words, often the customer's retold: it is stored masked (a ticket
system is read by many people; a full card or ID number has no place in it)."""

from __future__ import annotations

from typing import Any

from app.demo.backend import ShopBackend
from app.demo.tools._shared import actor, refusals
from app.errors import ToolHandlerError
from app.tools.context import ToolContext
from app.tools.shaping import Redactor

_REDACTOR = Redactor()


async def create_ticket(
    ctx: ToolContext[ShopBackend],
    category: str,
    summary: str,
    order_id: str | None = None,
    priority: str = "normal",
) -> dict[str, Any]:
    if len(summary.strip()) < 5:
        raise ToolHandlerError(
            "invalid_summary", "the summary must say in words what happened (5 to 500 characters)"
        )
    with refusals():
        ticket = await ctx.deps.store.create_ticket(
            actor(ctx),
            category=category,
            summary=_REDACTOR.text(summary.strip()),
            priority=priority,
            order_id=order_id,
        )
    return {
        "ticket_id": ticket.id,
        "status": ticket.status,
        "category": ticket.category,
        "priority": ticket.priority,
        "created_at": ticket.created_at,
    }
