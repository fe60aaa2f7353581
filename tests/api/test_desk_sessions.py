"""Desk sign-ins and stream tokens never outlive what made them, through HTTP: a cookie kept
after sign-out is refused at once, on every process; a desk sign-in and the stream tokens made
from a JWT end at its `exp`; a stream token made from a managed key that expires ends with it;
revoking the key ends its desk sign-in and the desk's stream tokens."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import httpx
import jwt
import pytest

from app.api.keys import make_key
from app.storage.keys import Actor, KeyStore
from app.testing import LiveService, serve
from tests.api.test_sessions import assert_error

AGENT = "acme-agent-key-0001"
ADMIN = "acme-admin-key-00001"
SECRET = "s" * 40
JWT_SECRET = "jwt-secret-for-desk-sessions-0123456789"
CSRF = "X-CSRF-Token"
LIVES_S = 3  # how long the short-lived credentials below live


@pytest.fixture
def settings(make_settings: Any) -> Any:
    return make_settings(
        auth="api_key",
        api_keys=[f"acme:agent:{AGENT}", f"acme:admin:{ADMIN}"],
        auth_secret=SECRET,
        jwt_secret=JWT_SECRET,
        jwt_leeway_s=0,  # the token ends at its exp exactly
    )


@pytest.fixture
async def svc(settings: Any) -> AsyncIterator[LiveService]:
    async with serve(settings) as service:
        yield service


def _bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


def _jwt(lives_s: int) -> tuple[str, int]:
    exp = int(time.time()) + lives_s
    claims = {"sub": "alice", "tenant": "acme", "role": "agent", "exp": exp}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256"), exp


def _unix(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@contextlib.asynccontextmanager
async def _signed_in(
    base_url: str, credential: str
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, Any]]]:
    """A browser of its own, signed in at the desk with `credential`, and the sign-in."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0) as browser:
        response = await browser.post("/v1/desk/login", json={"api_key": credential})
        assert response.status_code == 200, response.text
        yield browser, response.json()


