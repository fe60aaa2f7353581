"""The tools the model may call, with their health."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import PrincipalDep, RuntimeDep

router = APIRouter(prefix="/v1/tools", tags=["tools"])


class ToolOut(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]
    risk: str
    source: str
    intents: list[str]
    offered: bool
    health: dict[str, Any]


class ToolList(BaseModel):
    items: list[ToolOut]


@router.get("", response_model=ToolList)
async def list_tools(runtime: RuntimeDep, principal: PrincipalDep) -> ToolList:
    # Health as the caller's tenant sees it: breakers are kept per (tenant, tool).
    breakers = runtime.executor.guards.breakers_for(principal.tenant_id)
    items = []
    for tool in runtime.registry.all():
        spec = tool.spec
        breaker = breakers.get(spec.name)
        health: dict[str, Any] = (
            breaker.snapshot() if breaker is not None else {"state": "closed", "last_error": None}
        )
        if tool.blocked_reason:
            health["blocked_reason"] = tool.blocked_reason
        items.append(
            ToolOut(
                name=spec.name,
                description=spec.description.strip(),
                parameters=spec.parameters,
                risk=spec.risk,
                source=spec.source,
                intents=list(spec.intents),
                offered=tool.offered,
                health=health,
            )
        )
    return ToolList(items=items)
