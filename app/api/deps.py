"""Request dependencies: the runtime, the caller's principal, the services they use.

Every route takes what it needs from here (`*Dep` aliases); this is the one module that reads
`request.app.state`, so a route's signature says exactly which services it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Header, Request

from app.api.auth import Authenticator
from app.conversation.handoff import HandoffDesk
from app.conversation.service import ConversationService
from app.errors import NLUUnavailable
from app.memory.service import MemoryService
from app.nlu.types import Parser
from app.principal import Principal
from app.runtime import Runtime
from app.storage.audit import AuditStore
from app.tools.approvals import ApprovalBroker
from app.tools.executor import ToolExecutor
from app.workflow.service import StepService

if TYPE_CHECKING:  # the MCP SDK is imported only when a server is configured
    from app.tools.mcp.manager import McpManager


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_principal(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Principal:
    auth: Authenticator = request.app.state.auth
    return auth.resolve(authorization, x_api_key)


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def get_conversation(runtime: RuntimeDep) -> ConversationService:
    return runtime.conversation


ConversationDep = Annotated[ConversationService, Depends(get_conversation)]


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
