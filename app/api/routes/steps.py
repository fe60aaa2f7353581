"""The step machine's traces, and resuming a failed turn from one of its steps."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse

from app.api import sse
from app.api.deps import ConversationDep, PrincipalDep, StepsDep, StreamsDep, VisibleSessionId
from app.api.params import StepId
from app.api.schemas import ErrorResponse, RetryOut, StepList, StepOut

router = APIRouter(prefix="/v1/sessions/{session_id}/steps", tags=["steps"])


@router.get("", response_model=StepList, responses={404: {"model": ErrorResponse}})
async def list_steps(
    session_id: VisibleSessionId,
    principal: PrincipalDep,
    steps: StepsDep,
    turn_id: Annotated[str | None, Query(max_length=64)] = None,
) -> StepList:
    items = await steps.list_steps(principal, session_id, turn_id)
    return StepList(items=[StepOut.of(s) for s in items])


@router.post(
    "/{step_id}/retry",
    status_code=202,
    response_model=RetryOut,
    responses={
        404: {"model": ErrorResponse, "description": "No such session or step"},
        409: {"model": ErrorResponse, "description": "Not a failed step of the last turn"},
        429: {"model": ErrorResponse, "description": "Too many open streams for this key"},
    },
)
async def retry_step(
    session_id: VisibleSessionId,
    step_id: StepId,
    principal: PrincipalDep,
    steps: StepsDep,
    conversation: ConversationDep,
    streams: StreamsDep,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    streamed = sse.wants_event_stream(accept)
    retried = steps.retry(principal, session_id, step_id)
    turn, release = await sse.with_slot(streams, principal, streamed, retried)
    if streamed:
        return sse.stream_response(conversation.follow_turn(turn), release)
    body = RetryOut(turn_id=turn.id, status=turn.status, resumed_from_step=step_id)
    return JSONResponse(body.model_dump(), status_code=202)
