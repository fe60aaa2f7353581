"""What a user binding means, through HTTP on both engines: a customer key is bound to one customer
and reaches that customer's sessions only, on every route under `/v1/sessions/{id}` (another
customer's session is a 404, as another tenant's); a staff key is bound to no one. Every way of
making a principal refuses the other combinations: the keys API and `hermes keys`, JWTs,
bootstrap keys, and rows stored before the rule."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from typing import Any

import jwt
import pytest

from app.api.keys import make_key
from app.settings import Settings
from app.storage.keys import Actor, KeyStore
from app.testing import LiveService, serve
from tests.api.test_keys_cli import hermes_keys
from tests.api.test_sessions import assert_error

ADMIN, AGENT = "acme-admin-key-0001", "acme-agent-key-0001"
PEPPER = "pepper-for-the-binding-tests"
JWT_SECRET = "jwt-secret-for-the-binding-tests-0123"
PHONE, STREET = "13912345678", "88 Nanjing Road"


def _as(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def binding_settings(make_settings: Any) -> Settings:
    settings: Settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:admin:{ADMIN}", f"acme:agent:{AGENT}"],
        key_pepper=PEPPER,
        jwt_secret=JWT_SECRET,
        key_cache_ttl_s=0,
    )
    return settings


@pytest.fixture
async def svc(binding_settings: Settings) -> AsyncIterator[LiveService]:
    async with serve(binding_settings) as service:
        yield service


async def _key(svc: LiveService, **body: Any) -> str:
    response = await svc.client.post("/v1/keys", json=body, headers=_as(ADMIN))
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


async def _session(svc: LiveService, user_id: str, key: str = AGENT) -> str:
    response = await svc.client.post("/v1/sessions", json={"user_id": user_id}, headers=_as(key))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _token(**claims: Any) -> str:
    body = {"sub": "someone", "tenant": "acme", "exp": int(time.time()) + 300, **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, JWT_SECRET, "HS256")


async def _handed_off_and_closed(svc: LiveService, session_id: str) -> None:
    """The session has the customer's phone and street in it, a handoff, and a summary."""
    said = await svc.client.post(
        f"/v1/sessions/{session_id}/messages",
        json={"content": f"My phone is {PHONE}, I live at {STREET}"},
        headers=_as(AGENT),
    )
    assert said.status_code == 200, said.text
    asked = await svc.client.post(
        f"/v1/sessions/{session_id}/handoff", json={"reason": "angry"}, headers=_as(AGENT)
    )
    assert asked.status_code == 202, asked.text
    assert PHONE in asked.text  # the queue's view has the customer's words, in clear
    closed = await svc.client.post(f"/v1/sessions/{session_id}/close", json={}, headers=_as(AGENT))
    assert closed.status_code == 200, closed.text


async def test_a_customer_key_reads_no_other_customers_handoff_or_summary(
    svc: LiveService,
) -> None:
    mine = await _key(svc, role="customer", user_id="cust_0001")
    own = await _session(svc, "cust_0001")
    theirs = await _session(svc, "cust_0002")
    for session_id in (own, theirs):
        await _handed_off_and_closed(svc, session_id)

    for path in ("handoff", "summary"):
        assert (await svc.client.get(f"/v1/sessions/{own}/{path}", headers=_as(mine))).is_success
        refused = await svc.client.get(f"/v1/sessions/{theirs}/{path}", headers=_as(mine))
        assert_error(refused, 404, "session_not_found")
        assert PHONE not in refused.text and STREET not in refused.text


async def test_every_session_route_is_a_404_for_another_customers_key(svc: LiveService) -> None:
    """Walks the OpenAPI document, so a route added later is covered without editing this."""
    mine = await _key(svc, role="customer", user_id="cust_0001")
    theirs = await _session(svc, "cust_0002")
    spec = (await svc.client.get("/openapi.json", headers=_as(ADMIN))).json()
    tried = []
    for template, operations in spec["paths"].items():
        if "{session_id}" not in template:
            continue
        path = re.sub(r"\{(\w+)\}", lambda m: theirs if m[1] == "session_id" else "x1", template)
        for method in operations:
            body = {} if method in ("post", "put", "patch") else None
            response = await svc.client.request(method, path, json=body, headers=_as(mine))
            assert_error(response, 404, "session_not_found")
            tried.append(f"{method} {template}")
    # The session, its messages and turns, events, handoff and desk, approvals, steps.
    assert len(tried) >= 18, tried
    # Nothing of theirs changed: the session is still there, with no message from this key.
    kept = await svc.client.get(f"/v1/sessions/{theirs}/messages", headers=_as(AGENT))
    assert kept.status_code == 200 and kept.json()["items"] == []


