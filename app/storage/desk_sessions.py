"""Desk sign-ins: rows of `desk_sessions` (migration 0019), never the cookie itself.

The caller (`app.api.desk_sessions`) makes the cookie and the digest of its secret; this module
stores the digest with who signed in and until when, finds a row by its id (the cookie's first
part), and deletes it on sign-out. Expired rows go with the retention purge
(`app.storage.retention`, rule `expired`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.storage.session_writer import NO_SESSION
from app.storage.tx import Store, Tx

_FIELDS = ("id", "tenant_id", "role", "subject", "user_id", "digest", "created_at", "expires_at")
_COLUMNS = ", ".join(_FIELDS)


@dataclass(frozen=True)
class DeskSession:
    id: str
    tenant_id: str
    role: str
    subject: str
    user_id: str | None
    digest: str  # SHA-256 of the cookie's secret, hex
    created_at: float
    expires_at: float

    @classmethod
    def from_row(cls, row: Any) -> DeskSession:
        return cls(*(row[i] for i in range(len(_FIELDS))))


class DeskSessionStore(Store):
    async def create(self, session: DeskSession) -> None:
        def create(tx: Tx) -> None:
            tx.execute(
                f"INSERT INTO desk_sessions ({_COLUMNS}) VALUES ({', '.join('?' * len(_FIELDS))})",
                [getattr(session, name) for name in _FIELDS],
            )

        await self.transact(NO_SESSION, create)  # a sign-in, not a conversation

    async def get(self, session_id: str) -> DeskSession | None:
        """Any tenant's sign-in by its id (authentication: the id comes from the cookie)."""
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM desk_sessions WHERE id = ?", (session_id,)
        )
        return None if row is None else DeskSession.from_row(row)

    async def delete(self, tenant_id: str, session_id: str) -> bool:
        def delete(tx: Tx) -> bool:
            cur = tx.execute(
                "DELETE FROM desk_sessions WHERE id = ? AND tenant_id = ?",
                (session_id, tenant_id),
            )
            return cur.rowcount > 0

        return await self.transact(NO_SESSION, delete)
