"""What a tool handler knows about the call it serves."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TurnScope:
    """Who is acting and where: shared by every call of one turn."""

    tenant_id: str
    user_id: str
    session_id: str
    turn_id: str
    trace_id: str = ""


@dataclass(frozen=True)
class ToolContext:
    scope: TurnScope
    call_id: str
    tool: str
    idempotency_key: str
    services: dict[str, Any] = field(default_factory=dict)

    @property
    def tenant_id(self) -> str:
        return self.scope.tenant_id

    @property
    def user_id(self) -> str:
        return self.scope.user_id

    @property
    def session_id(self) -> str:
        return self.scope.session_id


def idempotency_key(scope: TurnScope, call_id: str, tool: str) -> str:
    """Stable for the same (session, turn, call): a retried or replayed call gets the same key."""
    raw = f"{scope.tenant_id}\x1f{scope.session_id}\x1f{scope.turn_id}\x1f{call_id}\x1f{tool}"
    return "idem_" + hashlib.sha256(raw.encode()).hexdigest()[:32]
