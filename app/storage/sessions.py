"""Sessions: create, find, list with cursor pagination, delete, archive when idle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app import events
from app.storage.paging import newest_first
from app.storage.records import SESSION_ID_BYTES, Session, dumps, new_id
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.tx import Store, Tx

_COLUMNS = (
    "id, tenant_id, user_id, status, metadata, created_at, updated_at, last_activity_at,"
    " archived_at, last_event_seq, turn_count"
)


# Every table whose rows belong to one session (deleted with it by ON DELETE CASCADE).
SESSION_TABLES = (
    "sessions",
    "turns",
    "messages",
    "events",
    "session_snapshots",
    "steps",
    "tool_calls",
    "approvals",
    "confirmations",
    "session_leases",
    "handoffs",
    "session_summaries",
)


@dataclass(frozen=True)
class Page:
    items: list[Session]
    next_cursor: str | None


def find_session(tx: Tx, tenant_id: str, session_id: str) -> Session | None:
    row = tx.one(
        f"SELECT {_COLUMNS} FROM sessions WHERE id = ? AND tenant_id = ?{tx.for_update}",
        (session_id, tenant_id),
    )
    return None if row is None else Session.from_row(row)


class SessionStore(Store):
    async def create(self, tenant_id: str, user_id: str, metadata: dict[str, Any]) -> Session:
        session_id = new_id("ses", SESSION_ID_BYTES)

        def create(tx: Tx) -> Session:
            tx.execute(
                "INSERT INTO sessions (id, tenant_id, user_id, status, metadata, created_at,"
                " updated_at, last_activity_at) VALUES (?, ?, ?, 'active', ?, ?, ?, ?)",
                (session_id, tenant_id, user_id, dumps(metadata), tx.now, tx.now, tx.now),
            )
            tx.execute(
                "INSERT INTO session_snapshots (session_id, tenant_id, updated_at)"
                " VALUES (?, ?, ?)",
                (session_id, tenant_id, tx.now),
            )
            tx.emit(session_id, tenant_id, *events.session_created(session_id))
            session = find_session(tx, tenant_id, session_id)
            assert session is not None
            return session

        # On the new session's own lane, like every later write of it.
        return await self.transact(SessionWriter(session_id), create)

    async def find(self, tenant_id: str, session_id: str) -> Session | None:
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM sessions WHERE id = ? AND tenant_id = ?",
            (session_id, tenant_id),
        )
        return None if row is None else Session.from_row(row)

    async def list_page(
        self,
        tenant_id: str,
        *,
        user_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        where, params = ["tenant_id = ?"], [tenant_id]
        if user_id is not None:
            where.append("user_id = ?")
            params.append(user_id)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        select = f"SELECT {_COLUMNS} FROM sessions"
        items, next_cursor = await newest_first(
            self.db, select, where, params, cursor, limit, Session.from_row
        )
        return Page(items, next_cursor)

    async def delete(self, writer: SessionWriter, tenant_id: str, session_id: str) -> bool:
        """Delete the session and everything of it (the foreign keys cascade), gone from the
        database files too by the time this returns (`Database.scrub`)."""

        def delete(tx: Tx) -> bool:
            cur = tx.execute(
                "DELETE FROM sessions WHERE id = ? AND tenant_id = ?", (session_id, tenant_id)
            )
            return cur.rowcount > 0

        deleted = await self.transact(writer, delete)
        if deleted:
            await self.db.scrub(SESSION_TABLES)
        return deleted

    async def archive_idle(self, cutoff: float) -> list[str]:
        """Archive active sessions idle since before `cutoff` that have no open turn and that
        no human agent holds (the agent closes those). One transaction over many sessions:
        it belongs to none of them."""

        def archive(tx: Tx) -> list[str]:
            rows = tx.execute(
                "SELECT id, tenant_id FROM sessions s WHERE status = 'active'"
                " AND last_activity_at < ? AND NOT EXISTS (SELECT 1 FROM turns t"
                " WHERE t.session_id = s.id AND t.status IN ('queued', 'running'))"
                " AND NOT EXISTS (SELECT 1 FROM handoffs h"
                " WHERE h.session_id = s.id AND h.status = 'claimed')",
                (cutoff,),
            ).fetchall()
            for session_id, tenant_id in rows:
                tx.execute(
                    "UPDATE sessions SET status = 'archived', archived_at = ?, updated_at = ?"
                    " WHERE id = ?",
                    (tx.now, tx.now, session_id),
                )
                tx.emit(session_id, tenant_id, *events.session_archived(session_id))
            return [r[0] for r in rows]

        return await self.transact(NO_SESSION, archive)
