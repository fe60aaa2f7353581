"""Each tool as one tenant sees it: its definition, whether it is offered, its breaker's health.

What `GET /v1/tools` shows; kept here so the route reads a service, not the executor's guards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.tools.flow import ToolGuards
from app.tools.registry import ToolRegistry
from app.tools.spec import ToolSpec


@dataclass(frozen=True)
class ToolStatus:
    spec: ToolSpec
    offered: bool
    health: dict[str, Any]


async def tool_statuses(
    registry: ToolRegistry, guards: ToolGuards, tenant_id: str
) -> list[ToolStatus]:
    """Every registered tool, by name; health as the tenant sees it (breakers are per tenant,
    and shared between processes when Redis is configured)."""
    statuses = []
    for tool in registry.all():
        view = await guards.breaker(tool.spec, tenant_id).inspect()
        health: dict[str, Any] = view.as_dict()
        if tool.blocked_reason:
            health["blocked_reason"] = tool.blocked_reason
        statuses.append(ToolStatus(tool.spec, tool.offered, health))
    return statuses
