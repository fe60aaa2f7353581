"""Browser-safe credentials: stream tokens for one session's events, and the desk's sign-in
cookie (HttpOnly, SameSite=Strict) with its CSRF token. How they are made: `app.api.tokens`,
`app.api.desk_sessions`. Neither outlives the credential it was made with."""

from __future__ import annotations

import math
import time
from typing import Annotated

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, Field

from app.api.auth import require_role
from app.api.deps import (
    DESK_COOKIE,
    AuthDep,
    CallerDep,
    ConversationDep,
    DeskSessionsDep,
    SettingsDep,
    SignerDep,
)
from app.api.desk_sessions import SignedIn
from app.api.schemas import ErrorResponse, Strict, iso
from app.errors import Unauthorized

router = APIRouter(prefix="/v1", tags=["browser auth"])


class StreamTokenIn(Strict):
    session_id: str = Field(min_length=1, max_length=128)
    ttl_s: int | None = Field(None, ge=10, description="At most HERMES_STREAM_TOKEN_TTL_S")


class StreamTokenOut(BaseModel):
    token: str
    session_id: str
    expires_at: str | None
    events_url: str  # where the token is accepted, with it in the query


class DeskLoginIn(Strict):
    api_key: Annotated[str, Field(min_length=1, max_length=512)]


class DeskSessionOut(BaseModel):
    tenant_id: str
    role: str
    subject: str
    expires_at: str | None
    csrf_token: str  # send it as X-CSRF-Token on every POST/DELETE the desk makes


_AUTH_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorResponse, "description": "No, unknown or expired credentials"},
    403: {
        "model": ErrorResponse,
        "description": "csrf_failed: a cookie without its token; a customer key at the desk",
    },
}


@router.post(
    "/stream-tokens",
    status_code=status.HTTP_201_CREATED,
    response_model=StreamTokenOut,
    responses={**_AUTH_ERRORS, 404: {"model": ErrorResponse, "description": "No such session"}},
)
async def create_stream_token(
    body: StreamTokenIn,
    settings: SettingsDep,
    caller: CallerDep,
    signer: SignerDep,
    conversation: ConversationDep,
) -> StreamTokenOut:
    session = await conversation.get_session(caller.principal, body.session_id)  # 404 if not theirs
    longest = settings.auth.stream_token_ttl_s
    ttl = min(body.ttl_s or longest, longest)
    # No longer than the caller's credential (the principal's expiry), nor than the desk
    # sign-in that asks, which must still stand whenever the token is used.
    token, claims = signer.issue(
        caller.principal,
        ttl,
        session_id=session.id,
        desk_session=None if caller.desk is None else caller.desk.session.id,
    )
    return StreamTokenOut(
        token=token,
        session_id=session.id,
        expires_at=iso(claims.expires_at),
        events_url=f"/v1/sessions/{session.id}/events?stream_token={token}",
    )


@router.post("/desk/login", response_model=DeskSessionOut, responses=_AUTH_ERRORS)
async def desk_login(
    body: DeskLoginIn,
    request: Request,
    response: Response,
    settings: SettingsDep,
    auth: AuthDep,
    desks: DeskSessionsDep,
) -> DeskSessionOut:
    principal = await auth.resolve(None, body.api_key)
    require_role(principal, "agent")  # the desk is for agents; a customer's page needs none
    # Stored; it ends at HERMES_DESK_SESSION_TTL_S or the credential's own expiry, if earlier.
    cookie, signed_in = await desks.sign_in(principal, settings.auth.desk_session_ttl_s)
    response.set_cookie(
        DESK_COOKIE,
        cookie,
        # The browser may drop it a little late, never early: the stored sign-in decides.
        max_age=max(0, math.ceil(signed_in.session.expires_at - time.time())),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return _session_out(signed_in)


@router.get("/desk/session", response_model=DeskSessionOut, responses=_AUTH_ERRORS)
async def desk_session(caller: CallerDep) -> DeskSessionOut:
    """Who the desk is signed in as, and its CSRF token (after a page reload)."""
    if caller.desk is None:  # no cookie, or an API key sent with it (the key wins)
        raise Unauthorized("the desk is not signed in")
    return _session_out(caller.desk)


@router.post("/desk/logout", status_code=status.HTTP_204_NO_CONTENT, responses=_AUTH_ERRORS)
async def desk_logout(request: Request, caller: CallerDep, desks: DeskSessionsDep) -> Response:
    # `caller` checks the cookie and its CSRF token: another site cannot sign the desk out.
    if caller.desk is not None:
        # Deleted: the cookie, wherever a copy of it is, answers 401 from now on, everywhere.
        await desks.sign_out(caller.desk)
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    response.delete_cookie(
        DESK_COOKIE,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def _session_out(signed_in: SignedIn) -> DeskSessionOut:
    session = signed_in.session
    return DeskSessionOut(
        tenant_id=session.tenant_id,
        role=session.role,
        subject=session.subject,
        expires_at=iso(session.expires_at),
        csrf_token=signed_in.csrf_token,
    )
