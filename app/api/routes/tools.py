"""The tools the model may call, with their health."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import PrincipalDep, ToolsDep

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
async def list_tools(tools: ToolsDep, principal: PrincipalDep) -> ToolList:
    return ToolList(
        items=[
            ToolOut(
                name=status.spec.name,
                description=status.spec.description.strip(),
                parameters=status.spec.parameters,
                risk=status.spec.risk,
                source=status.spec.source,
                intents=list(status.spec.intents),
                offered=status.offered,
                health=status.health,
            )
            for status in await tools.statuses(principal.tenant_id)
        ]
    )
