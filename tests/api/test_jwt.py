"""JWT bearer tokens through HTTP: HS256 with a secret, RS256 and ES256 from a JWKS file (keys
made here with `cryptography`) and from a JWKS URL on loopback, all mapped to the same principal
as a key; expired, not-yet-valid, wrong-audience, wrong-issuer, wrong-algorithm, `none`, forged
and claim-less tokens get 401."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from app.settings import Settings
from app.testing import LiveService, serve
from tests.api.test_sessions import assert_error

SECRET = "jwt-secret-for-the-tests-0123456789"
AUD, ISS = "hermes", "https://idp.example.com"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": "alice",
        "tenant": "acme",
        "role": "agent",
        "aud": AUD,
        "iss": ISS,
        "iat": now,
        "exp": now + 300,
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def _jwks() -> dict[str, Any]:
    rsa_jwk = json.loads(RSAAlgorithm.to_jwk(RSA_KEY.public_key()))
    ec_jwk = json.loads(ECAlgorithm.to_jwk(EC_KEY.public_key()))
    return {
        "keys": [
            {**rsa_jwk, "kid": "rsa-1", "alg": "RS256", "use": "sig"},
            {**ec_jwk, "kid": "ec-1", "alg": "ES256", "use": "sig"},
        ]
    }


def rs256(**claims: Any) -> str:
    return jwt.encode(_claims(**claims), RSA_KEY, algorithm="RS256", headers={"kid": "rsa-1"})


def es256(**claims: Any) -> str:
    return jwt.encode(_claims(**claims), EC_KEY, algorithm="ES256", headers={"kid": "ec-1"})


def hs256(secret: str = SECRET, **claims: Any) -> str:
    return jwt.encode(_claims(**claims), secret, algorithm="HS256")


@pytest.fixture
def jwks_file(tmp_path: Path) -> Path:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(_jwks()))
    return path


@pytest.fixture
async def svc(make_settings: Any, jwks_file: Path) -> AsyncIterator[LiveService]:
    settings: Settings = make_settings(
        auth="api_key",
        jwt_secret=SECRET,
        jwt_jwks=str(jwks_file),
        jwt_audience=AUD,
        jwt_issuer=ISS,
        jwt_leeway_s=0,
    )
    async with serve(settings) as service:
        yield service


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_tokens_map_their_claims_to_a_principal(svc: LiveService) -> None:
    for token in (hs256(), rs256(), es256()):
        created = await svc.client.post("/v1/sessions", json={"user_id": "u1"}, headers=_as(token))
        assert created.status_code == 201, created.text
        # The tenant comes from the claim: another tenant's token does not see the session.
        other = await svc.client.get(
            f"/v1/sessions/{created.json()['id']}", headers=_as(hs256(tenant="zeta"))
        )
        assert_error(other, 404, "session_not_found")
    # The role claim: an agent is no admin, an admin is.
    assert_error(await svc.client.get("/v1/keys", headers=_as(rs256())), 403, "forbidden")
    admin = await svc.client.get("/v1/keys", headers=_as(rs256(role="admin")))
    assert admin.status_code == 200, admin.text
    # The user claim binds the token like a key made with --user.
    bound = hs256(role="customer", user="u2")
    assert_error(
        await svc.client.post("/v1/sessions", json={"user_id": "u1"}, headers=_as(bound)),
        403,
        "forbidden",
    )
    mine = await svc.client.post("/v1/sessions", json={"user_id": "u2"}, headers=_as(bound))
    assert mine.status_code == 201
    listed = await svc.client.get("/v1/sessions", headers=_as(bound))
    assert [s["id"] for s in listed.json()["items"]] == [mine.json()["id"]]
    # The subject is the token's `sub`, in the audit trail as anywhere else.
    await svc.client.post(
        "/v1/keys", json={"role": "agent"}, headers=_as(hs256(role="admin", sub="boss"))
    )
    trail = await svc.client.get("/v1/audit", headers=_as(hs256(role="admin")))
    assert [e["actor"] for e in trail.json()["items"]] == ["jwt:boss"]


async def test_bad_tokens_get_401(svc: LiveService) -> None:
    now = int(time.time())
    public_pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    bad = {
        "expired": hs256(exp=now - 60, iat=now - 120),
        "expired RS256": rs256(exp=now - 60, iat=now - 120),
        "not yet valid": hs256(nbf=now + 600),
        "wrong audience": rs256(aud="someone-else"),
        "no audience": hs256(aud=None),
        "wrong issuer": hs256(iss="https://evil.example.com"),
        "no expiry": hs256(exp=None),
        "no tenant": hs256(tenant=None),
        "unknown role": hs256(role="root"),
        "none alg": jwt.encode(_claims(), None, algorithm="none"),
        "wrong secret": hs256(secret="another-secret-that-is-long-enough-000"),
        "another RSA key": jwt.encode(
            _claims(), OTHER_RSA, algorithm="RS256", headers={"kid": "rsa-1"}
        ),
        "unknown kid": jwt.encode(_claims(), RSA_KEY, algorithm="RS256", headers={"kid": "nope"}),
        "wrong alg (HS384)": jwt.encode(_claims(), SECRET * 2, algorithm="HS384"),
        "wrong alg (PS256)": jwt.encode(
            _claims(), RSA_KEY, algorithm="PS256", headers={"kid": "rsa-1"}
        ),
        "tampered": hs256()[:-3] + "AAA",
    }
    # The classic confusion: HS256 signed with the RSA public key as the "secret". PyJWT
    # refuses to sign with a PEM key as an HMAC secret, so the token is put together by hand.
    header = jwt.utils.base64url_encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = jwt.utils.base64url_encode(json.dumps(_claims()).encode())
    mac = hmac.new(public_pem, header + b"." + body, hashlib.sha256).digest()
    bad["HS256 with the public key"] = (header + b"." + body + b".").decode() + (
        jwt.utils.base64url_encode(mac).decode()
    )
    for what, token in bad.items():
        response = await svc.client.get("/v1/sessions", headers=_as(token))
        assert response.status_code == 401, f"{what}: {response.status_code} {response.text}"
        assert_error(response, 401, "unauthorized")
    expired = await svc.client.get("/v1/sessions", headers=_as(bad["expired"]))
    assert expired.json()["error"]["details"]["expired"] is True


async def test_only_configured_algorithms_are_accepted(make_settings: Any, jwks_file: Path) -> None:
    """With a JWKS and no secret, an HS256 token is refused even when signed correctly."""
    settings: Settings = make_settings(auth="api_key", jwt_jwks=str(jwks_file), jwt_leeway_s=0)
    async with serve(settings) as svc:
        refused = await svc.client.get("/v1/sessions", headers=_as(hs256(aud=None)))
        assert "algorithm" in assert_error(refused, 401, "unauthorized")["message"]
        # No audience configured: a token without one is fine, one with an aud is refused.
        ok = await svc.client.get("/v1/sessions", headers=_as(rs256(aud=None, iss=None)))
        assert ok.status_code == 200, ok.text
        with_aud = await svc.client.get("/v1/sessions", headers=_as(rs256(iss=None)))
        assert_error(with_aud, 401, "unauthorized")


@pytest.fixture
def jwks_url() -> Iterator[str]:
    body = json.dumps(_jwks()).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_jwks_url_on_loopback(make_settings: Any, jwks_url: str) -> None:
    settings: Settings = make_settings(auth="api_key", jwt_jwks=jwks_url, jwt_audience=AUD)
    async with serve(settings) as svc:
        for token in (rs256(), es256()):
            response = await svc.client.get("/v1/sessions", headers=_as(token))
            assert response.status_code == 200, response.text
        forged = jwt.encode(_claims(), OTHER_RSA, algorithm="RS256", headers={"kid": "rsa-1"})
        assert_error(await svc.client.get("/v1/sessions", headers=_as(forged)), 401, "unauthorized")
