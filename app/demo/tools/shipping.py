"""track_shipment: the carrier's tracking history of one of the customer's parcels."""

from __future__ import annotations

from typing import Any

from app.demo.backend import ShopBackend
from app.demo.errors import shipment_not_found
from app.demo.tools._shared import refuse
from app.tools.context import ToolContext


async def track_shipment(ctx: ToolContext[ShopBackend], tracking_number: str) -> dict[str, Any]:
    shipment = await ctx.deps.store.shipment_for(
        ctx.tenant_id, ctx.user_id, tracking_number.upper()
    )
    if shipment is None:
        raise refuse(shipment_not_found(tracking_number))
    return {
        "tracking_number": shipment.tracking_number,
        "carrier": shipment.carrier,
        "status": shipment.status,
        "estimated_delivery": shipment.estimated_delivery,
        "events": [
            {"time": e.time, "location": e.location, "description": e.description}
            for e in shipment.events
        ],
    }
