"""The desk's sign-ins, kept server-side: revocable at once, never outliving their credential.

`POST /v1/desk/login` exchanges a credential (an API key or a JWT) for a stored sign-in
(`app.storage.desk_sessions`) and an HttpOnly cookie `dsk_<16 hex: its id>.<43 characters: its
secret>` (256 random bits). The row keeps SHA-256 of the secret, never the cookie, so a copy of
the database signs nobody in; the secret has 256 bits, a fast hash is enough. A sign-in ends at
the earlier of HERMES_DESK_SESSION_TTL_S and the credential's own expiry (a managed key's, a
JWT's `exp`), when the desk signs out (the row is deleted), or when its key is revoked (the
caller checks the key on every request, `Authenticator.still_valid`).

Every request the cookie makes reads the row by its primary key. The desk is low traffic, so one
indexed read per request is cheap, and it is what makes a sign-out exact on every process at
once: no process caches a sign-in.

The CSRF token is HMAC-SHA256 keyed with the cookie's secret: the desk's page gets it from the
login answer (or `GET /v1/desk/session`) and sends it as `X-CSRF-Token`; another site can read
neither the cookie nor those answers. Every process derives the same token from the cookie, so
the desk needs no secret shared between processes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from app.errors import Unauthorized
from app.principal import Principal
from app.storage.desk_sessions import DeskSession, DeskSessionStore

_SHAPE = re.compile(r"^(dsk_[0-9a-f]{16})\.([A-Za-z0-9_-]{43})$")
_NO_DIGEST = "0" * 64


@dataclass(frozen=True)
class SignedIn:
    """A desk sign-in as a request presents it: the stored row and the sign-in's CSRF token."""

    session: DeskSession
    csrf_token: str

    @property
    def principal(self) -> Principal:
        return principal_of(self.session)


def principal_of(session: DeskSession) -> Principal:
    """Who the desk acts as, until the sign-in ends (so does whatever it mints)."""
    return Principal(
        tenant_id=session.tenant_id,
        role=session.role,  # type: ignore[arg-type]  # the table's CHECK holds the roles
        subject=session.subject,
        user_id=session.user_id,
        expires_at=session.expires_at,
    )


class DeskSessions:
    def __init__(self, store: DeskSessionStore) -> None:
        self.store = store

    async def sign_in(self, principal: Principal, ttl_s: float) -> tuple[str, SignedIn]:
        """The cookie (to set, never stored) and the new sign-in."""
        now = time.time()
        ends = now + ttl_s
        if principal.expires_at is not None:
            ends = min(ends, principal.expires_at)
        secret = secrets.token_urlsafe(32)
        session = DeskSession(
            id=f"dsk_{secrets.token_hex(8)}",
            tenant_id=principal.tenant_id,
            role=principal.role,
            subject=principal.subject,
            user_id=principal.user_id,
            digest=_digest(secret),
            created_at=now,
            expires_at=ends,
        )
        await self.store.create(session)
        return f"{session.id}.{secret}", SignedIn(session, _csrf(secret))

    async def check(self, cookie: str) -> SignedIn:
        """The cookie's sign-in, or `Unauthorized` (malformed, unknown, signed out, expired)."""
        shape = _SHAPE.match(cookie)
        if shape is None:
            raise Unauthorized("not a desk sign-in")
        session_id, secret = shape.groups()
        session = await self.store.get(session_id)
        # Compare even without a row, against a digest of nothing: the time says nothing.
        expected = _NO_DIGEST if session is None else session.digest
        if not hmac.compare_digest(_digest(secret), expected) or session is None:
            raise Unauthorized("the desk is not signed in (signed out, or never was)")
        if session.expires_at <= time.time():
            raise Unauthorized("the desk sign-in has expired", expired=True)
        return SignedIn(session, _csrf(secret))

    async def alive(self, session_id: str, principal: Principal) -> bool:
        """Whether the sign-in a stream token was minted by still stands (signed, so its id and
        principal are the ones the token was made with)."""
        session = await self.store.get(session_id)
        return (
            session is not None
            and session.expires_at > time.time()
            and principal_of(session) == principal
        )

    async def sign_out(self, signed_in: SignedIn) -> None:
        await self.store.delete(signed_in.session.tenant_id, signed_in.session.id)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _csrf(secret: str) -> str:
    mac = hmac.new(secret.encode(), b"csrf", hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")
