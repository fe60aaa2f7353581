"""Managed API keys: rows of `api_keys` (migration 0012), never the secrets themselves.

The caller (`app.api.keys`) makes a key and its digest; this module stores the salt and the
digest with the key's tenant, role, optional user, expiry and times, and records every change in
the audit trail in the same transaction (`key.created`, `key.revoked`, `key.rotated`: ids,
tenant, role and user, never a secret or a digest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import DatabaseClosed
from app.storage import audit
from app.storage.session_writer import NO_SESSION
from app.storage.tx import Store, Tx

_FIELDS = (
    "id", "tenant_id", "role", "user_id", "name", "salt", "digest", "created_by", "created_at",
    "expires_at", "last_used_at", "revoked_at", "rotated_to",
)  # fmt: skip
_COLUMNS = ", ".join(_FIELDS)


@dataclass(frozen=True)
class KeyRecord:
    id: str
    tenant_id: str
    role: str
    user_id: str | None
    name: str
    salt: str
    digest: str
    created_by: str
    created_at: float
    expires_at: float | None
    last_used_at: float | None
    revoked_at: float | None
    rotated_to: str | None

    @classmethod
    def from_row(cls, row: Any) -> KeyRecord:
        return cls(*(row[i] for i in range(len(_FIELDS))))

    def usable(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    def status(self, now: float) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "active" if self.usable(now) else "expired"


@dataclass(frozen=True)
class NewKey:
    """What the caller made: the id, salt and digest to store (the secret stays with it)."""

    id: str
    salt: str
    digest: str


@dataclass(frozen=True)
class Actor:
    subject: str
    role: str


def _insert(
    tx: Tx,
    key: NewKey,
    *,
    tenant_id: str,
    role: str,
    user_id: str | None,
    name: str,
    created_by: str,
    expires_at: float | None,
) -> KeyRecord:
    record = KeyRecord(
        key.id, tenant_id, role, user_id, name, key.salt, key.digest, created_by, tx.now,
        expires_at, last_used_at=None, revoked_at=None, rotated_to=None,
    )  # fmt: skip
    tx.execute(
        f"INSERT INTO api_keys ({_COLUMNS}) VALUES ({', '.join('?' * len(_FIELDS))})",
        [getattr(record, field) for field in _FIELDS],
    )
    return record


def _audit(tx: Tx, action: str, record: KeyRecord, actor: Actor, **extra: Any) -> None:
    """The change's audit row: the key's id, role, user, expiry and name; never its secret."""
    audit.record(
        tx,
        tenant_id=record.tenant_id,
        actor=actor.subject,
        role=actor.role,
        action=action,
        target_id=record.id,
        details={
            "role": record.role,
            "user_id": record.user_id,
            "expires_at": record.expires_at,
            "name": record.name,
            **extra,
        },
    )


def _find(tx: Tx, tenant_id: str, key_id: str) -> KeyRecord | None:
    row = tx.one(
        f"SELECT {_COLUMNS} FROM api_keys WHERE id = ? AND tenant_id = ?{tx.for_update}",
        (key_id, tenant_id),
    )
    return None if row is None else KeyRecord.from_row(row)


class KeyStore(Store):
    async def create(
        self,
        key: NewKey,
        *,
        tenant_id: str,
        role: str,
        user_id: str | None,
        name: str,
        expires_at: float | None,
        actor: Actor,
    ) -> KeyRecord:
        def create(tx: Tx) -> KeyRecord:
            record = _insert(
                tx,
                key,
                tenant_id=tenant_id,
                role=role,
                user_id=user_id,
                name=name,
                created_by=actor.subject,
                expires_at=expires_at,
            )
            _audit(tx, "key.created", record, actor)
            return record

        return await self.transact(NO_SESSION, create)

    async def get(self, key_id: str) -> KeyRecord | None:
        """Any tenant's key by its id (authentication: the id comes from the key itself)."""
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        return None if row is None else KeyRecord.from_row(row)

    async def find(self, tenant_id: str, key_id: str) -> KeyRecord | None:
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM api_keys WHERE id = ? AND tenant_id = ?", (key_id, tenant_id)
        )
        return None if row is None else KeyRecord.from_row(row)

    async def list(self, tenant_id: str | None, *, include_revoked: bool) -> list[KeyRecord]:
        """A tenant's keys (every tenant's for None: the command line), oldest first."""
        sql = f"SELECT {_COLUMNS} FROM api_keys WHERE 1 = 1"
        params: list[Any] = []
        if tenant_id is not None:
            sql += " AND tenant_id = ?"
            params.append(tenant_id)
        if not include_revoked:
            sql += " AND revoked_at IS NULL"
        rows = await self.db.fetchall(sql + " ORDER BY created_at, id", params)
        return [KeyRecord.from_row(r) for r in rows]

    async def revoke(self, tenant_id: str, key_id: str, actor: Actor) -> KeyRecord | None:
        """The key, revoked now (None: no such key in the tenant). Revoking twice keeps the
        first time and records nothing more."""

        def revoke(tx: Tx) -> KeyRecord | None:
            record = _find(tx, tenant_id, key_id)
            if record is None or record.revoked_at is not None:
                return record
            tx.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (tx.now, key_id))
            _audit(tx, "key.revoked", record, actor)
            return _find(tx, tenant_id, key_id)

        return await self.transact(NO_SESSION, revoke)

    async def rotate(
        self, tenant_id: str, key_id: str, new: NewKey, actor: Actor
    ) -> KeyRecord | None:
        """A new key with the old one's tenant, role, user, name and lifetime, and the old one
        revoked, in one transaction (None: no such usable key in the tenant)."""

        def rotate(tx: Tx) -> KeyRecord | None:
            old = _find(tx, tenant_id, key_id)
            if old is None or not old.usable(tx.now):
                return None
            lifetime = None if old.expires_at is None else old.expires_at - old.created_at
            record = _insert(
                tx,
                new,
                tenant_id=tenant_id,
                role=old.role,
                user_id=old.user_id,
                name=old.name,
                created_by=actor.subject,
                expires_at=None if lifetime is None else tx.now + lifetime,
            )
            tx.execute(
                "UPDATE api_keys SET revoked_at = ?, rotated_to = ? WHERE id = ?",
                (tx.now, new.id, key_id),
            )
            _audit(tx, "key.rotated", old, actor, new_key_id=new.id)
            return record

        return await self.transact(NO_SESSION, rotate)

    def touch(self, key_id: str, at: float) -> None:
        """Note a use, without waiting (the caller writes at most once a minute per key)."""
        try:
            future = self.transact_nowait(
                NO_SESSION,
                lambda tx: tx.execute(
                    "UPDATE api_keys SET last_used_at = ? WHERE id = ?"
                    " AND (last_used_at IS NULL OR last_used_at < ?)",
                    (at, key_id, at),
                ),
            )
        except DatabaseClosed:  # shutting down: the time is not worth failing a request
            return
        future.add_done_callback(_ignore)


def _ignore(future: Any) -> None:
    if not future.cancelled():
        future.exception()  # a lost last-used time is not worth a log line per request