async def test_a_customer_key_works_its_own_customers_sessions(svc: LiveService) -> None:
    mine = await _key(svc, role="customer", user_id="cust_0001")
    own = await _session(svc, "cust_0001", key=mine)
    said = await svc.client.post(
        f"/v1/sessions/{own}/messages", json={"content": "hello"}, headers=_as(mine)
    )
    assert said.status_code == 200, said.text
    asked = await svc.client.post(f"/v1/sessions/{own}/handoff", json={}, headers=_as(mine))
    assert asked.status_code == 202, asked.text
    assert (await svc.client.get(f"/v1/sessions/{own}/handoff", headers=_as(mine))).is_success
    memories = await svc.client.get("/v1/users/cust_0001/memories", headers=_as(mine))
    assert memories.status_code == 200
    assert_error(
        await svc.client.get("/v1/users/cust_0002/memories", headers=_as(mine)),
        404,
        "user_not_found",
    )
    # The desk is not a customer's: the queue, claiming, writing as the agent.
    assert_error(await svc.client.get("/v1/handoffs", headers=_as(mine)), 403, "forbidden")
    claim = await svc.client.post(f"/v1/sessions/{own}/handoff/claim", headers=_as(mine))
    assert_error(claim, 403, "forbidden")
    deleted = await svc.client.delete(f"/v1/sessions/{own}", headers=_as(mine))
    assert deleted.status_code == 204


async def test_the_keys_api_refuses_a_binding_that_does_not_fit_the_role(
    svc: LiveService,
) -> None:
    for body in (
        {"role": "customer"},  # a customer key for every customer: it read all their data
        {"role": "customer", "user_id": None},
        {"role": "agent", "user_id": "cust_0001"},  # a staff key scoped to nothing consistently
        {"role": "operator", "user_id": "cust_0001"},
        {"role": "admin", "user_id": "cust_0001"},
    ):
        refused = await svc.client.post("/v1/keys", json=body, headers=_as(ADMIN))
        assert_error(refused, 422, "validation_error")
    listed = await svc.client.get("/v1/keys", headers=_as(ADMIN))
    assert listed.json()["items"] == []  # nothing half-made


async def test_the_schema_says_which_bindings_are_refused(svc: LiveService) -> None:
    spec = (await svc.client.get("/openapi.json", headers=_as(ADMIN))).json()
    create = spec["components"]["schemas"]["CreateKey"]
    roles = [choice["properties"]["role"] for choice in create["oneOf"]]
    assert roles == [{"const": "customer"}, {"enum": ["agent", "operator", "admin"]}]


async def test_the_command_refuses_a_binding_that_does_not_fit_the_role(
    binding_settings: Settings,
) -> None:
    code, out, err = await hermes_keys(
        binding_settings, "create", "--tenant", "acme", "--role", "customer"
    )
    assert (code, out) == (2, "") and "bound to one customer" in err and "--user" in err
    code, out, err = await hermes_keys(
        binding_settings, "create", "--tenant", "acme", "--role", "operator", "--user", "u1"
    )
    assert (code, out) == (2, "") and "only customer keys are bound" in err


async def test_tokens_whose_role_and_user_do_not_fit_get_401(svc: LiveService) -> None:
    bound = _token(role="customer", user="cust_0001")
    assert (await svc.client.get("/v1/sessions", headers=_as(bound))).status_code == 200
    for token in (
        _token(role="customer"),
        _token(role="operator", user="cust_0001"),
        _token(role="agent", user="cust_0001"),
    ):
        refused = await svc.client.get("/v1/sessions", headers=_as(token))
        assert "do not fit" in assert_error(refused, 401, "unauthorized")["message"]


@pytest.mark.parametrize(
    ("role", "user_id"), [("customer", None), ("operator", "cust_0001"), ("agent", "cust_0002")]
)
async def test_a_key_stored_before_the_rule_is_refused(
    svc: LiveService, role: str, user_id: str | None
) -> None:
    made = make_key(PEPPER.encode())
    record = await KeyStore(svc.runtime.db).create(
        made.stored,
        tenant_id="acme",
        role=role,
        user_id=user_id,
        name="old",
        expires_at=None,
        actor=Actor("test", "admin"),
    )
    refused = await svc.client.get("/v1/sessions", headers=_as(made.key))
    assert "no longer valid" in assert_error(refused, 401, "unauthorized")["message"]
    rotated = await svc.client.post(f"/v1/keys/{record.id}/rotate", headers=_as(ADMIN))
    assert_error(rotated, 422, "validation_error")
    # The admin can still see it and revoke it.
    revoked = await svc.client.post(f"/v1/keys/{record.id}/revoke", headers=_as(ADMIN))
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
