"""Browser-safe credentials through HTTP: a stream token reads one session's events and nothing
else, expires, and is taken only on the events route; the desk's cookie sign-in, its CSRF
token and sign-out; CORS lets another origin read the headers clients need."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.api.tokens import TokenSigner
from app.llm.testing import FakeLLMServer, Reply
from app.principal import Principal
from app.testing import LiveService, read_events, serve
from tests.api.test_sessions import assert_error

AGENT, OPERATOR, OTHER = "acme-agent-key-0001", "acme-operator-key-1", "globex-agent-key-01"
ADMIN = "acme-admin-key-0001"
SECRET = "s" * 40
ORIGIN = "https://desk.example.com"


@pytest.fixture
async def svc(make_settings: Any) -> AsyncIterator[LiveService]:
    settings = make_settings(
        auth="api_key",
        api_keys=[
            f"acme:agent:{AGENT}",
            f"acme:operator:{OPERATOR}",
            f"globex:agent:{OTHER}",
            f"acme:admin:{ADMIN}",
        ],
        auth_secret=SECRET,
        cors_origins=[ORIGIN],
    )
    async with serve(settings) as service:
        yield service


def _key(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _customer_key(svc: LiveService, user_id: str = "u1") -> str:
    """A customer-facing frontend's key for one customer (a customer key is always bound)."""
    made = await svc.client.post(
        "/v1/keys", json={"role": "customer", "user_id": user_id}, headers=_key(ADMIN)
    )
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


async def _session(svc: LiveService, key: str = AGENT) -> str:
    response = await svc.client.post("/v1/sessions", json={"user_id": "u1"}, headers=_key(key))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _token(svc: LiveService, session_id: str, key: str = AGENT, **extra: Any) -> Any:
    response = await svc.client.post(
        "/v1/stream-tokens", json={"session_id": session_id, **extra}, headers=_key(key)
    )
    assert response.status_code == 201, response.text
    return response.json()


async def _first_event(svc: LiveService, url: str, **params: Any) -> Any:
    async with svc.client.stream("GET", url, params={"after": 0, **params}) as response:
        assert response.status_code == 200
        async for event in read_events(response):
            return event
    raise AssertionError("no event")


async def test_a_stream_token_reads_its_session_s_events_without_a_header(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("hello there"))
    session_id = await _session(svc)
    await svc.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": "hi"}, headers=_key(AGENT)
    )
    minted = await _token(svc, session_id)
    assert minted["session_id"] == session_id
    assert minted["events_url"].endswith(f"?stream_token={minted['token']}")
    url = f"/v1/sessions/{session_id}/events"
    async with svc.client.stream(
        "GET", url, params={"stream_token": minted["token"], "after": 0}
    ) as response:
        assert response.status_code == 200
        kinds = [e.event async for e in read_events(response, until="turn.completed")]
    assert kinds[0] == "session.created" and "message.completed" in kinds


async def test_a_stream_token_opens_no_other_session(svc: LiveService) -> None:
    mine, other = await _session(svc), await _session(svc)
    token = (await _token(svc, mine))["token"]
    response = await svc.client.get(f"/v1/sessions/{other}/events", params={"stream_token": token})
    assert_error(response, 403, "forbidden")


async def test_a_stream_token_is_only_minted_for_a_session_the_key_may_see(
    svc: LiveService,
) -> None:
    acme = await _session(svc)
    response = await svc.client.post(
        "/v1/stream-tokens", json={"session_id": acme}, headers=_key(OTHER)
    )
    assert_error(response, 404, "session_not_found")
    assert_error(
        await svc.client.post("/v1/stream-tokens", json={"session_id": acme}), 401, "unauthorized"
    )


async def test_an_expired_or_forged_stream_token_is_refused(svc: LiveService) -> None:
    session_id = await _session(svc)
    url = f"/v1/sessions/{session_id}/events"
    principal = Principal("acme", "agent", "key_" + _subject(AGENT))
    expired, _ = TokenSigner(SECRET.encode()).issue(
        principal, 60, session_id=session_id, now=time.time() - 120
    )
    body = assert_error(
        await svc.client.get(url, params={"stream_token": expired}), 401, "unauthorized"
    )
    assert body["details"] == {"expired": True}
    forged, _ = TokenSigner(b"x" * 40).issue(principal, 60, session_id=session_id)
    assert_error(await svc.client.get(url, params={"stream_token": forged}), 401, "unauthorized")
    # A token signed right, for this session, still opens it: what failed above was the time
    # and the signature.
    fresh, _ = TokenSigner(SECRET.encode()).issue(principal, 60, session_id=session_id)
    event = await _first_event(svc, url, stream_token=fresh)
    assert event.event == "session.created"


async def test_a_stream_token_lives_no_longer_than_the_setting(svc: LiveService) -> None:
    session_id = await _session(svc)
    minted = await _token(svc, session_id, ttl_s=86400)
    expires = time.mktime(time.strptime(minted["expires_at"][:19], "%Y-%m-%dT%H:%M:%S"))
    assert expires - time.mktime(time.gmtime()) <= 300 + 2


