"""Sessions API over a real socket: lifecycle, pagination, the one error shape, limits, auth."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from app.testing import LiveService, serve
from tests.conftest import new_session


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


async def test_create_get_delete(service: LiveService) -> None:
    created = await service.client.post(
        "/v1/sessions", json={"user_id": "cust_0001", "metadata": {"channel": "web"}}
    )
    assert created.status_code == 201
    body = created.json()
    session_id = body["id"]
    # >= 128 random bits: 18 bytes, URL-safe base64 after the prefix
    token = session_id.removeprefix("ses_")
    assert len(base64.urlsafe_b64decode(token + "==")) >= 16
    assert body["user_id"] == "cust_0001"
    assert body["status"] == "active"
    assert body["metadata"] == {"channel": "web"}
    assert body["created_at"].endswith("Z")

    got = await service.client.get(f"/v1/sessions/{session_id}")
    assert got.status_code == 200 and got.json()["id"] == session_id

    deleted = await service.client.delete(f"/v1/sessions/{session_id}")
    assert deleted.status_code == 204
    assert_error(await service.client.get(f"/v1/sessions/{session_id}"), 404, "session_not_found")
    assert_error(
        await service.client.delete(f"/v1/sessions/{session_id}"), 404, "session_not_found"
    )


async def test_ids_are_unique(service: LiveService) -> None:
    ids = {await new_session(service) for _ in range(20)}
    assert len(ids) == 20


async def test_unknown_session_is_404_everywhere(service: LiveService) -> None:
    for method, path in [
        ("GET", "/v1/sessions/ses_nope"),
        ("DELETE", "/v1/sessions/ses_nope"),
        ("GET", "/v1/sessions/ses_nope/messages"),
        ("GET", "/v1/sessions/ses_nope/events"),
    ]:
        assert_error(await service.client.request(method, path), 404, "session_not_found")
    response = await service.client.post("/v1/sessions/ses_nope/messages", json={"content": "hi"})
    assert_error(response, 404, "session_not_found")


async def test_malformed_bodies_are_422(service: LiveService) -> None:
    client = service.client
    err = assert_error(await client.post("/v1/sessions", json={}), 422, "validation_error")
    assert any(e["field"].endswith("user_id") for e in err["details"]["errors"])
    assert_error(
        await client.post(
            "/v1/sessions", content=b"{not json", headers={"content-type": "application/json"}
        ),
        400,  # not JSON at all: malformed, where 422 is a JSON body with invalid values
        "invalid_json",
    )
    assert_error(
        await client.post("/v1/sessions", json={"user_id": "u", "extra": 1}),
        422,
        "validation_error",
    )
    assert_error(
        await client.post("/v1/sessions", json={"user_id": "a b"}), 422, "validation_error"
    )
    session_id = await new_session(service)
    for body in ({}, {"content": ""}, {"content": 5}, {"content": "x", "client_message_id": ""}):
        response = await client.post(f"/v1/sessions/{session_id}/messages", json=body)
        assert_error(response, 422, "validation_error")
    assert_error(await client.get("/v1/sessions?limit=0"), 422, "validation_error")
    assert_error(await client.get("/v1/sessions?status=gone"), 422, "validation_error")


async def test_bodies_over_one_mebibyte_are_413(service: LiveService) -> None:
    big = {"user_id": "u1", "metadata": {"blob": "x" * (1024 * 1024)}}
    assert_error(await service.client.post("/v1/sessions", json=big), 413, "payload_too_large")

    async def chunks():
        yield b'{"user_id": "u1", "metadata": {"blob": "'
        for _ in range(17):
            yield b"y" * 65536
        yield b'"}}'

    # No Content-Length (chunked): the limit still holds while reading.
    response = await service.client.post(
        "/v1/sessions", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_error(response, 413, "payload_too_large")
    listing = await service.client.get("/v1/sessions")
    assert listing.json()["items"] == []  # nothing was stored


async def test_list_with_filters_and_cursor(service: LiveService) -> None:
    mine = [await new_session(service, "alice") for _ in range(5)]
    await new_session(service, "bob")
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"user_id": "alice", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await service.client.get("/v1/sessions", params=params)).json()
        seen.extend(s["id"] for s in page["items"])
        assert all(s["user_id"] == "alice" for s in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(mine) and len(seen) == len(set(seen))
    assert seen == list(reversed(mine))  # newest first
    everyone = (await service.client.get("/v1/sessions", params={"limit": 200})).json()
    assert len(everyone["items"]) == 6 and everyone["next_cursor"] is None
    archived = (await service.client.get("/v1/sessions", params={"status": "archived"})).json()
    assert archived["items"] == []
    bad = await service.client.get("/v1/sessions", params={"cursor": "garbage!!"})
    assert_error(bad, 422, "validation_error")


async def test_unknown_route_and_method(service: LiveService) -> None:
    assert_error(await service.client.get("/v1/nothing"), 404, "not_found")
    assert_error(await service.client.put("/v1/sessions"), 405, "method_not_allowed")


async def test_healthz(service: LiveService) -> None:
    for path in ("/healthz", "/v1/healthz"):
        response = await service.client.get(path)
        assert response.status_code == 200
        body = response.json()
        assert body["status"] == "ok" and body["checks"]["database"] == "ok"


async def test_metrics_endpoint(service: LiveService) -> None:
    await service.client.get("/healthz")
    text = (await service.client.get("/metrics")).text
    assert 'hermes_http_requests_total{method="GET",route="/healthz",status="200"}' in text


async def test_api_keys_scope_tenants(make_settings: Any) -> None:
    agent_a = "acme-agent-key-0001"
    agent_b = "globex-agent-key-01"
    settings = make_settings(
        auth="api_key", api_keys=[f"acme:agent:{agent_a}", f"globex:agent:{agent_b}"]
    )
    async with serve(settings) as svc:
        client = svc.client
        assert_error(await client.get("/v1/sessions"), 401, "unauthorized")
        assert_error(
            await client.get("/v1/sessions", headers={"Authorization": "Bearer wrong-key-000000"}),
            401,
            "unauthorized",
        )
        a = {"Authorization": f"Bearer {agent_a}"}
        b = {"X-API-Key": agent_b}
        created = await client.post("/v1/sessions", json={"user_id": "u1"}, headers=a)
        assert created.status_code == 201
        session_id = created.json()["id"]
        assert (await client.get(f"/v1/sessions/{session_id}", headers=a)).status_code == 200
        # Another tenant sees nothing: 404, never 403.
        assert_error(
            await client.get(f"/v1/sessions/{session_id}", headers=b), 404, "session_not_found"
        )
        assert_error(
            await client.post(
                f"/v1/sessions/{session_id}/messages", json={"content": "hi"}, headers=b
            ),
            404,
            "session_not_found",
        )
        assert (await client.get("/v1/sessions", headers=b)).json()["items"] == []
        assert (await client.get("/healthz")).status_code == 200  # probes need no key


async def test_metadata_is_capped_at_16_kib(service: LiveService) -> None:
    client = service.client
    err = assert_error(
        await client.post("/v1/sessions", json={"user_id": "u1", "metadata": {"x": "y" * 17408}}),
        422,
        "validation_error",
    )
    [problem] = err["details"]["errors"]
    assert problem["field"] == "body.metadata" and "16384 bytes (16 KiB)" in problem["message"]
    # Measured as stored: compact JSON in UTF-8 ('{"x":""}' is 8 bytes, each 汉 is 3).
    at_cap = {"x": "y" * (16384 - 8)}
    created = await client.post("/v1/sessions", json={"user_id": "u1", "metadata": at_cap})
    assert created.status_code == 201 and created.json()["metadata"] == at_cap
    over = {"x": "汉" * (16384 // 3)}
    response = await client.post("/v1/sessions", json={"user_id": "u1", "metadata": over})
    assert_error(response, 422, "validation_error")
    listing = (await client.get("/v1/sessions")).json()["items"]
    assert len(listing) == 1  # only the session at the cap was stored


async def test_sensitive_metadata_is_stored_masked(service: LiveService) -> None:
    """A client's metadata is shown as stored, and stored masked: no full phone, card or ID
    number, no secret under a secret's name; the rest as sent."""
    metadata = {
        "channel": "web",
        "callback": "13912345678",
        "nested": {"card": "6222 0212 3456 7890 123", "password": "hunter2hunter2"},
    }
    created = await service.client.post(
        "/v1/sessions", json={"user_id": "u1", "metadata": metadata}
    )
    assert created.status_code == 201, created.text
    masked = {
        "channel": "web",
        "callback": "139****5678",
        "nested": {"card": "****0123", "password": "****"},
    }
    assert created.json()["metadata"] == masked
    session_id = created.json()["id"]
    assert (await service.client.get(f"/v1/sessions/{session_id}")).json()["metadata"] == masked
