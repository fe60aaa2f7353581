"""Browser-safe credentials: stream tokens for one session's events, and the desk's sign-in
cookie (HttpOnly, SameSite=Strict) with its CSRF token. How they are made: `app.api.tokens`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, Field

from app.api.auth import require_role
from app.api.deps import (
    DESK_COOKIE,
    AuthDep,
    ConversationDep,
    PrincipalDep,
    SettingsDep,
    SignerDep,
)
from app.api.schemas import ErrorResponse, Strict, iso
from app.api.tokens import Claims, TokenSigner
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
    principal: PrincipalDep,
    signer: SignerDep,
    conversation: ConversationDep,
) -> StreamTokenOut:
    session = await conversation.get_session(principal, body.session_id)  # 404 if not theirs
    longest = settings.stream_token_ttl_s
    ttl = min(body.ttl_s or longest, longest)
    token, claims = signer.issue("stream", principal, ttl, session_id=session.id)
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
    signer: SignerDep,
) -> DeskSessionOut:
    principal = await auth.resolve(None, body.api_key)
    require_role(principal, "agent")  # the desk is for agents; a customer's page needs none
    ttl = settings.desk_session_ttl_s
    token, claims = signer.issue("desk", principal, ttl)
    response.set_cookie(
        DESK_COOKIE,
        token,
        max_age=ttl,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return _session_out(claims, signer)


@router.get("/desk/session", response_model=DeskSessionOut, responses=_AUTH_ERRORS)
async def desk_session(
    request: Request, principal: PrincipalDep, signer: SignerDep
) -> DeskSessionOut:
    """Who the desk is signed in as, and its CSRF token (after a page reload)."""
    cookie = request.cookies.get(DESK_COOKIE)
    if cookie is None:
        raise Unauthorized("the desk is not signed in")
    claims = signer.verify("desk", cookie)
    if claims.principal != principal:  # an API key sent beside the cookie
        raise Unauthorized("the desk is signed in as someone else")
    return _session_out(claims, signer)


@router.post("/desk/logout", status_code=status.HTTP_204_NO_CONTENT, responses=_AUTH_ERRORS)
async def desk_logout(request: Request, principal: PrincipalDep) -> Response:
    # `principal` checks the cookie and its CSRF token: another site cannot sign the desk out.
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    response.delete_cookie(
        DESK_COOKIE,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def _session_out(claims: Claims, signer: TokenSigner) -> DeskSessionOut:
    return DeskSessionOut(
        tenant_id=claims.principal.tenant_id,
        role=claims.principal.role,
        subject=claims.principal.subject,
        expires_at=iso(claims.expires_at),
        csrf_token=signer.csrf_token(claims),
    )
