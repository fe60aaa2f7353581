"""The email outbox: one row per idempotency key, claimed before sending and marked after.

A `sent` row is never sent again, so a repeated key cannot deliver twice. A row left in
`sending` (a crash between the SMTP reply and the mark) is sent again only after
`stale_after_s`, with the same Message-ID, so the receiving side can still drop the copy.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from app.demo.actions import now
from app.demo.errors import DemoError
from app.demo.records import Actor, Email


@dataclass(frozen=True)
class Draft:
    message_id: str
    sender: str
    recipient: str
    subject: str
    body: str


def _email(row: sqlite3.Row) -> Email:
    return Email(
        row["idempotency_key"],
        row["message_id"],
        row["sender"],
        row["recipient"],
        row["subject"],
        row["body"],
        row["status"],
        row["attempts"],
    )


def claim(conn: sqlite3.Connection, actor: Actor, draft: Draft, stale_after_s: float) -> Email:
    """The outbox row for this key, claimed for sending unless it is already `sent`.

    The returned status says what to do: `sent` -> nothing (answer from the record);
    `sending` -> this caller owns the attempt and must send, then mark it.
    """
    key = actor.idempotency_key
    row = conn.execute("SELECT * FROM emails WHERE idempotency_key = ?", (key,)).fetchone()
    clock = time.time()
    if row is None:
        conn.execute(
            "INSERT INTO emails (idempotency_key, message_id, sender, recipient, subject, body,"
            " user_id, tenant_id, session_id, status, attempts, claimed_at, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'sending', 1, ?, ?)",
            (key, draft.message_id, draft.sender, draft.recipient, draft.subject, draft.body,
             actor.user_id, actor.tenant_id, actor.session_id, clock, now()),
        )  # fmt: skip
    elif row["user_id"] != actor.user_id:
        raise DemoError("idempotency_conflict", "this request key belongs to another user")
    elif row["status"] == "sent":
        return _email(row)
    elif row["status"] == "sending" and clock - row["claimed_at"] < stale_after_s:
        raise DemoError(
            "email_in_progress",
            "this email is being sent right now; do not send it again",
            retryable=True,
        )
    else:
        conn.execute(
            "UPDATE emails SET status = 'sending', attempts = attempts + 1, claimed_at = ?,"
            " error = NULL WHERE idempotency_key = ?",
            (clock, key),
        )
    return load(conn, key)


def load(conn: sqlite3.Connection, key: str) -> Email:
    return _email(conn.execute("SELECT * FROM emails WHERE idempotency_key = ?", (key,)).fetchone())


# Marks apply only to the attempt that holds the claim: a stale attempt finishing late must
# not overwrite what a newer attempt recorded.


def mark_sent(conn: sqlite3.Connection, key: str, attempt: int) -> None:
    conn.execute(
        "UPDATE emails SET status = 'sent', sent_at = ?"
        " WHERE idempotency_key = ? AND attempts = ? AND status = 'sending'",
        (now(), key, attempt),
    )


def mark_failed(conn: sqlite3.Connection, key: str, attempt: int, error: str) -> None:
    conn.execute(
        "UPDATE emails SET status = 'failed', error = ?"
        " WHERE idempotency_key = ? AND attempts = ? AND status = 'sending'",
        (error[:500], key, attempt),
    )