async def test_a_stream_token_is_no_credential_anywhere_but_the_events_route(
    svc: LiveService,
) -> None:
    session_id = await _session(svc)
    token = (await _token(svc, session_id))["token"]
    for method, path in (
        ("GET", f"/v1/sessions/{session_id}"),
        ("GET", f"/v1/sessions/{session_id}/messages"),
        ("GET", f"/v1/sessions/{session_id}/approvals"),
        ("POST", "/v1/stream-tokens"),
    ):
        response = await svc.client.request(
            method, path, params={"stream_token": token}, json={"session_id": session_id}
        )
        assert_error(response, 401, "unauthorized")
    # Nor in a header, nor as a desk cookie: the kind is part of the signature.
    assert_error(
        await svc.client.get(f"/v1/sessions/{session_id}", headers=_key(token)), 401, "unauthorized"
    )
    svc.client.cookies.set("hermes_desk", token)
    assert_error(await svc.client.get(f"/v1/sessions/{session_id}"), 401, "unauthorized")


async def test_the_desk_signs_in_with_a_key_and_holds_only_an_httponly_cookie(
    svc: LiveService,
) -> None:
    client = svc.client
    assert_error(await client.get("/v1/sessions"), 401, "unauthorized")
    assert_error(
        await client.post("/v1/desk/login", json={"api_key": "wrong-key-000000000"}),
        401,
        "unauthorized",
    )
    # A customer-facing key holds conversations; it does not sign in at the desk.
    customer = await _customer_key(svc)
    refused = await client.post("/v1/desk/login", json={"api_key": customer})
    assert_error(refused, 403, "forbidden")
    assert "set-cookie" not in refused.headers
    response = await client.post("/v1/desk/login", json={"api_key": OPERATOR})
    assert response.status_code == 200, response.text
    signed_in = response.json()
    assert (signed_in["tenant_id"], signed_in["role"]) == ("acme", "operator")
    cookie = response.headers["set-cookie"].lower()
    assert "hermes_desk=" in cookie and "httponly" in cookie and "samesite=strict" in cookie
    assert OPERATOR.lower() not in cookie
    # Reads go through on the cookie alone.
    assert (await client.get("/v1/sessions")).status_code == 200
    again = (await client.get("/v1/desk/session")).json()
    assert again["csrf_token"] == signed_in["csrf_token"] and again["role"] == "operator"


async def test_a_desk_cookie_changes_nothing_without_its_csrf_token(svc: LiveService) -> None:
    client = svc.client
    signed_in = (await client.post("/v1/desk/login", json={"api_key": AGENT})).json()
    create = {"user_id": "u1"}
    assert_error(await client.post("/v1/sessions", json=create), 403, "csrf_failed")
    wrong = {"X-CSRF-Token": signed_in["csrf_token"][:-2] + "xx"}
    assert_error(await client.post("/v1/sessions", json=create, headers=wrong), 403, "csrf_failed")
    # Another sign-in's token is not this one's.
    async with httpx.AsyncClient(base_url=svc.base_url) as elsewhere:
        other = (await elsewhere.post("/v1/desk/login", json={"api_key": AGENT})).json()
    theirs = {"X-CSRF-Token": other["csrf_token"]}
    assert_error(await client.post("/v1/sessions", json=create, headers=theirs), 403, "csrf_failed")
    ok = {"X-CSRF-Token": signed_in["csrf_token"]}
    created = await client.post("/v1/sessions", json=create, headers=ok)
    assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    assert_error(await client.delete(f"/v1/sessions/{session_id}"), 403, "csrf_failed")
    assert (await client.delete(f"/v1/sessions/{session_id}", headers=ok)).status_code == 204


async def test_signing_out_ends_the_desk_session(svc: LiveService) -> None:
    client = svc.client
    signed_in = (await client.post("/v1/desk/login", json={"api_key": AGENT})).json()
    assert_error(await client.post("/v1/desk/logout"), 403, "csrf_failed")
    response = await client.post(
        "/v1/desk/logout", headers={"X-CSRF-Token": signed_in["csrf_token"]}
    )
    assert response.status_code == 204
    assert 'hermes_desk=""' in response.headers["set-cookie"] or "max-age=0" in (
        response.headers["set-cookie"].lower()
    )
    assert "hermes_desk" not in client.cookies
    assert_error(await client.get("/v1/sessions"), 401, "unauthorized")
    assert_error(await client.get("/v1/desk/session"), 401, "unauthorized")


async def test_cors_lets_another_origin_read_the_replay_and_request_id_headers(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    preflight = await svc.client.options(
        "/v1/sessions",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-request-id",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    fake_llm.enqueue(Reply("hello"))
    session_id = await _session(svc)
    body = {"content": "hi", "client_message_id": "m-1"}
    headers = {**_key(AGENT), "Origin": ORIGIN}
    url = f"/v1/sessions/{session_id}/messages"
    assert (await svc.client.post(url, json=body, headers=headers)).status_code == 200
    replayed = await svc.client.post(url, json=body, headers=headers)
    assert replayed.headers["idempotent-replayed"] == "true"
    exposed = {
        h.strip().lower() for h in replayed.headers["access-control-expose-headers"].split(",")
    }
    assert {"idempotent-replayed", "x-request-id"} <= exposed
    assert replayed.headers["x-request-id"]
    elsewhere = await svc.client.get(
        "/v1/sessions", headers={**_key(AGENT), "Origin": "https://evil.example"}
    )
    assert "access-control-allow-origin" not in elsewhere.headers


def _subject(key: str) -> str:
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()[:12]


async def test_a_customer_key_s_stream_token_follows_its_own_session(
    svc: LiveService,
) -> None:
    # What a customer's page does: its backend holds the key, the page gets a token.
    customer = await _customer_key(svc)
    session_id = await _session(svc, customer)
    minted = await _token(svc, session_id, customer)
    event = await _first_event(
        svc, minted["events_url"].split("?")[0], stream_token=minted["token"]
    )
    assert event.event == "session.created"
