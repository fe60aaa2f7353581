"""The audit trail over HTTP: what lands in it (side-effecting tool calls, memory changes),
`GET /v1/audit` for admins of the tenant only, its filters and pages — and no content in it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.demo.fixtures import LI_LEI
from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.testing import LiveService, serve
from tests.api.test_sessions import assert_error
from tests.conftest import new_session

ADMIN, OPERATOR, OTHER_ADMIN = "acme-admin-key-0001", "acme-operator-key-1", "zeta-admin-key-0001"
AS_ADMIN = {"Authorization": f"Bearer {ADMIN}"}
SECRET_VALUE = "13912345678"  # a memory's value: never in the trail


@pytest.fixture
async def svc(make_settings: Any) -> AsyncIterator[LiveService]:
    settings = make_settings(
        auth="api_key",
        demo_tenants=["acme"],  # the demo's customers are acme's
        api_keys=[
            f"acme:admin:{ADMIN}",
            f"acme:operator:{OPERATOR}",
            f"zeta:admin:{OTHER_ADMIN}",
        ],
    )
    async with serve(settings) as service:
        service.client.headers["Authorization"] = f"Bearer {OPERATOR}"
        yield service


async def _trail(svc: LiveService, **params: Any) -> dict[str, Any]:
    response = await svc.client.get("/v1/audit", params=params, headers=AS_ADMIN)
    assert response.status_code == 200, response.text
    assert SECRET_VALUE not in response.text
    body: dict[str, Any] = response.json()
    return body


async def test_tool_calls_and_memory_changes_are_in_the_trail(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    memories = "/v1/users/cust_0001/memories"
    created = await svc.client.post(memories, json={"key": "contact.phone", "value": SECRET_VALUE})
    assert created.status_code == 201, created.text
    kept = await svc.client.post(memories, json={"key": "preference.language", "value": "en"})
    assert kept.status_code == 201
    forgot = await svc.client.post(f"{memories}:forget", json={"key": "contact.phone"})
    assert forgot.status_code == 200 and forgot.json()["deleted"] == [created.json()["id"]]
    deleted = await svc.client.delete(f"{memories}/{kept.json()['id']}")
    assert deleted.status_code == 204

    fake_llm.enqueue(
        ToolCalls(
            ToolCall("create_ticket", {"category": "complaint", "summary": "Parcel was lost."})
        ),
        Reply("I opened a ticket."),
    )
    session_id = await new_session(svc, LI_LEI)
    turn = await svc.client.post(
        f"/v1/sessions/{session_id}/messages",
        json={"content": "I want to complain, the courier lost my parcel"},
    )
    assert turn.status_code == 200, turn.text

    items = (await _trail(svc))["items"]
    actions = [e["action"] for e in items]
    assert actions.count("memory.written") == 2
    assert "memory.forgotten" in actions and "memory.deleted" in actions
    [tool] = [e for e in items if e["action"] == "tool.succeeded"]
    assert tool["details"]["tool"] == "create_ticket" and tool["session_id"] == session_id
    assert (tool["actor"], tool["role"]) == ("model", "model")
    assert "Parcel" not in str(tool)  # the arguments stay out
    operator = next(e for e in items if e["action"] == "memory.deleted")
    assert operator["role"] == "operator" and operator["target_id"] == kept.json()["id"]
    assert operator["details"]["key"] == "preference.language"
    ids = [e["id"] for e in items]
    assert ids == sorted(ids)

    # Filters.
    only = await _trail(svc, action="memory.forgotten")
    assert [e["target_id"] for e in only["items"]] == [created.json()["id"]]
    assert [e["action"] for e in (await _trail(svc, session_id=session_id))["items"]] == [
        "tool.succeeded"
    ]
    by_actor = await _trail(svc, actor=operator["actor"])
    assert {e["action"] for e in by_actor["items"]} == {
        "memory.written",
        "memory.forgotten",
        "memory.deleted",
    }
    assert (await _trail(svc, since="2999-01-01T00:00:00Z"))["items"] == []
    assert len((await _trail(svc, until="2999-01-01T00:00:00+08:00"))["items"]) == len(items)
    # The ends of what a time field takes, in the zones furthest from UTC.
    assert (await _trail(svc, since="9998-12-31T23:59:59-14:00"))["items"] == []
    assert len((await _trail(svc, since="0002-01-01T00:00:00+14:00"))["items"]) == len(items)
    # A window that ends before it starts is empty, not an error: the schema cannot tell them.
    window = {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    assert (await _trail(svc, **window))["items"] == []

    # Pages: `after` continues where `next_after` left off, nothing twice, nothing skipped.
    seen: list[int] = []
    after = 0
    while True:
        page = await _trail(svc, limit=2, after=after)
        seen += [e["id"] for e in page["items"]]
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert seen == ids


async def test_only_admins_of_the_tenant_read_the_trail(svc: LiveService) -> None:
    await svc.client.post(
        "/v1/users/cust_0001/memories", json={"key": "preference.language", "value": "en"}
    )
    assert (await _trail(svc))["items"]
    other = await svc.client.get("/v1/audit", headers={"Authorization": f"Bearer {OTHER_ADMIN}"})
    assert other.status_code == 200 and other.json()["items"] == []
    assert_error(await svc.client.get("/v1/audit"), 403, "forbidden")  # an operator
    assert_error(
        await svc.client.get("/v1/audit", headers={"Authorization": ""}), 401, "unauthorized"
    )


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 501},
        {"after": -1},
        {"after": 2**63},  # past SQLite's INTEGER: was a 500
        {"since": "yesterday"},
        # what `format: date-time` (RFC 3339) rules out, though pydantic alone would take it
        {"since": "2026-01-02T00:00:00"},
        {"until": "2026-01-02"},
        {"until": "0.5"},
        {"since": "9999-12-31T23:59:59-14:00"},  # the year 10000 in UTC
        {"until": "0001-01-01T00:00:00+14:00"},  # the year 0 in UTC
        {"action": ""},
    ],
)
async def test_bad_filters_are_422(svc: LiveService, params: dict[str, Any]) -> None:
    response = await svc.client.get("/v1/audit", params=params, headers=AS_ADMIN)
    assert_error(response, 422, "validation_error")
