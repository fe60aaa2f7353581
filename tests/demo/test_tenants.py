"""The demo data belongs to the tenants in HERMES_DEMO_TENANTS: over HTTP with API keys of two
tenants, a session of another tenant whose user id matches a demo customer finds none of that
customer's orders or parcels, in the same words as for an order that is not theirs."""

from __future__ import annotations

import json
from typing import Any

from app.demo.fixtures import HAN_MEIMEI, LI_LEI, SHIPPED_ORDER, SHIPPED_TRACKING
from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.settings import Settings
from app.testing import LiveService, serve

ACME = "acme-agent-key-000001"
GLOBEX = "globex-agent-key-0001"


async def tool_result(
    svc: LiveService, fake_llm: FakeLLMServer, key: str, user_id: str, call: ToolCall
) -> dict[str, Any]:
    """Run one turn in which the model makes `call`; what the tool answered the model."""
    headers = {"X-API-Key": key}
    created = await svc.client.post("/v1/sessions", json={"user_id": user_id}, headers=headers)
    assert created.status_code == 201, created.text
    fake_llm.enqueue(ToolCalls(call), Reply("Let me tell you."))
    asked = len(fake_llm.requests)
    response = await svc.client.post(
        f"/v1/sessions/{created.json()['id']}/messages",
        # a parcel question offers both tools the calls below use
        json={"content": f"track my parcel for order {SHIPPED_ORDER}"},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    answer = fake_llm.requests[asked + 1].messages[-1]
    assert answer["role"] == "tool"
    return dict(json.loads(answer["content"]))


def order_call() -> ToolCall:
    return ToolCall("query_order_status", {"order_id": SHIPPED_ORDER}, id="q1")


def shipment_call() -> ToolCall:
    return ToolCall("track_shipment", {"tracking_number": SHIPPED_TRACKING}, id="t1")


async def test_another_tenant_with_the_same_user_id_finds_no_order(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:agent:{ACME}", f"globex:agent:{GLOBEX}"],
        demo_tenants=["default", "acme"],
    )
    async with serve(settings) as svc:
        owner = await tool_result(svc, fake_llm, ACME, LI_LEI, order_call())
        assert owner["status"] == "success"
        assert owner["data"]["order_id"] == SHIPPED_ORDER and owner["data"]["status"] == "shipped"

        outsider = await tool_result(svc, fake_llm, GLOBEX, LI_LEI, order_call())
        assert outsider["status"] == "error"
        assert outsider["error"]["code"] == "order_not_found"
        # Word for word what the owning tenant's other customer is told.
        not_theirs = await tool_result(svc, fake_llm, ACME, HAN_MEIMEI, order_call())
        assert outsider["error"] == not_theirs["error"]

        parcel = await tool_result(svc, fake_llm, GLOBEX, LI_LEI, shipment_call())
        assert parcel["error"]["code"] == "shipment_not_found"
        assert (await tool_result(svc, fake_llm, ACME, LI_LEI, shipment_call()))["status"] == (
            "success"
        )


def test_the_demo_data_belongs_to_the_local_tenant_by_default() -> None:
    assert Settings().demo.tenants == ["default"]
    assert Settings(demo_tenants=" acme, default ,").demo.tenants == ["acme", "default"]
