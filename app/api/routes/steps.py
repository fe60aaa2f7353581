"""The step machine's traces, and resuming a failed turn from one of its steps."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from app.api import sse
from app.api.deps import ConversationDep, PrincipalDep, RuntimeDep
from app.api.params import SessionId, StepId
from app.api.schemas import ErrorResponse, iso
from app.storage.steps import Step

router = APIRouter(prefix="/v1/sessions/{session_id}/steps", tags=["steps"])


class StepOut(BaseModel):
    id: str
    turn_id: str
    key: str
    seq: int
    parent_id: str | None
    action_type: str
    name: str
    status: str
    attempts: int
    input_context: dict[str, Any]
    expected_output_schema: dict[str, Any] | None
    result: Any
    error: dict[str, Any] | None
    trace: dict[str, Any]

    @classmethod
    def of(cls, s: Step) -> StepOut:
        duration = (
            None
            if s.started_at is None or s.finished_at is None
            else round((s.finished_at - s.started_at) * 1000, 3)
        )
        return cls(
            id=s.id,
            turn_id=s.turn_id,
            key=s.key,
            seq=s.seq,
            parent_id=s.parent_id,
            action_type=s.action_type,
            name=s.name,
            status=s.status,
            attempts=s.attempts,
            input_context=s.input_context,
            expected_output_schema=s.expected_output_schema,
            result=s.result,
            error=s.error,
            trace={
                "created_at": iso(s.created_at),
                "started_at": iso(s.started_at),
                "finished_at": iso(s.finished_at),
                "duration_ms": duration,
                "deadline_at": iso(s.deadline_at),
                "model": s.model,
                "input_tokens": s.input_tokens,
                "output_tokens": s.output_tokens,
                "tool_duration_ms": s.tool_duration_ms,
                "validation": s.validation,
            },
        )


class StepList(BaseModel):
    items: list[StepOut]


class RetryOut(BaseModel):
    turn_id: str
    status: str
    resumed_from_step: str


@router.get("", response_model=StepList, responses={404: {"model": ErrorResponse}})
async def list_steps(
    session_id: SessionId,
    principal: PrincipalDep,
    runtime: RuntimeDep,
    turn_id: Annotated[str | None, Query(max_length=64)] = None,
) -> StepList:
    steps = await runtime.steps.list_steps(principal, session_id, turn_id)
    return StepList(items=[StepOut.of(s) for s in steps])


@router.post(
    "/{step_id}/retry",
    status_code=202,
    response_model=RetryOut,
    responses={
        404: {"model": ErrorResponse, "description": "No such session or step"},
        409: {"model": ErrorResponse, "description": "Not a failed step of the last turn"},
    },
)
async def retry_step(
    session_id: SessionId,
    step_id: StepId,
    principal: PrincipalDep,
    runtime: RuntimeDep,
    conversation: ConversationDep,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    turn = await runtime.steps.retry(principal, session_id, step_id)
    if sse.wants_event_stream(accept):
        return sse.stream_response(conversation.follow_turn(turn))
    body = RetryOut(turn_id=turn.id, status=turn.status, resumed_from_step=step_id)
    return JSONResponse(body.model_dump(), status_code=202)
