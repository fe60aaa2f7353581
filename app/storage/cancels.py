"""Cancel requests for turns another process runs: recorded on the turn
(`turns.cancel_requested_at`), found by the process that holds the session's lease.

A request is only ever made by an authorised API request (`ConversationService.cancel_turn`)
and belongs to one turn: once that turn ends, however it ends, the request matches nothing
(the partial index `turns_cancel_requested` holds running turns only), and a turn reopened to
resume from a step starts without one (`TurnStore.reopen`).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.storage.tx import Store, Tx


@dataclass(frozen=True)
class CancelRequest:
    turn: Turn  # the running turn, as it was when the request was recorded
    owner: str | None  # the process holding the session's lease; None: nobody (it expired)
    after_seq: int  # the session's last event then: the turn's end comes after it


def request_cancel(tx: Tx, session_id: str) -> CancelRequest | None:
    """Ask for the session's running turn to be cancelled (a second ask keeps the first time);
    None when no turn of the session is running."""
    row = tx.one(
        "UPDATE turns SET cancel_requested_at = COALESCE(cancel_requested_at, ?)"
        " WHERE id = (SELECT id FROM turns WHERE session_id = ? AND status = 'running'"
        " ORDER BY number LIMIT 1) AND status = 'running' RETURNING *",
        (tx.now, session_id),
    )
    if row is None:
        return None
    lease = tx.one(
        "SELECT owner FROM session_leases WHERE session_id = ? AND expires_at > ?",
        (session_id, tx.now),
    )
    seq = tx.one("SELECT last_event_seq FROM sessions WHERE id = ?", (session_id,))
    return CancelRequest(
        Turn.from_row(row),
        None if lease is None else str(lease[0]),
        0 if seq is None else int(seq[0]),
    )


class CancelStore(Store):
    async def request(self, writer: SessionWriter, session_id: str) -> CancelRequest | None:
        return await self.transact(writer, lambda tx: request_cancel(tx, session_id))

    async def pending(self, owner: str) -> list[tuple[str, str]]:
        """(session, turn) of the running turns with a cancel request, in sessions whose lease
        `owner` holds: one probe of a partial index that is empty unless a cancel is on its way."""
        rows = await self.db.fetchall(
            "SELECT t.session_id, t.id FROM turns t"
            " JOIN session_leases l ON l.session_id = t.session_id"
            " WHERE t.cancel_requested_at IS NOT NULL AND t.status = 'running'"
            " AND l.owner = ?",
            (owner,),
        )
        return [(str(r[0]), str(r[1])) for r in rows]
