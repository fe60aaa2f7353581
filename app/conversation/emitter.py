"""Events of one running turn: text deltas queued in order without waiting, the rest awaited."""

from __future__ import annotations

import asyncio
from typing import Any

from app.llm.gateway import RequestedToolCall
from app.storage.approvals import Approval
from app.storage.records import Event, Turn
from app.storage.tx import Store
from app.tools.results import ToolResult


class TurnEmitter:
    def __init__(self, store: Store, turn: Turn) -> None:
        self._store = store
        self.turn = turn
        self._pending: list[asyncio.Future[Any]] = []

    def delta(self, text: str) -> None:
        """Queue a `message.delta`; the writer keeps order, `settle()` surfaces failures."""
        turn = self.turn
        data = {"turn_id": turn.id, "text": text}
        future = self._store.transact_nowait(
            lambda tx: tx.emit(turn.session_id, turn.tenant_id, "message.delta", data, turn.id)
        )
        self._pending.append(future)
        if len(self._pending) > 256:
            self._pending = [f for f in self._pending if not f.done() or f.exception()]

    async def emit(self, type: str, data: dict[str, Any]) -> Event:
        turn = self.turn
        payload = {"turn_id": turn.id, **data}
        await self.settle()
        return await self._store.transact(
            lambda tx: tx.emit(turn.session_id, turn.tenant_id, type, payload, turn.id)
        )

    async def settle(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            await asyncio.gather(*pending)

    # -- ToolEvents -----------------------------------------------------------------------------

    async def started(self, call: RequestedToolCall) -> None:
        await self.emit(
            "tool.started", {"call_id": call.id, "tool": call.name, "status": "running"}
        )

    async def approval_requested(self, call: RequestedToolCall, approval: Approval) -> None:
        return None  # announced by the approval store as `approval.requested`

    async def approval_resolved(self, call: RequestedToolCall, approval: Approval) -> None:
        return None  # announced by the approval store as `approval.resolved`

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None:
        await self.emit(
            "tool.completed",
            {
                "call_id": call.id,
                "tool": call.name,
                "status": result.status,
                "result": result.to_dict(),
            },
        )
