"""A database with one bare session in it, for tests of transactions and the events they append."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.storage.port import Database
from app.storage.records import Event
from app.storage.session_writer import SessionWriter
from app.storage.tx import Tx

SESSION = "ses_tx"


async def with_one_session(open_db: Any) -> Database:
    """An open database of the test's backend (closed by `open_db`) with the session `SESSION`
    of tenant "t"."""
    database: Database = await open_db()
    await database.write(
        SessionWriter(SESSION),
        lambda c: c.execute(
            "INSERT INTO sessions (id, tenant_id, user_id, status, created_at, updated_at,"
            " last_activity_at) VALUES (?, 't', 'u', 'active', 0, 0, 0)",
            (SESSION,),
        ),
    )
    return database


def event(type: str) -> Callable[[Tx], Event]:
    """The write that appends an event of `type` to the session."""
    return lambda tx: tx.emit(SESSION, "t", type, {})
