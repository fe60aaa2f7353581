"""Authentication: `Authorization: Bearer <credential>` or `X-API-Key: <credential>`.

A credential is one of:
- a managed key (`hk_…`, made by `hermes keys create` or `POST /v1/keys`; `app.api.keys`);
- a JWT, when HERMES_JWT_SECRET or HERMES_JWT_JWKS is set (`app.api.jwt_auth`);
- a bootstrap key from HERMES_API_KEYS (`tenant:role:key`, 16+ characters): for the first
  admin key and for tests; plain text in the environment, so keep it to that.
With HERMES_AUTH=off (loopback only, see `check_bind`) every request is the local principal.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass

from app.api.jwt_auth import JwtVerifier
from app.api.keys import ManagedKeys
from app.errors import ConfigError, Forbidden, Unauthorized
from app.principal import LOCAL, Principal, Role
from app.settings import Settings
from app.storage.keys import KeyStore
from app.storage.port import Database


@dataclass(frozen=True)
class _Key:
    digest: bytes
    principal: Principal


class Authenticator:
    def __init__(self, mode: str, entries: list[str], *, jwt: JwtVerifier | None = None) -> None:
        self.mode = mode
        self.jwt = jwt
        self.managed: ManagedKeys | None = None  # attached once the database is open
        self._keys: list[_Key] = []
        for entry in entries:
            tenant, role, key = entry.split(":", 2)
            subject = "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]
            self._keys.append(
                _Key(_digest(key), Principal(tenant_id=tenant, role=role, subject=subject))  # type: ignore[arg-type]
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> Authenticator:
        verifier = None
        if settings.auth.jwt_secret is not None or settings.auth.jwt_jwks is not None:
            secret = settings.auth.jwt_secret
            verifier = JwtVerifier(
                secret=secret.get_secret_value().encode() if secret else None,
                jwks=settings.auth.jwt_jwks,
                audience=settings.auth.jwt_audience,
                issuer=settings.auth.jwt_issuer,
                leeway_s=settings.auth.jwt_leeway_s,
            )
        return cls(settings.auth.mode, settings.auth.api_keys, jwt=verifier)

    def attach(self, db: Database, settings: Settings) -> None:
        """Managed keys from the now open database."""
        self.managed = ManagedKeys(
            KeyStore(db), key_pepper(settings), settings.auth.key_cache_ttl_s
        )

    async def resolve(self, authorization: str | None, api_key: str | None) -> Principal:
        if self.mode == "off":
            return LOCAL
        presented = api_key
        if presented is None and authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() == "bearer":
                presented = value.strip()
        if not presented:
            raise Unauthorized("missing API key (Authorization: Bearer <key> or X-API-Key)")
        if self.managed is not None:
            principal = await self.managed.resolve(presented)
            if principal is not None:
                return principal
        if self.jwt is not None and JwtVerifier.looks_like(presented):
            return await self.jwt.resolve(presented)
        digest = _digest(presented)
        match = None
        for key in self._keys:  # compare against every key: no early exit to time
            if hmac.compare_digest(key.digest, digest):
                match = key.principal
        if match is None:
            raise Unauthorized("unknown API key")
        return match

    async def still_valid(self, principal: Principal) -> bool:
        """Whether a principal a desk sign-in or stream token carries still stands: its managed
        key neither revoked nor expired, its bootstrap key still configured (a JWT's: until its
        `exp`, which neither outlives, `Principal.expires_at`)."""
        if self.mode == "off":
            return principal == LOCAL
        if principal.subject.startswith("jwt:"):
            return self.jwt is not None
        if any(key.principal == principal for key in self._keys):
            return True
        return self.managed is not None and await self.managed.still_valid(principal)


def require_role(principal: Principal, role: Role) -> None:
    if not principal.at_least(role):
        raise Forbidden(f"this needs the {role} role", role=principal.role)


def key_pepper(settings: Settings) -> bytes:
    pepper = settings.auth.key_pepper
    return b"" if pepper is None else pepper.get_secret_value().encode()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(settings: Settings, host: str) -> str | None:
    """Start-up's word on authentication: ConfigError when it is off on a non-loopback
    address; a warning line when it is off on loopback; None when it is on."""
    if settings.auth.mode != "off":
        return None
    if not is_loopback(host):
        raise ConfigError(
            "HERMES_AUTH",
            f"is off, which is allowed only on loopback, not on {host}: set HERMES_AUTH=api_key"
            " and make a key with `hermes keys create`",
        )
    return (
        "warning: HERMES_AUTH=off: every request acts as tenant default with the admin role"
        f" (allowed because {host} is loopback)"
    )


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()
