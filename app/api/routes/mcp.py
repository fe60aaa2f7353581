"""MCP servers for operators: their health and tools, and re-approval of changed tools.

Both routes need the operator role: the status names commands, URLs and tool definitions of
the deployment, which agents at the phones have no use for.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel, Field

from app.api.auth import require_role
from app.api.deps import PrincipalDep
from app.api.schemas import ErrorResponse, Strict, iso
from app.errors import Unavailable
from app.tools.mcp.manager import McpManager

router = APIRouter(prefix="/v1/mcp", tags=["mcp"])

RESPONSES: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorResponse, "description": "Needs the operator role"},
    404: {"model": ErrorResponse, "description": "No such server or tool"},
}


def get_mcp(request: Request) -> McpManager:
    manager: McpManager | None = getattr(request.app.state.runtime, "mcp", None)
    if manager is None:
        raise Unavailable("MCP is not set up in this service")
    return manager


McpDep = Annotated[McpManager, Depends(get_mcp)]


class McpToolOut(BaseModel):
    tool: str = Field(description="The server's name for the tool")
    name: str = Field(description="The name the model sees")
    offered: bool
    blocked_reason: str | None
    fingerprint: str


class McpServerOut(BaseModel):
    name: str
    transport: str
    target: str = Field(description="Command or URL, secrets masked")
    trusted: bool
    state: str
    protocol_version: str | None
    server_info: dict[str, str] | None
    tool_count: int = Field(description="Tools offered to the model")
    tools: list[McpToolOut]
    last_error: str | None
    latency_p50_ms: float | None
    calls: int
    connected_at: str | None
    retries: int
    breaker: dict[str, Any]

    @classmethod
    def of(cls, status: dict[str, Any]) -> McpServerOut:
        return cls.model_validate({**status, "connected_at": iso(status["connected_at"])})


class McpServerList(BaseModel):
    items: list[McpServerOut]


class ApproveIn(Strict):
    fingerprint: str | None = Field(
        None, description="Approve only if the definition still has this fingerprint"
    )


class ApprovalOut(BaseModel):
    server: str
    tool: str
    name: str
    fingerprint: str
    changed: bool = Field(description="False when the definition was already approved")
    offered: bool


@router.get("/servers", response_model=McpServerList, responses=RESPONSES)
async def list_servers(principal: PrincipalDep, mcp: McpDep) -> McpServerList:
    require_role(principal, "operator")
    return McpServerList(items=[McpServerOut.of(s) for s in mcp.status()])


@router.post(
    "/servers/{name}/tools/{tool}/approve", response_model=ApprovalOut, responses=RESPONSES
)
async def approve_tool(
    name: str,
    tool: str,
    principal: PrincipalDep,
    mcp: McpDep,
    body: Annotated[ApproveIn | None, Body()] = None,
) -> ApprovalOut:
    require_role(principal, "operator")
    outcome = await mcp.approve(
        name,
        tool,
        approved_by=principal.subject,
        tenant_id=principal.tenant_id,
        fingerprint=body.fingerprint if body is not None else None,
    )
    return ApprovalOut(
        server=outcome.server,
        tool=outcome.tool,
        name=outcome.name,
        fingerprint=outcome.fingerprint,
        changed=outcome.changed,
        offered=True,
    )
