"""Conversation messages: appended inside turn transactions, read in conversation order.

Conversation order is (turn number, insertion): with queued turns, a later user message can be
stored before an earlier turn's answer, and it must still come after that answer.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from app.errors import InvalidCursor
from app.storage.confirmations import confirmed_call_id
from app.storage.records import Message, dumps, new_id
from app.storage.tx import Store, Tx

_COLUMNS = (
    "pk, id, session_id, tenant_id, turn_id, turn_number, role, content, tool_calls,"
    " tool_call_id, name, token_estimate, metadata, created_at"
)


_CURSOR = re.compile(r"([0-9]{1,19}):([0-9]{1,19})")
_MAX_INT = 2**63 - 1


def message_cursor(message: Message) -> str:
    return encode_message_cursor(message.turn_number, message.pk)


def encode_message_cursor(turn_number: int, pk: int) -> str:
    return base64.urlsafe_b64encode(f"{turn_number}:{pk}".encode()).decode()


def _decode(cursor: str) -> tuple[int, int]:
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        text = ""
    # Plain digits only (int() would take "-5", " 7" or "1_0"), each within SQLite's INTEGER.
    found = _CURSOR.fullmatch(text)
    if found is None or max(int(found[1]), int(found[2])) > _MAX_INT:
        raise InvalidCursor
    return int(found[1]), int(found[2])


_INSERT_COLUMNS = (
    "id, session_id, tenant_id, turn_id, turn_number, role, content, tool_calls, tool_call_id,"
    " name, token_estimate, metadata, created_at"
)
_INSERT_SQLITE = (
    f"INSERT INTO messages ({_INSERT_COLUMNS})"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING pk"
)
# PostgreSQL draws keys from a sequence, in the order transactions ask, not the order they
# commit: a session's cached history (app/conversation/history.py) relies on the latter, so the
# session's row is locked before the key is drawn, in the same statement (no round trip more).
# It is the lock the transaction's event (`Tx.emit`) takes on the row anyway, only earlier: a
# second transaction adding to the session waits for the first to commit before it draws.
_INSERT_POSTGRES = (
    f"INSERT INTO messages ({_INSERT_COLUMNS})"
    " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM sessions WHERE id = ?"
    " FOR NO KEY UPDATE RETURNING pk"
)


def insert_message(
    tx: Tx,
    *,
    session_id: str,
    tenant_id: str,
    turn_id: str | None,
    turn_number: int,
    role: str,
    content: str | None,
    token_estimate: int,
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    name: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    """Add a message to the session; its key is drawn in the order the session's messages
    commit (see `_INSERT_POSTGRES`)."""
    message_id = new_id("msg")
    values = (
        message_id,
        session_id,
        tenant_id,
        turn_id,
        turn_number,
        role,
        content,
        None if tool_calls is None else dumps(tool_calls),
        tool_call_id,
        name,
        token_estimate,
        dumps(metadata or {}),
        tx.now,
    )
    if tx.dialect == "postgres":
        inserted = tx.one(_INSERT_POSTGRES, (*values, session_id))
    else:
        inserted = tx.one(_INSERT_SQLITE, values)
    if inserted is None:
        raise LookupError(f"session {session_id} vanished")
    return Message(
        pk=int(inserted[0]),
        id=message_id,
        session_id=session_id,
        tenant_id=tenant_id,
        turn_id=turn_id,
        turn_number=turn_number,
        role=role,  # type: ignore[arg-type]
        content=content,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        name=name,
        token_estimate=token_estimate,
        metadata=metadata or {},
        created_at=tx.now,
    )


def count_added(
    tx: Tx, session_id: str, *, after_turn: int, through_turn: int, after_pk: int
) -> int:
    """How many messages of turns (after_turn, through_turn] have a key above `after_pk`."""
    (count,) = tx.one(
        "SELECT COUNT(*) FROM messages WHERE session_id = ? AND turn_number > ?"
        " AND turn_number <= ? AND pk > ?",
        (session_id, after_turn, through_turn, after_pk),
    ) or (0,)
    return int(count)


class MessageStore(Store):
    async def page(
        self, tenant_id: str, session_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> tuple[list[Message], str | None]:
        after_turn, after_pk = _decode(cursor) if cursor else (-1, 0)
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM messages WHERE session_id = ? AND tenant_id = ?"
            " AND (turn_number > ? OR (turn_number = ? AND pk > ?))"
            " ORDER BY turn_number, pk LIMIT ?",
            (session_id, tenant_id, after_turn, after_turn, after_pk, limit + 1),
        )
        items = [Message.from_row(r) for r in rows[:limit]]
        return items, (message_cursor(items[-1]) if len(rows) > limit else None)

    async def for_context(
        self, session_id: str, *, through_turn: int, after_turn: int = 0, limit: int = 40
    ) -> list[Message]:
        """The last `limit` messages of turns (after_turn, through_turn], in conversation order."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM (SELECT {_COLUMNS} FROM messages WHERE session_id = ?"
            " AND turn_number > ? AND turn_number <= ? ORDER BY turn_number DESC, pk DESC"
            " LIMIT ?) AS recent ORDER BY turn_number, pk",
            (session_id, after_turn, through_turn, limit),
        )
        return [Message.from_row(r) for r in rows]

    async def added(
        self,
        session_id: str,
        *,
        after_turn: int,
        known_through: int,
        after_pk: int,
        through_turn: int,
    ) -> list[Message]:
        """What a session's cached view lacks, in conversation order: every message of turns
        (known_through, through_turn], and those of turns (after_turn, known_through] with a
        key above `after_pk` (added to an earlier turn since it was read). One range of the
        (session, turn, key) index, filtered on the index itself: only new rows are read."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM messages WHERE session_id = ?"
            " AND turn_number > ? AND turn_number <= ? AND (turn_number > ? OR pk > ?)"
            " ORDER BY turn_number, pk",
            (session_id, after_turn, through_turn, known_through, after_pk),
        )
        return [Message.from_row(r) for r in rows]

    async def recent_before(self, message: Message, limit: int = 20) -> list[Message]:
        """Up to `limit` messages just before `message` in its session, the nearest first."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM messages WHERE session_id = ?"
            " AND (turn_number < ? OR (turn_number = ? AND pk < ?))"
            " ORDER BY turn_number DESC, pk DESC LIMIT ?",
            (message.session_id, message.turn_number, message.turn_number, message.pk, limit),
        )
        return [Message.from_row(r) for r in rows]

    async def get(self, message_id: str) -> Message | None:
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM messages WHERE id = ?", (message_id,))
        return None if row is None else Message.from_row(row)

    async def real_arguments(self, turn_id: str) -> dict[str, dict[str, Any]]:
        """The real arguments of this turn's calls where Hermes holds them to run them, by call
        id: an approval's (what its operator approved), a confirmed call's (what its customer
        confirmed), a side-effecting call's that started and did not end. Stored tool calls
        are masked; a resumed turn runs these (a started call's last: what really began)."""
        held: dict[str, dict[str, Any]] = {}
        for sql in _HELD:
            for call_id, arguments in await self.db.fetchall(sql, (turn_id,)):
                held[call_id] = json.loads(arguments)
        return held


_HELD = (
    "SELECT call_id, arguments_full FROM approvals WHERE turn_id = ?"
    " AND arguments_full IS NOT NULL ORDER BY created_at",
    f"SELECT '{confirmed_call_id('')}' || id, arguments FROM confirmations"
    " WHERE resolved_turn_id = ? AND status = 'confirmed'",
    "SELECT call_id, arguments FROM tool_calls WHERE turn_id = ? AND status = 'running'"
    " AND arguments IS NOT NULL ORDER BY created_at",
)
