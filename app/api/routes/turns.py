"""Posting a message (one turn) and following a session's events over SSE."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse

from app.api import sse
from app.api.deps import ConversationDep, PrincipalDep
from app.api.schemas import ErrorResponse, PostMessage, TurnOut
from app.errors import InvalidInput

router = APIRouter(prefix="/v1/sessions", tags=["turns"])

_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {
        "description": "The finished turn (JSON), or its events (text/event-stream)",
        "content": {"text/event-stream": {}},
    },
    404: {"model": ErrorResponse, "description": "No such session"},
    409: {"model": ErrorResponse, "description": "A turn is running (busy policy reject)"},
    502: {"model": ErrorResponse, "description": "The turn failed (e.g. the model is down)"},
}


@router.post("/{session_id}/messages", response_model=TurnOut, responses=_RESPONSES)
async def post_message(
    session_id: str,
    body: PostMessage,
    principal: PrincipalDep,
    conversation: ConversationDep,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    accepted = await conversation.post_message(
        principal, session_id, body.content, body.client_message_id
    )
    replay = {"Idempotent-Replayed": "true"} if not accepted.created else {}
    if sse.wants_event_stream(accept):
        response = sse.stream_response(conversation.follow_turn(accepted.turn))
        response.headers.update(replay)
        return response
    turn, message = await conversation.wait_for_turn(accepted.turn)
    return JSONResponse(TurnOut.of(turn, message).model_dump(), headers=replay)


@router.get(
    "/{session_id}/events",
    responses={
        200: {"description": "Server-Sent Events", "content": {"text/event-stream": {}}},
        404: {"model": ErrorResponse, "description": "No such session"},
    },
)
async def session_events(
    session_id: str,
    principal: PrincipalDep,
    conversation: ConversationDep,
    after: Annotated[int | None, Query(ge=0)] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    start = after
    if last_event_id is not None and last_event_id.strip():
        try:
            start = int(last_event_id)
        except ValueError:
            raise InvalidInput(
                "Last-Event-ID must be an event id from this stream", field="Last-Event-ID"
            ) from None
        if start < 0:
            raise InvalidInput("Last-Event-ID must not be negative", field="Last-Event-ID")
    events = await conversation.follow_session(principal, session_id, start)
    return sse.stream_response(events)
