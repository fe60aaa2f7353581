"""What a tool handler knows about the call it serves, and what the deployment gives it.

`ToolContext[Deps]` is generic over the one dependency a handler needs: a handler says which by
the type of its context (`ctx: ToolContext[ShopBackend]`) and reads it typed as `ctx.deps`; a
handler that needs nothing takes `ToolContext[None]`. app/tools/deps.py reads that type at
start-up and opens what the deployment provides for it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from app.storage.session_writer import SessionWriter

# What a deployment gives a handler: its own backend, a client of its CRM, the demo shop.
Deps = TypeVar("Deps", covariant=True)


@dataclass(frozen=True)
class TurnScope:
    """Who is acting and where: shared by every call of one turn. What the calls write (their
    idempotency records, confirmations, approvals) goes with the turn's `writer`: its
    session's lane and, while its worker owns the session, the lease's fence."""

    tenant_id: str
    user_id: str
    session_id: str
    turn_id: str
    trace_id: str = ""
    writer: SessionWriter = field(kw_only=True)

    def __post_init__(self) -> None:
        if self.writer.session_id != self.session_id:
            raise ValueError(f"the writer of session {self.writer.session_id} is not this turn's")


@dataclass(frozen=True)
class ToolContext(Generic[Deps]):
    scope: TurnScope
    call_id: str
    tool: str
    idempotency_key: str
    # The dependency the tool's handler names in its `ToolContext[...]`, as the deployment
    # opened it; None for a tool that needs none (MCP and HTTP tools among them).
    deps: Deps

    @property
    def tenant_id(self) -> str:
        return self.scope.tenant_id

    @property
    def user_id(self) -> str:
        return self.scope.user_id

    @property
    def session_id(self) -> str:
        return self.scope.session_id


def idempotency_key(scope: TurnScope, call_id: str, tool: str, arguments: Mapping[str, Any]) -> str:
    """Stable for the same (session, turn, call id, tool, arguments): a retried or replayed call
    (a step retry replays the recorded arguments) gets the same key. The arguments are part of
    it because the call id is the model's: a model that reuses an id for a different call must
    get that call run, not the earlier call's stored result."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    raw = "\x1f".join((scope.tenant_id, scope.session_id, scope.turn_id, call_id, tool, canonical))
    return "idem_" + hashlib.sha256(raw.encode()).hexdigest()[:32]
