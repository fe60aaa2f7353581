"""The desk's routes: ask for a person, the queue, take a session over and hand it back, agent
assist, close a session and read its contact summary. Agents and above work the desk; a
customer-facing key may ask for a person and read its session's handoff and summary."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, status

from app.api.auth import require_role
from app.api.deps import DeskDep, PrincipalDep, VisibleSessionId
from app.api.desk_schemas import (
    CloseSession,
    HandoffList,
    HandoffOut,
    RequestHandoff,
    SuggestionOut,
    SummaryOut,
)
from app.api.schemas import ErrorResponse

router = APIRouter(tags=["handoffs"])
_ERRORS: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorResponse, "description": "Needs the agent role (release: the holder)"},
    404: {"model": ErrorResponse, "description": "No such session, or no handoff"},
    409: {"model": ErrorResponse, "description": "Held by another agent, or not claimed"},
}


@router.post(
    "/v1/sessions/{session_id}/handoff",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=HandoffOut,
    responses=_ERRORS,
)
async def request_handoff(
    session_id: VisibleSessionId,
    body: RequestHandoff,
    principal: PrincipalDep,
    desk: DeskDep,
) -> HandoffOut:
    requested = await desk.ask_for_person(principal, session_id, body.reason)
    return HandoffOut.of(await desk.describe(requested.handoff, requested.position))


@router.get("/v1/handoffs", response_model=HandoffList, responses=_ERRORS)
async def list_handoffs(
    principal: PrincipalDep,
    desk: DeskDep,
    status: Annotated[Literal["waiting", "claimed", "all"], Query()] = "waiting",
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> HandoffList:
    require_role(principal, "agent")
    items = await desk.queue(principal, status, limit)
    return HandoffList(data=[HandoffOut.of(i) for i in items])


@router.get("/v1/sessions/{session_id}/handoff", response_model=HandoffOut, responses=_ERRORS)
async def get_handoff(
    session_id: VisibleSessionId, principal: PrincipalDep, desk: DeskDep
) -> HandoffOut:
    return HandoffOut.of(await desk.get(principal, session_id))


@router.post(
    "/v1/sessions/{session_id}/handoff/claim", response_model=HandoffOut, responses=_ERRORS
)
async def claim_handoff(
    session_id: VisibleSessionId, principal: PrincipalDep, desk: DeskDep
) -> HandoffOut:
    require_role(principal, "agent")
    handoff = await desk.claim(principal, session_id)
    return HandoffOut.of(await desk.describe(handoff, 0))


@router.post(
    "/v1/sessions/{session_id}/handoff/release", response_model=HandoffOut, responses=_ERRORS
)
async def release_handoff(
    session_id: VisibleSessionId, principal: PrincipalDep, desk: DeskDep
) -> HandoffOut:
    require_role(principal, "agent")
    handoff = await desk.release(principal, session_id)
    return HandoffOut.of(await desk.describe(handoff, 0))


@router.post(
    "/v1/sessions/{session_id}/handoff/suggestions",
    status_code=status.HTTP_201_CREATED,
    response_model=SuggestionOut,
    responses=_ERRORS,
)
async def suggest(
    session_id: VisibleSessionId, principal: PrincipalDep, desk: DeskDep
) -> SuggestionOut:
    require_role(principal, "agent")
    return SuggestionOut(**await desk.suggest(principal, session_id))


@router.post("/v1/sessions/{session_id}/close", response_model=SummaryOut, responses=_ERRORS)
async def close_session(
    session_id: VisibleSessionId, body: CloseSession, principal: PrincipalDep, desk: DeskDep
) -> SummaryOut:
    require_role(principal, "agent")
    return SummaryOut.of(await desk.close(principal, session_id, body.disposition))


@router.get("/v1/sessions/{session_id}/summary", response_model=SummaryOut, responses=_ERRORS)
async def get_summary(
    session_id: VisibleSessionId, principal: PrincipalDep, desk: DeskDep
) -> SummaryOut:
    return SummaryOut.of(await desk.summary(principal, session_id))
