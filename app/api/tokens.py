"""Signed, short-lived credentials a browser can hold: stream tokens and desk sign-ins.

A browser's `EventSource` cannot send headers, and a web page should not keep an API key where
scripts can read it. So an API key is exchanged once for one of two signed tokens:

- a **stream token** (`POST /v1/stream-tokens`): one session's events, minutes long, accepted as
  `?stream_token=` on `GET /v1/sessions/{id}/events` and nowhere else;
- a **desk session** (`POST /v1/desk/login`): an HttpOnly cookie for the desk page, hours long,
  whose state-changing requests must also carry the CSRF token derived from it.

A token is `base64url(claims) "." base64url(HMAC-SHA256(secret, kind "." claims))`: the kind is
inside the MAC, so a desk cookie is never taken as a stream token or the other way round.
Nothing is stored; a token holds until it expires or its API key leaves the configuration.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from app.errors import Unauthorized
from app.principal import Principal

Kind = Literal["stream", "desk"]


@dataclass(frozen=True)
class Claims:
    principal: Principal
    expires_at: int  # Unix seconds
    nonce: str
    session_id: str | None = None  # a stream token's one session


class TokenSigner:
    def __init__(self, secret: bytes | None = None) -> None:
        # Without a configured secret each process makes its own: its tokens die with it.
        self._secret = secret or secrets.token_bytes(32)

    def issue(
        self,
        kind: Kind,
        principal: Principal,
        ttl_s: int,
        *,
        session_id: str | None = None,
        now: float | None = None,
    ) -> tuple[str, Claims]:
        issued = int(time.time() if now is None else now)
        claims = Claims(principal, issued + ttl_s, secrets.token_urlsafe(12), session_id)
        body = {
            "t": principal.tenant_id,
            "r": principal.role,
            "s": principal.subject,
            "u": principal.user_id,
            "e": claims.expires_at,
            "n": claims.nonce,
            "sid": session_id,
        }
        payload = _b64(json.dumps(body, separators=(",", ":")).encode())
        return f"{payload}.{_b64(self._mac(kind, payload))}", claims

    def verify(self, kind: Kind, token: str, *, now: float | None = None) -> Claims:
        """The token's claims, or `Unauthorized` (forged, another kind, malformed, expired)."""
        payload, _, mac = token.partition(".")
        try:
            if not hmac.compare_digest(_unb64(mac), self._mac(kind, payload)):
                raise ValueError("bad signature")
            body = json.loads(_unb64(payload))
            principal = Principal(
                tenant_id=body["t"], role=body["r"], subject=body["s"], user_id=body.get("u")
            )
            claims = Claims(principal, int(body["e"]), str(body["n"]), body["sid"])
        except (ValueError, TypeError, KeyError, binascii.Error):
            raise Unauthorized(f"not a valid {kind} token") from None
        if claims.expires_at <= (time.time() if now is None else now):
            raise Unauthorized(f"the {kind} token has expired", expired=True)
        return claims

    def csrf_token(self, claims: Claims) -> str:
        """The CSRF token of one desk sign-in: the page reads it from the login answer (or
        `GET /v1/desk/session`) and sends it as `X-CSRF-Token`; another site cannot."""
        return _b64(self._mac("csrf", claims.nonce))

    def _mac(self, kind: str, payload: str) -> bytes:
        return hmac.new(self._secret, f"{kind}.{payload}".encode(), hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
