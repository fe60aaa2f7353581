"""Managed API keys: how a key looks, how it is hashed, and how a presented one is checked.

A key is `hk_<16 hex: its id>_<43 characters: the secret>` (256 random bits). The database keeps
the id (`key_<16 hex>`, the principal's subject), a random 16-byte salt, and
`HMAC-SHA256(pepper, salt || secret)`; the pepper is HERMES_KEY_PEPPER (empty when unset), so a
copy of the database without the settings does not even allow an offline guess. The secret
has 256 bits: a fast keyed hash is enough, no password-stretching needed.

Checking: the id picks the row (cached per process for HERMES_KEY_CACHE_TTL_S, so a revocation
on another process holds within that bound), the digest is compared in constant time, the key
must be neither revoked nor expired. The last-used time is written at most once a minute per
key and process, never waited for.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from app.errors import InvalidInput, Unauthorized
from app.principal import Principal, binding_problem
from app.storage.keys import Actor, KeyRecord, KeyStore, NewKey
from app.text.labels import clean_label

__all__ = ["DURATION_PATTERN", "Actor", "KeyRecord", "ManagedKeys", "parse_duration"]

PREFIX = "hk_"
_SHAPE = re.compile(r"^hk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
TOUCH_EVERY_S = 60.0
_CACHE_MAX = 10_000


@dataclass(frozen=True)
class MadeKey:
    key: str  # shown once, never stored
    stored: NewKey


# A key's lifetime: minutes, hours, days or weeks, at most ten years (3650d; 521w; hours below
# 80,000). Longer ones reached past the year 9999, which no timestamp the API writes can hold
# (the listing failed on such a key). The API documents this pattern, so what it accepts is
# exactly what the schema says.
DURATION_PATTERN = (
    r"^(?:([1-9][0-9]{0,5})(m)|([1-9][0-9]{0,3}|[1-7][0-9]{4})(h)"
    r"|([1-9][0-9]{0,2}|[12][0-9]{3}|3[0-5][0-9]{2}|36[0-4][0-9]|3650)(d)"
    r"|([1-9][0-9]?|[1-4][0-9]{2}|5[01][0-9]|52[01])(w))$"
)
_DURATION = re.compile(DURATION_PATTERN)
_UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds in `90d`, `12h`, `30m`, `2w`, at most ten years (ValueError otherwise)."""
    found = _DURATION.match(text.strip())
    if found is None:
        raise ValueError(
            f"not a duration like 90d, 12h, 30m or 2w of at most ten years (3650d): {text!r}"
        )
    number, unit = (g for g in found.groups() if g is not None)
    return int(number) * _UNIT_S[unit]


def make_key(pepper: bytes) -> MadeKey:
    public = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    return MadeKey(
        f"{PREFIX}{public}_{secret}",
        NewKey(id=f"key_{public}", salt=salt.hex(), digest=digest(pepper, salt, secret)),
    )


def digest(pepper: bytes, salt: bytes, secret: str) -> str:
    return hmac.new(pepper, salt + secret.encode(), hashlib.sha256).hexdigest()


def principal_of(record: KeyRecord) -> Principal:
    return Principal(
        tenant_id=record.tenant_id,
        role=record.role,  # type: ignore[arg-type]  # the table's CHECK holds the roles
        subject=record.id,
        user_id=record.user_id,
        expires_at=record.expires_at,
    )


