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


def tool_statuses(registry: ToolRegistry, guards: ToolGuards, tenant_id: str) -> list[ToolStatus]:
    """Every registered tool, by name; health as the tenant sees it (breakers are per tenant)."""
    breakers = guards.breakers_for(tenant_id)
    statuses = []
    for tool in registry.all():
        breaker = breakers.get(tool.spec.name)
        health: dict[str, Any] = (
            breaker.snapshot() if breaker is not None else {"state": "closed", "last_error": None}
        )
        if tool.blocked_reason:
            health["blocked_reason"] = tool.blocked_reason
        statuses.append(ToolStatus(tool.spec, tool.offered, health))
    return statuses