async def _new_session(client: httpx.AsyncClient, **headers: str) -> str:
    response = await client.post("/v1/sessions", json={"user_id": "u1"}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _mint(client: httpx.AsyncClient, session_id: str, **headers: str) -> dict[str, Any]:
    response = await client.post(
        "/v1/stream-tokens", json={"session_id": session_id}, headers=headers
    )
    assert response.status_code == 201, response.text
    minted: dict[str, Any] = response.json()
    return minted


async def _stream_status(client: httpx.AsyncClient, minted: dict[str, Any]) -> int:
    """The status the token's events stream opens with (the stream is closed at once)."""
    url = minted["events_url"].split("?")[0]
    params = {"stream_token": minted["token"], "after": 0}
    async with client.stream("GET", url, params=params) as response:
        return response.status_code


async def _refused_from(answer: Callable[[], Awaitable[int]], deadline: float) -> float:
    """When `answer` first gave 401 (it gave 200 until then), polled until `deadline`."""
    while time.time() < deadline:
        status = await answer()
        if status == 401:
            return time.time()
        assert status == 200, status
        await asyncio.sleep(0.05)
    raise AssertionError("still accepted past the deadline")


async def test_a_cookie_kept_after_sign_out_is_refused_with_its_stream_tokens(
    svc: LiveService,
) -> None:
    async with _signed_in(svc.base_url, AGENT) as (browser, signed_in):
        csrf = {CSRF: signed_in["csrf_token"]}
        cookie = browser.cookies["hermes_desk"]
        session_id = await _new_session(browser, **csrf)
        minted = await _mint(browser, session_id, **csrf)
        assert await _stream_status(browser, minted) == 200
        out = await browser.post("/v1/desk/logout", headers=csrf)
        assert out.status_code == 204
    # Whoever copied the cookie before the sign-out (a shared machine, a stolen backup) holds
    # nothing now: every read, every write with the CSRF token, the token it minted.
    async with httpx.AsyncClient(base_url=svc.base_url, cookies={"hermes_desk": cookie}) as kept:
        assert_error(await kept.get("/v1/sessions"), 401, "unauthorized")
        assert_error(await kept.get("/v1/desk/session"), 401, "unauthorized")
        wrote = await kept.post("/v1/sessions", json={"user_id": "u1"}, headers=csrf)
        assert_error(wrote, 401, "unauthorized")
        assert_error(await kept.post("/v1/desk/logout", headers=csrf), 401, "unauthorized")
        assert await _stream_status(kept, minted) == 401
    # A token the API key minted is not the desk's: it lives on.
    by_key = await _mint(svc.client, session_id, **_bearer(AGENT))
    assert await _stream_status(svc.client, by_key) == 200


async def test_signing_out_on_one_process_holds_on_another_at_once(
    settings: Any, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("several processes share one database on PostgreSQL")
    async with serve(settings) as a, serve(settings) as b:
        async with _signed_in(a.base_url, AGENT) as (browser, signed_in):
            cookie = browser.cookies["hermes_desk"]
            csrf = {CSRF: signed_in["csrf_token"]}
            session_id = await _new_session(browser, **csrf)
            minted = await _mint(browser, session_id, **csrf)
            cookies = {"hermes_desk": cookie}
            async with httpx.AsyncClient(base_url=b.base_url, cookies=cookies) as on_b:
                assert (await on_b.get("/v1/sessions")).status_code == 200
                # The same sign-in, the same CSRF token, whichever process answers.
                here = (await browser.get("/v1/desk/session")).json()
                assert (await on_b.get("/v1/desk/session")).json() == here
                assert await _stream_status(on_b, minted) == 200
                assert (await browser.post("/v1/desk/logout", headers=csrf)).status_code == 204
                assert_error(await on_b.get("/v1/sessions"), 401, "unauthorized")
                assert await _stream_status(on_b, minted) == 401


async def test_a_desk_sign_in_and_stream_tokens_made_from_a_jwt_end_at_its_exp(
    svc: LiveService,
) -> None:
    token, exp = _jwt(LIVES_S)
    async with _signed_in(svc.base_url, token) as (browser, signed_in):
        assert _unix(signed_in["expires_at"]) <= exp
        csrf = {CSRF: signed_in["csrf_token"]}
        session_id = await _new_session(svc.client, **_bearer(token))
        from_jwt = await _mint(svc.client, session_id, **_bearer(token))
        from_desk = await _mint(browser, session_id, **csrf)
        assert _unix(from_jwt["expires_at"]) <= exp and _unix(from_desk["expires_at"]) <= exp

        # The cookie as a copy holds it, kept past its max-age: the service ends it.
        cookie = {"Cookie": f"hermes_desk={browser.cookies['hermes_desk']}"}

        async def desk_reads() -> int:
            return (await svc.client.get(f"/v1/sessions/{session_id}", headers=cookie)).status_code

        answers = {
            "the desk's cookie": desk_reads,
            "the JWT's stream token": lambda: _stream_status(svc.client, from_jwt),
            "the desk's stream token": lambda: _stream_status(svc.client, from_desk),
        }
        for what, answer in answers.items():
            ended = await _refused_from(answer, deadline=exp + 3)
            assert ended >= exp, f"{what} ended {exp - ended:.2f} s before the JWT's exp"


async def test_a_stream_token_made_from_a_key_that_expires_ends_with_it(
    svc: LiveService,
) -> None:
    made = make_key(b"")  # the service has no pepper
    expires_at = time.time() + LIVES_S
    await KeyStore(svc.runtime.db).create(
        made.stored,
        tenant_id="acme",
        role="agent",
        user_id=None,
        name="short-lived",
        expires_at=expires_at,
        actor=Actor("test", "admin"),
    )
    session_id = await _new_session(svc.client, **_bearer(made.key))
    minted = await _mint(svc.client, session_id, **_bearer(made.key))
    assert _unix(minted["expires_at"]) <= expires_at
    async with _signed_in(svc.base_url, made.key) as (browser, signed_in):
        assert _unix(signed_in["expires_at"]) <= expires_at + 1e-3  # to the microsecond

        # The cookie as a copy holds it, kept past its max-age: the service ends it.
        cookie = {"Cookie": f"hermes_desk={browser.cookies['hermes_desk']}"}

        async def desk_reads() -> int:
            return (await svc.client.get(f"/v1/sessions/{session_id}", headers=cookie)).status_code

        # The token's expiry is in whole seconds, rounded down; the sign-in's is the key's.
        ended = await _refused_from(
            lambda: _stream_status(svc.client, minted), deadline=expires_at + 3
        )
        assert ended >= expires_at - 1
        assert await _refused_from(desk_reads, deadline=expires_at + 3) >= expires_at


async def test_revoking_the_key_ends_its_desk_sign_in_and_the_desk_s_stream_tokens(
    svc: LiveService,
) -> None:
    created = await svc.client.post("/v1/keys", json={"role": "agent"}, headers=_bearer(ADMIN))
    assert created.status_code == 201, created.text
    key, key_id = created.json()["key"], created.json()["id"]
    async with _signed_in(svc.base_url, key) as (browser, signed_in):
        csrf = {CSRF: signed_in["csrf_token"]}
        session_id = await _new_session(browser, **csrf)
        minted = await _mint(browser, session_id, **csrf)
        assert await _stream_status(browser, minted) == 200
        revoked = await svc.client.post(f"/v1/keys/{key_id}/revoke", headers=_bearer(ADMIN))
        assert revoked.status_code == 200, revoked.text
        assert_error(await browser.get("/v1/sessions"), 401, "unauthorized")
        assert await _stream_status(svc.client, minted) == 401
