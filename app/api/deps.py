"""Request dependencies: the runtime, the caller's principal, the services they use.

Every route takes what it needs from here (`*Dep` aliases); this is the one module that reads
`request.app.state`, so a route's signature says exactly which services it uses.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Header, Query, Request

from app.api.auth import Authenticator
from app.api.desk_sessions import DeskSessions, SignedIn
from app.api.keys import ManagedKeys
from app.api.params import SessionId
from app.api.tokens import TokenSigner
from app.conversation.handoff import HandoffDesk
from app.conversation.service import ConversationService
from app.errors import CsrfFailed, DatabaseClosed, Forbidden, NLUUnavailable, Unauthorized
from app.knowledge.service import KnowledgeBase
from app.memory.service import MemoryService
from app.nlu.types import Parser
from app.principal import Principal
from app.resilience.concurrency import KeyedCounter
from app.runtime import Runtime
from app.settings import Settings
from app.storage.audit import AuditStore
from app.storage.desk_sessions import DeskSessionStore
from app.tools.approvals import ApprovalBroker
from app.tools.executor import ToolExecutor
from app.workflow.service import StepService

if TYPE_CHECKING:  # the MCP SDK is imported only when a server is configured
    from app.tools.mcp.manager import McpManager


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


DESK_COOKIE = "hermes_desk"
CSRF_HEADER = "X-CSRF-Token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_authenticator(request: Request) -> Authenticator:
    auth: Authenticator = request.app.state.auth
    return auth


AuthDep = Annotated[Authenticator, Depends(get_authenticator)]


def get_signer(request: Request) -> TokenSigner:
    signer: TokenSigner = request.app.state.signer
    return signer


SignerDep = Annotated[TokenSigner, Depends(get_signer)]


@dataclass(frozen=True)
class Caller:
    """Who a request acts as, and the desk sign-in it came with (None: a header, or nothing)."""

    principal: Principal
    desk: SignedIn | None = None


def get_desk_sessions(request: Request) -> DeskSessions:
    return DeskSessions(DeskSessionStore(get_runtime(request).db))


DeskSessionsDep = Annotated[DeskSessions, Depends(get_desk_sessions)]


async def get_caller(
    request: Request,
    auth: AuthDep,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Caller:
    """An API key (or JWT) in a header wins; else the desk's sign-in cookie, whose
    state-changing requests must carry its CSRF token; else no credentials (401, or the local
    principal when authentication is off)."""
    cookie = request.cookies.get(DESK_COOKIE)
    if authorization or x_api_key or not cookie:
        return Caller(await auth.resolve(authorization, x_api_key))
    # The stored sign-in, read on every request: a sign-out holds at once on every process.
    signed_in = await get_desk_sessions(request).check(cookie)
    if not await auth.still_valid(signed_in.principal):
        raise Unauthorized("the key this desk sign-in was made with is revoked or expired")
    if request.method not in _SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), signed_in.csrf_token.encode()):
            raise CsrfFailed(f"a signed-in desk must send its {CSRF_HEADER} header")
    return Caller(signed_in.principal, signed_in)


CallerDep = Annotated[Caller, Depends(get_caller)]


async def get_principal(caller: CallerDep) -> Principal:
    return caller.principal


async def request_principal(request: Request) -> Principal:
    """`get_principal` outside a route (the public-paths guard)."""
    caller = await get_caller(
        request,
        get_authenticator(request),
        request.headers.get("authorization"),
        request.headers.get("x-api-key"),
    )
    return caller.principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def get_stream_principal(
    request: Request,
    session_id: SessionId,
    auth: AuthDep,
    signer: SignerDep,
    stream_token: Annotated[
        str | None,
        Query(max_length=1024, description="A token from POST /v1/stream-tokens (browsers)"),
    ] = None,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Principal:
    """The events route's caller: as every route's, or by a stream token for this session
    (the one place a credential is read from the URL)."""
    if stream_token is None:
        return (await get_caller(request, auth, authorization, x_api_key)).principal
    claims = signer.verify(stream_token)
    if claims.session_id != session_id:
        raise Forbidden("this stream token is for another session")
    if not await auth.still_valid(claims.principal):
        raise Unauthorized("the key this stream token was made with is revoked or expired")
    desk = claims.desk_session
    if desk is not None and not await get_desk_sessions(request).alive(desk, claims.principal):
        raise Unauthorized("the desk sign-in this stream token was made with has ended")
    return claims.principal


StreamPrincipalDep = Annotated[Principal, Depends(get_stream_principal)]


def get_streams(runtime: RuntimeDep) -> KeyedCounter:
    return runtime.streams


StreamsDep = Annotated[KeyedCounter, Depends(get_streams)]


def get_conversation(runtime: RuntimeDep) -> ConversationService:
    return runtime.conversation


ConversationDep = Annotated[ConversationService, Depends(get_conversation)]


async def visible_session_id(
    session_id: SessionId, principal: PrincipalDep, conversation: ConversationDep
) -> str:
    """The path's session id, once the caller may see that session. Every route under
    `/v1/sessions/{session_id}` takes its id from here: a customer principal (bound to one
    customer) gets 404 for another customer's session, exactly as for another tenant's, before
    its role, its body or anything else of the request is looked at. Staff principals are
    scoped by tenant in every service call, so they cost nothing here."""
    if principal.user_id is not None:
        await conversation.get_session(principal, session_id)
    return session_id


VisibleSessionId = Annotated[str, Depends(visible_session_id)]


def get_desk(runtime: RuntimeDep) -> HandoffDesk:
    return runtime.desk


DeskDep = Annotated[HandoffDesk, Depends(get_desk)]


def get_tools(runtime: RuntimeDep) -> ToolExecutor:
    return runtime.executor


ToolsDep = Annotated[ToolExecutor, Depends(get_tools)]


def get_approvals(runtime: RuntimeDep) -> ApprovalBroker:
    return runtime.approvals


ApprovalsDep = Annotated[ApprovalBroker, Depends(get_approvals)]


def get_steps(runtime: RuntimeDep) -> StepService:
    return runtime.steps


StepsDep = Annotated[StepService, Depends(get_steps)]


def get_memory(runtime: RuntimeDep) -> MemoryService:
    return runtime.memory


MemoryDep = Annotated[MemoryService, Depends(get_memory)]


def get_knowledge(runtime: RuntimeDep) -> KnowledgeBase:
    return runtime.knowledge


KnowledgeDep = Annotated[KnowledgeBase, Depends(get_knowledge)]


def get_mcp(runtime: RuntimeDep) -> McpManager | None:
    """The MCP manager, or None when no MCP server is configured."""
    manager: McpManager | None = getattr(runtime, "mcp", None)
    return manager


McpDep = Annotated["McpManager | None", Depends(get_mcp)]


def get_parser(runtime: RuntimeDep) -> Parser:
    parser: Parser | None = getattr(runtime, "nlu", None)
    if parser is None:
        raise NLUUnavailable("the NLU models are not loaded")
    return parser


ParserDep = Annotated[Parser, Depends(get_parser)]


def get_audit(runtime: RuntimeDep) -> AuditStore:
    return AuditStore(runtime.db)


AuditDep = Annotated[AuditStore, Depends(get_audit)]


def get_keys(auth: AuthDep) -> ManagedKeys:
    if auth.managed is None:  # only before the lifespan opened the database
        raise DatabaseClosed("the database is not open")
    return auth.managed


KeysDep = Annotated[ManagedKeys, Depends(get_keys)]
