"""MCP servers: their health for operators; the full picture and re-approval for admins.

MCP servers serve the whole deployment, not one tenant: approving a changed tool offers it to
every tenant's sessions again, so it needs the `admin` role, and so does the detailed listing
(commands, URLs, fingerprints, who approved what). Operators of any tenant see status only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, Field

from app.api.auth import require_role
from app.api.deps import McpDep, PrincipalDep
from app.api.params import McpServerName, McpToolName
from app.api.schemas import ErrorResponse, Strict, iso
from app.errors import McpServerNotFound

router = APIRouter(prefix="/v1/mcp", tags=["mcp"])

RESPONSES: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorResponse, "description": "Needs the operator role (admin for detail)"},
    404: {"model": ErrorResponse, "description": "No such server or tool"},
}


class McpToolStatus(BaseModel):
    tool: str = Field(description="The server's name for the tool")
    name: str = Field(description="The name the model sees")
    offered: bool
    blocked_reason: str | None


class McpServerStatus(BaseModel):
    """What any operator sees: no command, URL, env, headers or fingerprints."""

    name: str
    state: str
    trusted: bool
    tool_count: int = Field(description="Tools offered to the model")
    tools: list[McpToolStatus]
    last_error: str | None = Field(description="Masked; no URLs, command line or stderr")


class McpToolOut(McpToolStatus):
    fingerprint: str
    approved_by: str | None = Field(description="Subject of the approving key, or first-seen")
    approved_by_tenant: str | None
    approved_at: str | None

    @classmethod
    def of(cls, tool: dict[str, Any]) -> McpToolOut:
        return cls.model_validate({**tool, "approved_at": iso(tool["approved_at"])})


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
        return cls.model_validate(
            {
                **status,
                "tools": [McpToolOut.of(t) for t in status["tools"]],
                "connected_at": iso(status["connected_at"]),
            }
        )


class McpServerList(BaseModel):
    items: list[McpServerStatus]


class McpServerDetailList(BaseModel):
    items: list[McpServerOut]


class McpToolApproveIn(Strict):
    fingerprint: str | None = Field(
        None, description="Approve only if the definition still has this fingerprint"
    )


class McpToolApprovalOut(BaseModel):
    server: str
    tool: str
    name: str
    fingerprint: str
    changed: bool = Field(description="False when the definition was already approved")
    offered: bool
    approved_by: str | None = Field(description="Who approved the definition in force")
    approved_by_tenant: str | None
    approved_at: str | None


@router.get("/servers", response_model=McpServerList | McpServerDetailList, responses=RESPONSES)
async def list_servers(
    principal: PrincipalDep,
    mcp: McpDep,
    detail: Annotated[
        bool, Query(description="Commands, URLs, fingerprints and approvals (admin only)")
    ] = False,
) -> McpServerList | McpServerDetailList:
    if detail:
        require_role(principal, "admin")
        details = mcp.status() if mcp is not None else []
        return McpServerDetailList(items=[McpServerOut.of(s) for s in details])
    require_role(principal, "operator")
    summary = mcp.summary() if mcp is not None else []
    return McpServerList(items=[McpServerStatus.model_validate(s) for s in summary])


@router.post(
    "/servers/{name}/tools/{tool}/approve", response_model=McpToolApprovalOut, responses=RESPONSES
)
async def approve_tool(
    name: McpServerName,
    tool: McpToolName,
    principal: PrincipalDep,
    mcp: McpDep,
    body: Annotated[McpToolApproveIn | None, Body()] = None,
) -> McpToolApprovalOut:
    require_role(principal, "admin")
    if mcp is None:
        raise McpServerNotFound("no such MCP server", server=name)
    outcome = await mcp.approve(
        name,
        tool,
        approved_by=principal.subject,
        tenant_id=principal.tenant_id,
        fingerprint=body.fingerprint if body is not None else None,
    )
    pinned = outcome.approved
    return McpToolApprovalOut(
        server=outcome.server,
        tool=outcome.tool,
        name=outcome.name,
        fingerprint=outcome.fingerprint,
        changed=outcome.changed,
        offered=True,
        approved_by=None if pinned is None else pinned.approved_by,
        approved_by_tenant=None if pinned is None else pinned.approved_by_tenant,
        approved_at=None if pinned is None else iso(pinned.approved_at),
    )
