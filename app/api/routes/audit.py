"""The audit trail, for admins: who did what, when — decisions, reads of unmasked arguments,
side-effecting tool calls, memory changes, MCP approvals. The caller's tenant only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.auth import require_role
from app.api.deps import AuditDep, PrincipalDep
from app.api.params import MAX_SEQ, Instant
from app.api.schemas import AuditEntryOut, AuditList, ErrorResponse

router = APIRouter(prefix="/v1/audit", tags=["audit"])

_Text = Annotated[str | None, Query(min_length=1, max_length=200)]


@router.get(
    "",
    response_model=AuditList,
    responses={403: {"model": ErrorResponse, "description": "Not an admin"}},
)
async def list_audit(
    principal: PrincipalDep,
    audit: AuditDep,
    since: Annotated[Instant | None, Query(description="At or after (RFC 3339)")] = None,
    until: Annotated[Instant | None, Query(description="Before (RFC 3339)")] = None,
    actor: _Text = None,
    action: _Text = None,
    session_id: _Text = None,
    target_id: _Text = None,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ, description="Entries after this id")] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> AuditList:
    require_role(principal, "admin")
    start, end = _seconds(since), _seconds(until)
    if start is not None and end is not None and end <= start:
        return AuditList(items=[], next_after=None)  # an empty window
    entries = await audit.list(
        principal.tenant_id,
        action=action,
        target_id=target_id,
        session_id=session_id,
        actor=actor,
        since=start,
        until=end,
        after=after,
        limit=limit + 1,
    )
    page = entries[:limit]
    return AuditList(
        items=[AuditEntryOut.of(e) for e in page],
        next_after=page[-1].id if len(entries) > limit else None,
    )


def _seconds(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()
