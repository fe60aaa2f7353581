"""Tool calls waiting for the customer's yes, and how each ended.

At most one confirmation is pending per session: asking for a new one supersedes the old.
Each change of state is announced as an event in the same transaction
(`confirmation.requested`, `confirmation.resolved`).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Literal

from app import events
from app.storage.records import dumps, new_id
from app.storage.session_writer import SessionWriter
from app.storage.tx import Store, Tx

ConfirmationStatus = Literal["pending", "confirmed", "declined", "superseded", "expired"]


@dataclass(frozen=True)
class Confirmation:
    id: str
    tenant_id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    readback: dict[str, str]
    status: ConfirmationStatus
    created_at: float
    expires_at: float
    resolved_at: float | None
    resolved_turn_id: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Confirmation:
        values = {name: row[name] for name in row.keys()}
        values["arguments"] = json.loads(values["arguments"])
        values["readback"] = json.loads(values["readback"])
        return cls(**values)


def confirmed_call_id(confirmation_id: str) -> str:
    """The id of the call that runs when the customer confirms."""
    return f"call_{confirmation_id}"


def _resolve(tx: Tx, found: Confirmation, status: ConfirmationStatus, turn_id: str) -> None:
    tx.execute(
        "UPDATE confirmations SET status = ?, resolved_at = ?, resolved_turn_id = ? WHERE id = ?",
        (status, tx.now, turn_id, found.id),
    )
    tx.emit(
        found.session_id,
        found.tenant_id,
        *events.confirmation_resolved(
            turn_id, found.id, call_id=found.call_id, tool=found.tool, status=status
        ),
    )


def _pending(tx: Tx, session_id: str) -> Confirmation | None:
    row = tx.one(
        "SELECT * FROM confirmations WHERE session_id = ? AND status = 'pending'"
        " ORDER BY created_at DESC LIMIT 1",
        (session_id,),
    )
    return None if row is None else Confirmation.from_row(row)


class ConfirmationStore(Store):
    async def create(
        self,
        writer: SessionWriter,
        *,
        tenant_id: str,
        session_id: str,
        turn_id: str,
        call_id: str,
        tool: str,
        arguments: dict[str, Any],
        readback: dict[str, str],
        timeout_s: float,
    ) -> Confirmation:
        confirmation_id = new_id("cnf")

        def create(tx: Tx) -> Confirmation:
            while (older := _pending(tx, session_id)) is not None:
                _resolve(tx, older, "superseded", turn_id)
            tx.execute(
                "INSERT INTO confirmations (id, tenant_id, session_id, turn_id, call_id, tool,"
                " arguments, readback, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (confirmation_id, tenant_id, session_id, turn_id, call_id, tool,
                 dumps(arguments), dumps(readback), tx.now, tx.now + timeout_s),
            )  # fmt: skip
            tx.emit(
                session_id,
                tenant_id,
                *events.confirmation_requested(
                    turn_id,
                    confirmation_id,
                    call_id=call_id,
                    tool=tool,
                    readback=readback,
                    expires_at=tx.now + timeout_s,
                ),
            )
            found = _pending(tx, session_id)
            assert found is not None
            return found

        return await self.transact(writer, create)

    async def pending(self, session_id: str) -> Confirmation | None:
        row = await self.db.fetchone(
            "SELECT * FROM confirmations WHERE session_id = ? AND status = 'pending'"
            " ORDER BY created_at DESC LIMIT 1",
            (session_id,),
        )
        return None if row is None else Confirmation.from_row(row)

    async def confirmed_calls(self, turn_id: str) -> frozenset[str]:
        """Ids of the calls run for confirmations given in this turn (see
        app/conversation/confirmation.py): a retried turn must not ask again."""
        rows = await self.db.fetchall(
            "SELECT id FROM confirmations WHERE resolved_turn_id = ? AND status = 'confirmed'",
            (turn_id,),
        )
        return frozenset(confirmed_call_id(row[0]) for row in rows)

    async def resolve(
        self,
        writer: SessionWriter,
        confirmation_id: str,
        status: ConfirmationStatus,
        turn_id: str,
    ) -> Confirmation | None:
        """Move a pending confirmation to `status`; None if it is no longer pending. A
        confirmation past its deadline becomes `expired` whatever was asked."""

        def resolve(tx: Tx) -> Confirmation | None:
            row = tx.one("SELECT * FROM confirmations WHERE id = ?", (confirmation_id,))
            if row is None:
                return None
            found = Confirmation.from_row(row)
            if found.status != "pending":
                return None
            final: ConfirmationStatus = "expired" if tx.now > found.expires_at else status
            _resolve(tx, found, final, turn_id)
            updated = tx.one("SELECT * FROM confirmations WHERE id = ?", (confirmation_id,))
            assert updated is not None
            return Confirmation.from_row(updated)

        return await self.transact(writer, resolve)
