"""track_shipment: tracking history of the customer's own parcels, newest event first."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from app.demo.fixtures import HAN_MEIMEI, LI_LEI, SHIPPED_TRACKING
from app.demo.tools.shipping import track_shipment
from app.errors import ToolHandlerError
from tests.demo.tools.conftest import Ctx, conforms


async def test_fixture_parcel_is_in_transit_with_sf(ctx: Ctx) -> None:
    data = await track_shipment(ctx(), tracking_number=SHIPPED_TRACKING)
    conforms("track_shipment", data)
    assert data["carrier"] == "SF Express"
    assert data["status"] == "in_transit"
    assert data["estimated_delivery"] == "2024-05-23"
    times = [datetime.fromisoformat(e["time"]) for e in data["events"]]
    assert len(times) >= 2
    assert times == sorted(times, reverse=True)


def _someone_elses_parcel(path: Path) -> tuple[str, str]:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT s.tracking_number, o.customer_id FROM shipments s"
            " JOIN orders o ON o.id = s.order_id WHERE o.customer_id NOT IN (?, ?)"
            " ORDER BY s.tracking_number LIMIT 1",
            (LI_LEI, HAN_MEIMEI),
        ).fetchone()
    finally:
        conn.close()
    return row[0], row[1]


async def test_a_generated_parcel_for_its_owner(ctx: Ctx, demo_path: Path) -> None:
    number, owner = _someone_elses_parcel(demo_path)
    data = await track_shipment(ctx(user_id=owner), tracking_number=number)
    conforms("track_shipment", data)
    assert data["tracking_number"] == number


async def test_foreign_parcel_answers_like_a_missing_one(ctx: Ctx, demo_path: Path) -> None:
    number, _owner = _someone_elses_parcel(demo_path)
    refusals = []
    for asked in (number, "SF000000000CN"):
        with pytest.raises(ToolHandlerError) as caught:
            await track_shipment(ctx(), tracking_number=asked)
        refusals.append((caught.value.code, caught.value.message.replace(asked, "<n>")))
    assert refusals[0] == refusals[1]
    assert refusals[0][0] == "shipment_not_found"
