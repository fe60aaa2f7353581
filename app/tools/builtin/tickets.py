"""create_ticket: a service ticket for the session's customer (idempotent per call)."""

from __future__ import annotations

from typing import Any

from app.errors import ToolHandlerError
from app.tools.builtin._demo import actor, demo_store, refusals
from app.tools.context import ToolContext


async def create_ticket(
    ctx: ToolContext,
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
        ticket = await demo_store(ctx).create_ticket(
            actor(ctx),
            category=category,
            summary=summary.strip(),
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