class ManagedKeys:
    """The database's keys as one process sees them."""

    def __init__(self, store: KeyStore, pepper: bytes, cache_ttl_s: float) -> None:
        self.store = store
        self._pepper = pepper
        self._ttl = cache_ttl_s
        self._cache: dict[str, tuple[float, KeyRecord | None]] = {}
        self._touched: dict[str, float] = {}

    async def resolve(self, presented: str) -> Principal | None:
        """The key's principal; None when it is not shaped like a managed key (the caller
        tries the others); `Unauthorized` when it is one but unknown, wrong, revoked or
        expired."""
        shape = _SHAPE.match(presented)
        if shape is None:
            return None
        key_id, secret = f"key_{shape.group(1)}", shape.group(2)
        record = await self._record(key_id)
        # Compare even without a row, against a digest of nothing: the time says nothing.
        salt = bytes.fromhex(record.salt) if record else b""
        expected = record.digest if record else "0" * 64
        if not hmac.compare_digest(digest(self._pepper, salt, secret), expected) or not record:
            raise Unauthorized("unknown API key")
        now = time.time()
        if record.revoked_at is not None:
            raise Unauthorized("this API key has been revoked", key_id=key_id)
        if not record.usable(now):
            raise Unauthorized("this API key has expired", key_id=key_id, expired=True)
        problem = binding_problem(record.role, record.user_id)
        if problem is not None:  # a key made before the rule: make a new one
            raise Unauthorized(f"this API key is no longer valid: {problem}", key_id=key_id)
        if now - self._touched.get(key_id, 0.0) >= TOUCH_EVERY_S:
            self._touched[key_id] = now
            self.store.touch(key_id, now)
        return principal_of(record)

    async def still_valid(self, principal: Principal) -> bool:
        record = await self._record(principal.subject)
        return (
            record is not None
            and record.usable(time.time())
            and binding_problem(record.role, record.user_id) is None
            and principal_of(record) == principal
        )

    # -- managing (the admin API and `hermes keys`) ---------------------------------------

    async def create(
        self,
        actor: Actor,
        *,
        tenant_id: str,
        role: str,
        user_id: str | None = None,
        name: str = "",
        lifetime_s: float | None = None,
    ) -> tuple[KeyRecord, str]:
        """The new key's row and the key itself (to show once). A customer key must be bound
        to a user and a staff key must not be (`InvalidInput`)."""
        problem = binding_problem(role, user_id)
        if problem is not None:
            raise InvalidInput(problem, field="user_id", role=role)
        made = make_key(self._pepper)
        record = await self.store.create(
            made.stored,
            tenant_id=tenant_id,
            role=role,
            user_id=user_id,
            name=clean_label(name),  # the command line's too
            expires_at=None if lifetime_s is None else time.time() + lifetime_s,
            actor=actor,
        )
        return record, made.key

    async def rotate(
        self, tenant_id: str, key_id: str, actor: Actor
    ) -> tuple[KeyRecord, str] | None:
        """A new key like the old one, the old one revoked (None: no such usable key). A key
        whose role and user binding no longer fit together is not rotated (`InvalidInput`):
        make a new one."""
        old = await self.store.find(tenant_id, key_id)
        problem = None if old is None else binding_problem(old.role, old.user_id)
        if problem is not None:
            raise InvalidInput(f"{problem}: create a new key instead", key_id=key_id)
        made = make_key(self._pepper)
        record = await self.store.rotate(tenant_id, key_id, made.stored, actor)
        self.forget(key_id)
        return None if record is None else (record, made.key)

    async def revoke(self, tenant_id: str, key_id: str, actor: Actor) -> KeyRecord | None:
        record = await self.store.revoke(tenant_id, key_id, actor)
        self.forget(key_id)
        return record

    async def find(self, tenant_id: str | None, key_id: str) -> KeyRecord | None:
        """A tenant's key (any tenant's for None: the command line)."""
        if tenant_id is None:
            return await self.store.get(key_id)
        return await self.store.find(tenant_id, key_id)

    async def list(self, tenant_id: str | None, *, include_revoked: bool) -> list[KeyRecord]:
        return await self.store.list(tenant_id, include_revoked=include_revoked)

    def forget(self, key_id: str) -> None:
        """Drop a cached row (this process changed it)."""
        self._cache.pop(key_id, None)

    async def _record(self, key_id: str) -> KeyRecord | None:
        now = time.monotonic()
        cached = self._cache.get(key_id)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        record = await self.store.get(key_id)
        if record is not None:  # unknown ids are not cached: a new key works at once
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[key_id] = (now, record)
        return record
