"""Stream tokens: signed, short-lived credentials a browser's `EventSource` can hold.

A browser's `EventSource` cannot send headers, and a web page should not keep an API key where
scripts can read it. So a caller exchanges its credential (`POST /v1/stream-tokens`) for a token
that reads one session's events, minutes long, accepted as `?stream_token=` on
`GET /v1/sessions/{id}/events` and nowhere else. (The desk's page signs in with a cookie
instead: `app.api.desk_sessions`.)

A token is `base64url(claims) "." base64url(HMAC-SHA256(secret, "stream." claims))`. Nothing is
stored. A token never outlives what minted it: it expires at the earlier of its TTL and the
minting principal's own expiry (a managed key's, a JWT's `exp`, a desk sign-in's end), and one a
desk sign-in minted names that sign-in, which must still stand when the token is used (signing
out ends it). Until then it holds as long as its key is neither revoked nor expired.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import secrets
import time
from dataclasses import dataclass

from app.errors import Unauthorized
from app.principal import Principal

_KIND = "stream"  # inside the MAC: whatever else the secret ever signs is never taken for one


@dataclass(frozen=True)
class Claims:
    principal: Principal  # its `expires_at` is the token's
    expires_at: int  # Unix seconds
    nonce: str
    session_id: str  # the one session whose events it reads
    desk_session: str | None = None  # the desk sign-in that minted it, which must still stand


class TokenSigner:
    def __init__(self, secret: bytes | None = None) -> None:
        # Without a configured secret each process makes its own: its tokens die with it.
        self._secret = secret or secrets.token_bytes(32)

    def issue(
        self,
        principal: Principal,
        ttl_s: int,
        *,
        session_id: str,
        desk_session: str | None = None,
        now: float | None = None,
    ) -> tuple[str, Claims]:
        """A token for `session_id`'s events, living `ttl_s` or until the principal's own
        expiry, whichever comes first (whole seconds, rounded down: never after it)."""
        issued = time.time() if now is None else now
        expires_at = int(issued) + ttl_s
        if principal.expires_at is not None:
            expires_at = min(expires_at, math.floor(principal.expires_at))
        claims = Claims(principal, expires_at, secrets.token_urlsafe(12), session_id, desk_session)
        body = {
            "t": principal.tenant_id,
            "r": principal.role,
            "s": principal.subject,
            "u": principal.user_id,
            "e": claims.expires_at,
            "n": claims.nonce,
            "sid": session_id,
            "d": desk_session,
        }
        payload = _b64(json.dumps(body, separators=(",", ":")).encode())
        return f"{payload}.{_b64(self._mac(_KIND, payload))}", claims

    def verify(self, token: str, *, now: float | None = None) -> Claims:
        """The token's claims, or `Unauthorized` (forged, another kind, malformed, expired)."""
        payload, _, mac = token.partition(".")
        try:
            if not hmac.compare_digest(_unb64(mac), self._mac(_KIND, payload)):
                raise ValueError("bad signature")
            body = json.loads(_unb64(payload))
            expires_at = int(body["e"])
            principal = Principal(
                tenant_id=body["t"],
                role=body["r"],
                subject=body["s"],
                user_id=body.get("u"),
                expires_at=expires_at,
            )
            claims = Claims(principal, expires_at, str(body["n"]), str(body["sid"]), body.get("d"))
        except (ValueError, TypeError, KeyError, binascii.Error):
            raise Unauthorized("not a valid stream token") from None
        if claims.expires_at <= (time.time() if now is None else now):
            raise Unauthorized("the stream token has expired", expired=True)
        return claims

    def _mac(self, kind: str, payload: str) -> bytes:
        return hmac.new(self._secret, f"{kind}.{payload}".encode(), hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
