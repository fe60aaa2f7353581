"""Human approvals of risky tool calls: list a session's, read one, decide one (operators).

Everyone sees the masked `arguments` and the `sensitive` summary; operators and admins also get
`arguments_full`, what the tool will really run with, and each such read is audited.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from app.api.auth import require_role
from app.api.deps import ConversationDep, PrincipalDep, RuntimeDep
from app.api.params import ApprovalId, SessionId
from app.api.schemas import ErrorResponse, Strict, iso
from app.storage.approvals import Approval

router = APIRouter(prefix="/v1/sessions/{session_id}/approvals", tags=["approvals"])


class SensitiveFieldOut(BaseModel):
    field: str
    kinds: list[str]
    note: str


class ApprovalOut(BaseModel):
    id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(description="masked, as everyone may see them")
    arguments_full: dict[str, Any] | None = Field(
        None,
        exclude_if=lambda value: value is None,
        description="unmasked, as the tool will run; only for operators and admins (audited)",
    )
    sensitive: list[SensitiveFieldOut] = Field(
        description="per field, the kinds of sensitive value the masks hide"
    )
    reason: str
    status: Literal["pending", "approved", "rejected", "expired"]
    decided_by: str | None
    decision_reason: str | None
    created_at: str
    expires_at: str
    decided_at: str | None

    @classmethod
    def of(cls, a: Approval, *, full: bool = False) -> ApprovalOut:
        return cls(
            id=a.id,
            session_id=a.session_id,
            turn_id=a.turn_id,
            call_id=a.call_id,
            tool=a.tool,
            arguments=a.arguments,
            arguments_full=a.arguments_full if full else None,
            sensitive=[SensitiveFieldOut.model_validate(item) for item in a.sensitive],
            reason=a.reason,
            status=a.status,
            decided_by=a.decided_by,
            decision_reason=a.decision_reason,
            created_at=iso(a.created_at) or "",
            expires_at=iso(a.expires_at) or "",
            decided_at=iso(a.decided_at),
        )


class ApprovalList(BaseModel):
    items: list[ApprovalOut]


class DecisionIn(Strict):
    decision: Literal["approve", "reject"]
    reason: str | None = Field(None, max_length=500)


@router.get("", response_model=ApprovalList)
async def list_approvals(
    session_id: SessionId,
    principal: PrincipalDep,
    runtime: RuntimeDep,
    conversation: ConversationDep,
    status: Annotated[Literal["pending", "approved", "rejected", "expired"] | None, Query()] = None,
) -> ApprovalList:
    await conversation.get_session(principal, session_id)
    items = await runtime.approvals.list_for_session(principal, session_id, status)
    full = await runtime.approvals.reveal(principal, items)
    return ApprovalList(items=[ApprovalOut.of(a, full=full) for a in items])


@router.get(
    "/{approval_id}",
    response_model=ApprovalOut,
    responses={404: {"model": ErrorResponse, "description": "No such session or approval"}},
)
async def get_approval(
    session_id: SessionId,
    approval_id: ApprovalId,
    principal: PrincipalDep,
    runtime: RuntimeDep,
    conversation: ConversationDep,
) -> ApprovalOut:
    await conversation.get_session(principal, session_id)
    approval = await runtime.approvals.get(principal, session_id, approval_id)
    full = await runtime.approvals.reveal(principal, [approval])
    return ApprovalOut.of(approval, full=full)


@router.post(
    "/{approval_id}",
    response_model=ApprovalOut,
    responses={
        404: {"model": ErrorResponse, "description": "No such session or approval"},
        409: {"model": ErrorResponse, "description": "Already decided or expired"},
    },
)
async def decide(
    session_id: SessionId,
    approval_id: ApprovalId,
    body: DecisionIn,
    principal: PrincipalDep,
    runtime: RuntimeDep,
    conversation: ConversationDep,
) -> ApprovalOut:
    await conversation.get_session(principal, session_id)
    require_role(principal, "operator")
    approval = await runtime.approvals.decide(
        principal, session_id, approval_id, body.decision, body.reason
    )
    full = await runtime.approvals.reveal(principal, [approval])
    return ApprovalOut.of(approval, full=full)
