"""Posting a message (one turn) and following a session's events over SSE."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response
from fastapi.responses import JSONResponse

from app.api import sse
from app.api.auth import require_role
from app.api.deps import (
    ConversationDep,
    DeskDep,
    PrincipalDep,
    StreamPrincipalDep,
    StreamsDep,
    VisibleSessionId,
)
from app.api.desk_schemas import HeldMessage
from app.api.params import ResumeAfter, SessionId
from app.api.schemas import CancelledOut, ErrorResponse, MessageOut, PostMessage, TurnOut
from app.conversation.service import ForAgent

router = APIRouter(prefix="/v1/sessions", tags=["turns"])

_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {
        "description": "The finished turn (JSON), or its events (text/event-stream)",
        "content": {"text/event-stream": {}},
    },
    201: {"model": MessageOut, "description": "The human agent's message (author agent)"},
    202: {"model": HeldMessage, "description": "Stored for the agent holding the session"},
    403: {"model": ErrorResponse, "description": "author agent needs the agent role"},
    404: {"model": ErrorResponse, "description": "No such session"},
    409: {
        "model": ErrorResponse,
        "description": "A turn is running (busy policy reject); author agent without the claim",
    },
    422: {"model": ErrorResponse, "description": "Invalid body, id or Last-Event-ID / ?after="},
    429: {
        "model": ErrorResponse,
        "description": "Over a budget (budget_exceeded), the key's turn rate (rate_limited), "
        "its open streams (too_many_streams) or the session's queue (queue_full); "
        "Retry-After where waiting helps",
    },
    502: {"model": ErrorResponse, "description": "The turn failed (e.g. the model is down)"},
}


@router.post("/{session_id}/messages", response_model=TurnOut, responses=_RESPONSES)
async def post_message(
    session_id: VisibleSessionId,
    body: PostMessage,
    principal: PrincipalDep,
    conversation: ConversationDep,
    desk: DeskDep,
    streams: StreamsDep,
    resume: ResumeAfter,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    if body.author == "agent":  # the human holding the session: no turn runs
        require_role(principal, "agent")
        said = await desk.agent_says(principal, session_id, body.content, body.suggestion_id)
        return JSONResponse(MessageOut.of(said).model_dump(), status_code=201)
    # `resume` is checked before the turn is accepted: a bad Last-Event-ID is a 422 with
    # nothing started. On the stream it skips the turn's events the client already has (a
    # fetch-based SSE client retrying the POST with the same client_message_id).
    # So is the stream cap: a refused stream starts no turn.
    streamed = sse.wants_event_stream(accept)
    posted = conversation.post_message(principal, session_id, body.content, body.client_message_id)
    accepted, release = await sse.with_slot(streams, principal, streamed, posted)
    if isinstance(accepted, ForAgent):  # a human agent holds the session: no bot reply
        if release is not None:
            release()  # and no stream
        held = HeldMessage(message=MessageOut.of(accepted.message))
        return JSONResponse(held.model_dump(), status_code=202)
    replay = {"Idempotent-Replayed": "true"} if not accepted.created else {}
    if streamed:
        events = conversation.follow_turn(accepted.turn, after=resume)
        response = sse.stream_response(events, release)
        response.headers.update(replay)
        return response
    turn, message = await conversation.wait_for_turn(accepted.turn)
    return JSONResponse(TurnOut.of(turn, message).model_dump(), headers=replay)


@router.post(
    "/{session_id}/cancel",
    response_model=CancelledOut,
    responses={
        404: {"model": ErrorResponse, "description": "No such session"},
        409: {"model": ErrorResponse, "description": "No turn of the session is running"},
        504: {
            "model": ErrorResponse,
            "description": "The process running the turn did not end it within "
            "HERMES_CANCEL_WAIT_S (cancel_timeout; the request stays on the turn)",
        },
    },
)
async def cancel_turn(
    session_id: VisibleSessionId, principal: PrincipalDep, conversation: ConversationDep
) -> CancelledOut:
    """End the running turn as `cancelled`, in whichever process runs it: its stream gets
    `turn.failed` (code `cancelled`), its open steps close, a JSON request waiting on it gets
    503; queued turns still run. Answers the turn as it ended."""
    return CancelledOut.of(await conversation.cancel_turn(principal, session_id))


@router.get(
    "/{session_id}/events",
    responses={
        200: {"description": "Server-Sent Events", "content": {"text/event-stream": {}}},
        401: {"model": ErrorResponse, "description": "No, unknown or expired credentials"},
        403: {"model": ErrorResponse, "description": "A stream token for another session"},
        404: {"model": ErrorResponse, "description": "No such session"},
        422: {"model": ErrorResponse, "description": "Invalid id or Last-Event-ID / ?after="},
        429: {"model": ErrorResponse, "description": "Too many open streams for this key"},
    },
)
async def session_events(
    session_id: SessionId,
    principal: StreamPrincipalDep,
    conversation: ConversationDep,
    streams: StreamsDep,
    resume: ResumeAfter,
) -> Response:
    # A stream token or a key: `follow_session` checks the session is the caller's (as
    # `VisibleSessionId` does for every other route under the session).
    following = conversation.follow_session(principal, session_id, resume)
    events, release = await sse.with_slot(streams, principal, True, following)
    return sse.stream_response(events, release)
