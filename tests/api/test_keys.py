"""Managed API keys through HTTP, on both storage engines: an admin creates, lists, rotates and
revokes its tenant's keys; a revoked, rotated-away or expired key gets 401; a key bound to a user
sees that user only; the last-used time moves (at most once a minute); every change is audited;
and the database holds digests, never a key."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.api.keys import make_key
from app.settings import Settings
from app.storage.keys import Actor, KeyStore
from app.storage.session_writer import NO_SESSION
from app.testing import LiveService, serve
from tests.api.test_sessions import assert_error

ADMIN, OPERATOR, OTHER_ADMIN = "acme-admin-key-0001", "acme-operator-key-1", "zeta-admin-key-0001"
PEPPER = "pepper-for-the-key-tests-0001"


def _as(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def key_settings(make_settings: Any) -> Settings:
    settings: Settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:admin:{ADMIN}", f"acme:operator:{OPERATOR}", f"zeta:admin:{OTHER_ADMIN}"],
        key_pepper=PEPPER,
    )
    return settings


@pytest.fixture
async def svc(key_settings: Settings) -> AsyncIterator[LiveService]:
    async with serve(key_settings) as service:
        yield service


async def _create(svc: LiveService, key: str = ADMIN, **body: Any) -> dict[str, Any]:
    response = await svc.client.post("/v1/keys", json=body, headers=_as(key))
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def _until(check: Any, what: str, timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_an_admin_creates_lists_rotates_and_revokes_keys(svc: LiveService) -> None:
    created = await _create(svc, role="agent", name="web frontend", expires_in="90d")
    key, key_id = created["key"], created["id"]
    assert key.startswith("hk_") and key_id.startswith("key_") and key_id[4:] in key
    assert created["tenant_id"] == "acme" and created["role"] == "agent"
    assert created["status"] == "active" and created["last_used_at"] is None
    assert created["created_by"].startswith("key_")  # the bootstrap admin's subject, not its key
    made, expires = created["created_at"], created["expires_at"]
    assert expires is not None and expires > made

    session = await svc.client.post("/v1/sessions", json={"user_id": "u1"}, headers=_as(key))
    assert session.status_code == 201, session.text
    assert_error(await svc.client.get("/v1/keys", headers=_as(key)), 403, "forbidden")
    assert_error(await svc.client.get("/v1/keys", headers=_as(OPERATOR)), 403, "forbidden")

    listed = await svc.client.get("/v1/keys", headers=_as(ADMIN))
    assert listed.status_code == 200
    assert [k["id"] for k in listed.json()["items"]] == [key_id]
    assert "key" not in listed.json()["items"][0] and key not in listed.text
    one = await svc.client.get(f"/v1/keys/{key_id}", headers=_as(ADMIN))
    assert one.status_code == 200 and key not in one.text and one.json()["name"] == "web frontend"

    # Another tenant's admin: as if the key did not exist.
    assert_error(
        await svc.client.get(f"/v1/keys/{key_id}", headers=_as(OTHER_ADMIN)), 404, "key_not_found"
    )
    assert_error(
        await svc.client.post(f"/v1/keys/{key_id}/revoke", headers=_as(OTHER_ADMIN)),
        404,
        "key_not_found",
    )
    assert (await svc.client.get("/v1/keys", headers=_as(OTHER_ADMIN))).json()["items"] == []

    rotated = await svc.client.post(f"/v1/keys/{key_id}/rotate", headers=_as(ADMIN))
    assert rotated.status_code == 201, rotated.text
    new_key, new_id = rotated.json()["key"], rotated.json()["id"]
    assert new_id != key_id and rotated.json()["role"] == "agent"
    assert rotated.json()["name"] == "web frontend" and rotated.json()["expires_at"] is not None
    assert_error(await svc.client.get("/v1/sessions", headers=_as(key)), 401, "unauthorized")
    assert (await svc.client.get("/v1/sessions", headers=_as(new_key))).status_code == 200
    old = (await svc.client.get(f"/v1/keys/{key_id}", headers=_as(ADMIN))).json()
    assert old["status"] == "revoked" and old["rotated_to"] == new_id
    assert_error(
        await svc.client.post(f"/v1/keys/{key_id}/rotate", headers=_as(ADMIN)),
        404,
        "key_not_found",
    )

    revoked = await svc.client.post(f"/v1/keys/{new_id}/revoke", headers=_as(ADMIN))
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    refused = assert_error(
        await svc.client.get("/v1/sessions", headers={"X-API-Key": new_key}), 401, "unauthorized"
    )
    assert "revoked" in refused["message"]
    assert (await svc.client.get("/v1/keys", headers=_as(ADMIN))).json()["items"] == []
    every = await svc.client.get("/v1/keys", params={"include_revoked": True}, headers=_as(ADMIN))
    assert {k["id"] for k in every.json()["items"]} == {key_id, new_id}

    trail = await svc.client.get("/v1/audit", params={"action": "key.created"}, headers=_as(ADMIN))
    assert [e["target_id"] for e in trail.json()["items"]] == [key_id]
    everything = await svc.client.get("/v1/audit", headers=_as(ADMIN))
    actions = [(e["action"], e["target_id"]) for e in everything.json()["items"]]
    assert actions == [("key.created", key_id), ("key.rotated", key_id), ("key.revoked", new_id)]
    rotation = everything.json()["items"][1]
    assert rotation["details"]["new_key_id"] == new_id and rotation["role"] == "admin"
    assert key not in everything.text and new_key not in everything.text
    assert key.split("_", 2)[2] not in everything.text  # the secret (it may hold "_" itself)


async def test_bad_requests_and_a_key_that_is_not_one(svc: LiveService) -> None:
    for body in (
        {"role": "boss"},
        {"role": "agent", "expires_in": "90 days"},
        {"role": "agent", "expires_in": "0d"},
        {"role": "agent", "expires_in": "444442w"},  # past the year 9999: it was a 500
        {"role": "agent", "expires_in": "3651d"},  # more than ten years
        {"role": "agent", "tenant_id": "zeta"},  # an admin's keys are its own tenant's
        {"role": "agent", "user_id": ""},
    ):
        response = await svc.client.post("/v1/keys", json=body, headers=_as(ADMIN))
        assert_error(response, 422, "validation_error")
    longest = await _create(svc, role="agent", expires_in="3650d")
    listed = await svc.client.get("/v1/keys", headers=_as(ADMIN))
    assert listed.status_code == 200 and longest["id"] in listed.text
    created = await _create(svc, role="agent")
    forged = created["key"][:-4] + ("AAAA" if not created["key"].endswith("AAAA") else "BBBB")
    assert_error(await svc.client.get("/v1/sessions", headers=_as(forged)), 401, "unauthorized")
    unknown = "hk_0123456789abcdef_" + "x" * 43
    assert_error(await svc.client.get("/v1/sessions", headers=_as(unknown)), 401, "unauthorized")
    assert_error(
        await svc.client.get("/v1/keys/key_0123456789abcdef", headers=_as(ADMIN)),
        404,
        "key_not_found",
    )


async def test_an_expired_key_gets_401(svc: LiveService) -> None:
    made = make_key(PEPPER.encode())
    store = KeyStore(svc.runtime.db)
    await store.create(
        made.stored,
        tenant_id="acme",
        role="admin",
        user_id=None,
        name="",
        expires_at=time.time() - 1,
        actor=Actor("test", "admin"),
    )
    refused = assert_error(
        await svc.client.get("/v1/sessions", headers=_as(made.key)), 401, "unauthorized"
    )
    assert refused["details"]["expired"] is True
    listed = await svc.client.get("/v1/keys", headers=_as(ADMIN))
    assert [k["status"] for k in listed.json()["items"]] == ["expired"]


async def test_a_key_bound_to_a_user_sees_that_user_only(svc: LiveService) -> None:
    bound = (await _create(svc, role="customer", user_id="u1"))["key"]
    mine = await svc.client.post("/v1/sessions", json={"user_id": "u1"}, headers=_as(bound))
    assert mine.status_code == 201, mine.text
    assert_error(
        await svc.client.post("/v1/sessions", json={"user_id": "u2"}, headers=_as(bound)),
        403,
        "forbidden",
    )
    theirs = await svc.client.post("/v1/sessions", json={"user_id": "u2"}, headers=_as(ADMIN))
    assert theirs.status_code == 201
    other = theirs.json()["id"]
    for method, url, body in (
        ("GET", f"/v1/sessions/{other}", None),
        ("GET", f"/v1/sessions/{other}/messages", None),
        ("POST", f"/v1/sessions/{other}/messages", {"content": "hello"}),
        ("GET", f"/v1/sessions/{other}/steps", None),
        ("DELETE", f"/v1/sessions/{other}", None),
    ):
        response = await svc.client.request(method, url, json=body, headers=_as(bound))
        assert_error(response, 404, "session_not_found")
    listed = await svc.client.get("/v1/sessions", headers=_as(bound))
    assert [s["id"] for s in listed.json()["items"]] == [mine.json()["id"]]
    assert_error(
        await svc.client.get("/v1/sessions", params={"user_id": "u2"}, headers=_as(bound)),
        403,
        "forbidden",
    )
    assert_error(
        await svc.client.get("/v1/users/u2/memories", headers=_as(bound)), 404, "user_not_found"
    )
    assert (await svc.client.get("/v1/users/u1/memories", headers=_as(bound))).status_code == 200
    # The admin's unbound key still sees both.
    everyone = await svc.client.get("/v1/sessions", headers=_as(ADMIN))
    assert len(everyone.json()["items"]) == 2


async def test_the_last_used_time_moves_once_a_minute(svc: LiveService) -> None:
    created = await _create(svc, role="agent")
    url = f"/v1/keys/{created['id']}"

    async def last_used() -> str | None:
        value: str | None = (await svc.client.get(url, headers=_as(ADMIN))).json()["last_used_at"]
        return value

    assert await last_used() is None
    assert (await svc.client.get("/v1/sessions", headers=_as(created["key"]))).status_code == 200
    first = await _until(last_used, "the first use to be recorded")
    for _ in range(3):  # more uses within the minute: no more writes
        assert (
            await svc.client.get("/v1/sessions", headers=_as(created["key"]))
        ).status_code == 200
    # The writer keeps submission order: once this is done, any touch queued before it is too.
    await KeyStore(svc.runtime.db).transact(NO_SESSION, lambda tx: None)
    assert await last_used() == first


async def test_the_database_holds_digests_never_keys(
    svc: LiveService, key_settings: Settings, database_url: str | None
) -> None:
    created = await _create(svc, role="customer", user_id="u9")
    # hk_<16 hex>_<secret>: the secret is URL-safe base64 and may hold "_" itself.
    secret = created["key"].removeprefix("hk_").split("_", 1)[1]
    assert len(secret) >= 40
    assert (await svc.client.get("/v1/sessions", headers=_as(created["key"]))).status_code == 200
    await svc.client.post(f"/v1/keys/{created['id']}/rotate", headers=_as(ADMIN))
    if database_url is None:
        db_path = Path(key_settings.storage.db_path)
        dumped = b"".join(
            p.read_bytes() for p in db_path.parent.glob(db_path.name + "*") if p.is_file()
        )
        assert b"key_" + created["id"][4:].encode() in dumped  # the ids are there ...
        assert secret.encode() not in dumped and created["key"].encode() not in dumped
    else:
        with psycopg.connect(database_url) as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables"
                    " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
                )
            ]
            dumped_text = "\n".join(
                str(row[0])
                for table in tables
                for row in conn.execute(f'SELECT CAST(t AS text) FROM "{table}" t')
            )
        assert created["id"] in dumped_text  # ... and never a secret
        assert secret not in dumped_text and created["key"] not in dumped_text
