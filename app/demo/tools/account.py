"""reset_password and update_contact_info for the session's customer only."""

from __future__ import annotations

from typing import Any

from app.demo.backend import ShopBackend
from app.demo.tools._shared import actor, refusals
from app.tools.context import ToolContext
from app.tools.policy.history import History, HistoryQuery


def mask_phone(phone: str) -> str:
    return phone[:3] + "*" * max(len(phone) - 7, 1) + phone[-4:]


def mask_email(email: str) -> str:
    local, _, domain = email.partition("@")
    return f"{local[:1]}***@{domain}"


def mask_address(address: str) -> str:
    # Keep only the coarse part (city, district) so the customer can recognise it.
    if "," in address:
        return "***, " + address.rsplit(",", 1)[1].strip()
    return address[:6] + "***"


_MASKS = {"phone": mask_phone, "email": mask_email, "address": mask_address}


async def reset_password(ctx: ToolContext[ShopBackend], phone: str) -> dict[str, Any]:
    with refusals():
        reset = await ctx.deps.store.reset_password(actor(ctx), phone=phone)
    return {
        "status": "reset_link_sent",
        "channel": reset.channel,
        "masked_phone": mask_phone(reset.phone),
    }


async def update_contact_info(
    ctx: ToolContext[ShopBackend], field: str, value: str
) -> dict[str, Any]:
    with refusals():
        change = await ctx.deps.store.update_contact(actor(ctx), field=field, value=value)
    return {
        "field": change.field,
        "status": "updated",
        "masked_value": _MASKS[change.field](change.new_value),
    }


async def contact_change_history(ctx: ToolContext[ShopBackend], query: HistoryQuery) -> History:
    """How many times this customer's contact details changed in this session or window."""
    changes = await ctx.deps.store.contact_changes(
        ctx.tenant_id, ctx.user_id, session_id=ctx.session_id, since=query.since
    )
    return History(done=changes)
