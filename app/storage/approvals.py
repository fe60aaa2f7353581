"""Pending human approvals for tool calls, and their decisions.

An approval keeps two copies of the arguments: `arguments`, masked, for everyone (and the
`approval.requested` event), and `arguments_full`, as the tool will receive them, which the
API shows only to operators and admins. `sensitive` says per field what the masks hide.
Decisions and reads of the full arguments are written to the audit log in the same
transaction as what they describe.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Literal

from app import events
from app.errors import InternalError
from app.storage import audit
from app.storage.records import dumps, new_id
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.tx import Store, Tx

ApprovalStatus = Literal["pending", "approved", "rejected", "expired"]


@dataclass(frozen=True)
class Approval:
    id: str
    tenant_id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    status: ApprovalStatus
    decided_by: str | None
    decision_reason: str | None
    created_at: float
    expires_at: float
    decided_at: float | None
    sensitive: list[dict[str, Any]] = field(default_factory=list)
    # Unmasked: never in events, logs or reprs; the API shows it to operators only, audited.
    arguments_full: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Approval:
        values = {name: row[name] for name in row.keys()}
        values["arguments"] = json.loads(values["arguments"])
        full = values.get("arguments_full")
        values["arguments_full"] = None if full is None else json.loads(full)
        values["sensitive"] = json.loads(values.get("sensitive") or "[]")
        return cls(**values)


class ApprovalNotPending(InternalError):
    """Raised to the approval service, which answers `ApprovalClosed` or keeps the decision
    that won the race."""

    def __init__(self, approval: Approval) -> None:
        super().__init__(f"approval {approval.id} is already {approval.status}")
        self.approval = approval


def _get(tx: Tx, approval_id: str) -> Approval | None:
    row = tx.one("SELECT * FROM approvals WHERE id = ?", (approval_id,))
    return None if row is None else Approval.from_row(row)


class ApprovalStore(Store):
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
        reason: str,
        timeout_s: float,
        arguments_full: dict[str, Any] | None = None,
        sensitive: list[dict[str, Any]] | None = None,
    ) -> Approval:
        """`arguments` masked (they go into the event), `arguments_full` as the tool gets them."""
        approval_id = new_id("apr")
        sensitive = list(sensitive or [])

        def create(tx: Tx) -> Approval:
            tx.execute(
                "INSERT INTO approvals (id, tenant_id, session_id, turn_id, call_id, tool,"
                " arguments, arguments_full, sensitive, reason, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    approval_id,
                    tenant_id,
                    session_id,
                    turn_id,
                    call_id,
                    tool,
                    dumps(arguments),
                    None if arguments_full is None else dumps(arguments_full),
                    dumps(sensitive),
                    reason,
                    tx.now,
                    tx.now + timeout_s,
                ),
            )
            approval = _get(tx, approval_id)
            assert approval is not None
            tx.emit(
                session_id,
                tenant_id,
                *events.approval_requested(
                    turn_id,
                    approval_id,
                    call_id=call_id,
                    tool=tool,
                    arguments=arguments,
                    sensitive=sensitive,
                    reason=reason,
                    expires_at=approval.expires_at,
                ),
            )
            return approval

        return await self.transact(writer, create)

    async def decide(
        self,
        writer: SessionWriter,
        *,
        tenant_id: str,
        session_id: str,
        approval_id: str,
        status: ApprovalStatus,
        decided_by: str,
        reason: str | None,
        role: str | None = None,
    ) -> Approval | None:
        """Record a decision once; None if there is no such approval for this tenant/session.

        Raises `ApprovalNotPending` when it was already decided or has expired (an approval
        past its deadline is marked expired now, and stays so). A decision by a person (`role`
        given) is audited as `approval.decided` in the same transaction.
        """

        def decide(tx: Tx) -> tuple[Approval | None, bool]:
            approval = _get(tx, approval_id)
            if approval is None or (approval.tenant_id, approval.session_id) != (
                tenant_id,
                session_id,
            ):
                return None, True
            if approval.status != "pending":
                return approval, False
            if tx.now > approval.expires_at:
                _set(tx, approval, "expired", "system", "no decision before it expired")
                return _get(tx, approval_id), False
            _set(tx, approval, status, decided_by, reason)
            if role is not None:
                audit.record(
                    tx,
                    tenant_id=tenant_id,
                    actor=decided_by,
                    role=role,
                    action="approval.decided",
                    target_id=approval_id,
                    session_id=session_id,
                    details={"tool": approval.tool, "decision": status, "reason": reason},
                )
            return _get(tx, approval_id), True

        approval, accepted = await self.transact(writer, decide)
        if approval is not None and not accepted:
            raise ApprovalNotPending(approval)
        return approval

    async def get(self, approval_id: str) -> Approval | None:
        row = await self.db.fetchone("SELECT * FROM approvals WHERE id = ?", (approval_id,))
        return None if row is None else Approval.from_row(row)

    async def get_for_session(
        self, tenant_id: str, session_id: str, approval_id: str
    ) -> Approval | None:
        row = await self.db.fetchone(
            "SELECT * FROM approvals WHERE id = ? AND tenant_id = ? AND session_id = ?",
            (approval_id, tenant_id, session_id),
        )
        return None if row is None else Approval.from_row(row)

    async def audit_full_read(self, approvals: list[Approval], *, actor: str, role: str) -> None:
        """Record that `actor` is being shown these approvals' unmasked arguments (the audit's
        write: of no one session)."""

        def write(tx: Tx) -> None:
            for approval in approvals:
                audit.record(
                    tx,
                    tenant_id=approval.tenant_id,
                    actor=actor,
                    role=role,
                    action="approval.read_full",
                    target_id=approval.id,
                    session_id=approval.session_id,
                    details={"tool": approval.tool, "status": approval.status},
                )

        if approvals:
            await self.transact(NO_SESSION, write)

    async def list_for_session(
        self, tenant_id: str, session_id: str, status: str | None = None
    ) -> list[Approval]:
        sql = "SELECT * FROM approvals WHERE tenant_id = ? AND session_id = ?"
        params: list[Any] = [tenant_id, session_id]
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        rows = await self.db.fetchall(sql + " ORDER BY created_at", params)
        return [Approval.from_row(r) for r in rows]

    async def expire_all_pending(self, now: float | None = None) -> int:
        """At start-up: nobody is waiting for these any more. With `now`, only those of
        sessions no live process owns (a lease held past `now` means its owner still waits).
        One transaction over many sessions, of none of them."""

        def expire(tx: Tx) -> int:
            if now is None:
                rows = tx.execute("SELECT * FROM approvals WHERE status = 'pending'").fetchall()
            else:
                rows = tx.execute(
                    "SELECT a.* FROM approvals a"
                    " LEFT JOIN session_leases l ON l.session_id = a.session_id"
                    " WHERE a.status = 'pending' AND (l.session_id IS NULL OR l.expires_at <= ?)",
                    (now,),
                ).fetchall()
            for row in rows:
                _set(tx, Approval.from_row(row), "expired", "system", "the service restarted")
            return len(rows)

        return await self.transact(NO_SESSION, expire)


def expire_pending_of_turn(tx: Tx, turn_id: str, reason: str) -> int:
    """The turn will not go on (its process died): nobody waits for its approvals any more."""
    rows = tx.execute(
        "SELECT * FROM approvals WHERE turn_id = ? AND status = 'pending'", (turn_id,)
    ).fetchall()
    for row in rows:
        _set(tx, Approval.from_row(row), "expired", "system", reason)
    return len(rows)


def _set(
    tx: Tx, approval: Approval, status: ApprovalStatus, decided_by: str, reason: str | None
) -> None:
    tx.execute(
        "UPDATE approvals SET status = ?, decided_by = ?, decision_reason = ?, decided_at = ?"
        " WHERE id = ?",
        (status, decided_by, reason, tx.now, approval.id),
    )
    tx.emit(
        approval.session_id,
        approval.tenant_id,
        *events.approval_resolved(
            approval.turn_id,
            approval.id,
            call_id=approval.call_id,
            tool=approval.tool,
            status=status,
            reason=reason,
        ),
    )
