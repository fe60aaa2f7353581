"""API-key authentication: `Authorization: Bearer <key>` or `X-API-Key: <key>`."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from app.errors import Forbidden, Unauthorized
from app.principal import LOCAL, Principal, Role


@dataclass(frozen=True)
class _Key:
    digest: bytes
    principal: Principal


class Authenticator:
    def __init__(self, mode: str, entries: list[str]) -> None:
        self.mode = mode
        self._keys: list[_Key] = []
        for entry in entries:
            tenant, role, key = entry.split(":", 2)
            subject = "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]
            self._keys.append(
                _Key(_digest(key), Principal(tenant_id=tenant, role=role, subject=subject))  # type: ignore[arg-type]
            )

    def resolve(self, authorization: str | None, api_key: str | None) -> Principal:
        if self.mode == "off":
            return LOCAL
        presented = api_key
        if presented is None and authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() == "bearer":
                presented = value.strip()
        if not presented:
            raise Unauthorized("missing API key (Authorization: Bearer <key> or X-API-Key)")
        digest = _digest(presented)
        match = None
        for key in self._keys:  # compare against every key: no early exit to time
            if hmac.compare_digest(key.digest, digest):
                match = key.principal
        if match is None:
            raise Unauthorized("unknown API key")
        return match

    def still_valid(self, principal: Principal) -> bool:
        """Whether a principal a signed token carries still has its key configured (a key
        removed from HERMES_API_KEYS ends the desk sign-ins and stream tokens made with it)."""
        if self.mode == "off":
            return principal == LOCAL
        return any(key.principal == principal for key in self._keys)


def require_role(principal: Principal, role: Role) -> None:
    if not principal.at_least(role):
        raise Forbidden(f"this needs the {role} role", role=principal.role)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()
