"""Human approvals of risky tool calls: list a session's, read one, decide one (operators).

Everyone sees the masked `arguments` and the `sensitive` summary; operators and admins also get
`arguments_full`, what the tool will really run with, and each such read is audited.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from app.api.auth import require_role
from app.api.deps import ApprovalsDep, ConversationDep, PrincipalDep, VisibleSessionId
from app.api.params import ApprovalId
from app.api.schemas import (
    ApprovalDecisionIn,
    ErrorResponse,
    ToolApprovalList,
    ToolApprovalOut,
)

router = APIRouter(prefix="/v1/sessions/{session_id}/approvals", tags=["approvals"])


@router.get("", response_model=ToolApprovalList)
async def list_approvals(
    session_id: VisibleSessionId,
    principal: PrincipalDep,
    approvals: ApprovalsDep,
    conversation: ConversationDep,
    status: Annotated[Literal["pending", "approved", "rejected", "expired"] | None, Query()] = None,
) -> ToolApprovalList:
    await conversation.get_session(principal, session_id)
    items = await approvals.list_for_session(principal, session_id, status)
    full = await approvals.reveal(principal, items)
    return ToolApprovalList(items=[ToolApprovalOut.of(a, full=full) for a in items])


@router.get(
    "/{approval_id}",
    response_model=ToolApprovalOut,
    responses={404: {"model": ErrorResponse, "description": "No such session or approval"}},
)
async def get_approval(
    session_id: VisibleSessionId,
    approval_id: ApprovalId,
    principal: PrincipalDep,
    approvals: ApprovalsDep,
    conversation: ConversationDep,
) -> ToolApprovalOut:
    await conversation.get_session(principal, session_id)
    approval = await approvals.get(principal, session_id, approval_id)
    full = await approvals.reveal(principal, [approval])
    return ToolApprovalOut.of(approval, full=full)


@router.post(
    "/{approval_id}",
    response_model=ToolApprovalOut,
    responses={
        404: {"model": ErrorResponse, "description": "No such session or approval"},
        409: {"model": ErrorResponse, "description": "Already decided or expired"},
    },
)
async def decide(
    session_id: VisibleSessionId,
    approval_id: ApprovalId,
    body: ApprovalDecisionIn,
    principal: PrincipalDep,
    approvals: ApprovalsDep,
    conversation: ConversationDep,
) -> ToolApprovalOut:
    await conversation.get_session(principal, session_id)
    require_role(principal, "operator")
    approval = await approvals.decide(
        principal, session_id, approval_id, body.decision, body.reason
    )
    full = await approvals.reveal(principal, [approval])
    return ToolApprovalOut.of(approval, full=full)
