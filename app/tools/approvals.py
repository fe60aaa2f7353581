"""Human approval for risky tool calls: the turn waits, an operator decides over the API.

The decision is stored first (so it survives whatever happens to the waiting turn), then the
waiting call is woken. A call nobody decides on in time gets an `approval_expired` result.

Operators decide on what will really run: the unmasked arguments are kept with the approval
and shown to operators and admins only, each such read audited (`reveal`); everyone sees the
masked arguments and the summary of what is sensitive in them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.errors import ApprovalClosed, ApprovalNotFound, DatabaseUnavailable
from app.principal import Principal
from app.storage.approvals import Approval, ApprovalNotPending, ApprovalStore
from app.storage.session_writer import SessionWriter
from app.tools.context import TurnScope

Decision = Literal["approved", "rejected", "expired"]


@dataclass(frozen=True)
class Outcome:
    approval: Approval
    decision: Decision
    reason: str | None


class ApprovalBroker:
    def __init__(self, store: ApprovalStore, timeout_s: float, recheck_s: float = 1.0) -> None:
        self.store = store
        self.timeout_s = timeout_s
        # A decision taken through another process reaches this one through the database:
        # a waiting approval is read again this often (a decision here wakes it at once).
        self.recheck_s = recheck_s
        self._waiting: dict[str, asyncio.Future[Approval]] = {}

    async def request(
        self,
        scope: TurnScope,
        *,
        call_id: str,
        tool: str,
        arguments: dict[str, Any],
        reason: str,
        arguments_full: dict[str, Any] | None = None,
        sensitive: Sequence[Mapping[str, Any]] = (),
        on_created: Callable[[Approval], Awaitable[None]] | None = None,
    ) -> Outcome:
        """Create the approval (announced as `approval.requested`) and wait for a decision.

        `arguments` are masked (everyone and the event see them); `arguments_full` are what
        the tool will run with; `sensitive` summarises per field what the masks hide.
        """
        approval = await self.store.create(
            scope.writer,
            tenant_id=scope.tenant_id,
            session_id=scope.session_id,
            turn_id=scope.turn_id,
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            arguments_full=arguments_full,
            sensitive=[dict(item) for item in sensitive],
            reason=reason,
            timeout_s=self.timeout_s,
        )
        waiter: asyncio.Future[Approval] = asyncio.get_running_loop().create_future()
        self._waiting[approval.id] = waiter
        try:
            if on_created is not None:
                await on_created(approval)
            decided = await self._wait(approval, waiter)
        except TimeoutError:
            decided = await self._expire(scope, approval)
        finally:
            self._waiting.pop(approval.id, None)
        decision: Decision = decided.status  # type: ignore[assignment]
        return Outcome(decided, decision, decided.decision_reason)

    async def _wait(self, approval: Approval, waiter: asyncio.Future[Approval]) -> Approval:
        """The decision: from this process at once, or read back from the database (another
        process decided); TimeoutError when none came in time."""
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError
            try:
                return await asyncio.wait_for(asyncio.shield(waiter), min(left, self.recheck_s))
            except TimeoutError:
                try:
                    stored = await self.store.get(approval.id)
                except DatabaseUnavailable:  # this look is a courtesy: look again next time
                    continue
                if stored is not None and stored.status != "pending":
                    return stored

    async def _expire(self, scope: TurnScope, approval: Approval) -> Approval:
        try:
            expired = await self.store.decide(
                scope.writer,
                tenant_id=scope.tenant_id,
                session_id=scope.session_id,
                approval_id=approval.id,
                status="expired",
                decided_by="system",
                reason="no decision before it expired",
            )
        except ApprovalNotPending as exc:
            return exc.approval  # decided in the last instant: that decision stands
        assert expired is not None
        return expired

    async def decide(
        self,
        principal: Principal,
        session_id: str,
        approval_id: str,
        decision: Literal["approve", "reject"],
        reason: str | None,
    ) -> Approval:
        try:
            approval = await self.store.decide(
                SessionWriter(session_id),  # an operator's decision: the session's lane, no lease
                tenant_id=principal.tenant_id,
                session_id=session_id,
                approval_id=approval_id,
                status="approved" if decision == "approve" else "rejected",
                decided_by=principal.subject,
                reason=reason,
                role=principal.role,
            )
        except ApprovalNotPending as exc:
            raise ApprovalClosed(
                f"this approval is already {exc.approval.status}",
                approval_id=approval_id,
                status=exc.approval.status,
            ) from None
        if approval is None:
            raise ApprovalNotFound("no such approval", approval_id=approval_id)
        waiter = self._waiting.get(approval_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(approval)
        return approval

    async def list_for_session(
        self, principal: Principal, session_id: str, status: str | None
    ) -> list[Approval]:
        return await self.store.list_for_session(principal.tenant_id, session_id, status)

    async def get(self, principal: Principal, session_id: str, approval_id: str) -> Approval:
        approval = await self.store.get_for_session(principal.tenant_id, session_id, approval_id)
        if approval is None:
            raise ApprovalNotFound("no such approval", approval_id=approval_id)
        return approval

    async def reveal(self, principal: Principal, approvals: Sequence[Approval]) -> bool:
        """Whether `principal` may see these approvals' unmasked arguments.

        Operators and admins may; the read is audited (`approval.read_full`, one row per
        approval) before anything is shown, so a read that cannot be audited is not made.
        """
        if not principal.at_least("operator"):
            return False
        await self.store.audit_full_read(
            [a for a in approvals if a.arguments_full is not None],
            actor=principal.subject,
            role=principal.role,
        )
        return True
