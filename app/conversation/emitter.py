"""Events of one running turn: text deltas queued in order without waiting, the rest awaited.

Streamed text is coalesced: the first piece of a reply goes out at once, later pieces are
gathered and stored as one `message.delta` at most every `flush_s` (or when `_FLUSH_CHARS`
pile up), and whatever is gathered always goes out before any other event of the turn (its
`settle`, `emit`, `flush`); when the reply is complete, the rest is deferred to the turn's next
write (`defer_text`). A live client still sees the text arrive as it streams, at most `flush_s`
late; a fast model's reply costs one write and two events instead of a write and an event per
piece. Every delta is an ordinary event: its own sequence number, stored before it is published.

The turn's writes go through `writes` (`DeferredWrites`, app/storage/deferred.py), with the
turn's `SessionWriter` (its session's lane, its worker's lease): deferred ones ride with the
next.

`TurnEmitter` is the turn's `TurnReports` (app/tools/reports.py) without step recording: model
calls and queued tool calls announce nothing of their own; `StepRecorder` wraps it to add steps.
Every event it stores is built by the catalogue (app/events.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from app import events
from app.events import NewEvent
from app.llm.gateway import ModelReply, ModelRoute, RequestedToolCall
from app.observability import metrics
from app.storage.approvals import Approval
from app.storage.deferred import DeferredWrites
from app.storage.records import Event, Turn
from app.storage.session_writer import SessionWriter
from app.storage.tx import Store, Tx
from app.tools.results import ToolResult
from app.tools.spec import ToolSpec

_FLUSH_CHARS = 4096


class TurnEmitter:
    def __init__(
        self, store: Store, writer: SessionWriter, turn: Turn, *, flush_s: float = 0.05
    ) -> None:
        self._store = store
        self.turn = turn
        self.writes = DeferredWrites(store, writer)  # every write of the turn goes through these
        self.flush_s = flush_s
        self._pending: list[asyncio.Future[Any]] = []
        self._text: list[str] = []
        self._chars = 0
        self._flushed_at = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        # Time to first delta counts from the customer's message; a retried turn's is not one.
        self._first_delta_due = turn.resume_from_step is None

    def delta(self, text: str) -> None:
        """Stream a piece of the reply (see the module docstring for when it is stored)."""
        if not text:
            return
        if self._first_delta_due:
            self._first_delta_due = False
            metrics.FIRST_DELTA_SECONDS.observe(max(0.0, time.time() - self.turn.created_at))
        self._text.append(text)
        self._chars += len(text)
        loop = asyncio.get_running_loop()
        due = self._flushed_at + self.flush_s
        if loop.time() >= due or self._chars >= _FLUSH_CHARS:
            self.flush()
        elif self._timer is None:
            self._timer = loop.call_at(due, self.flush)

    def flush(self) -> None:
        """Queue what text is gathered as one `message.delta`; the writer keeps order and
        `settle()` surfaces failures."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._text:
            return
        turn = self.turn
        delta = events.message_delta(turn.id, "".join(self._text))
        self._text, self._chars = [], 0
        self._flushed_at = asyncio.get_running_loop().time()
        future = self.writes.send(lambda tx: tx.emit(turn.session_id, turn.tenant_id, *delta))
        self._pending.append(future)
        if len(self._pending) > 256:
            self._pending = [f for f in self._pending if not f.done() or f.exception()]

    def defer_text(self) -> None:
        """The reply is complete: what text is gathered goes out with the turn's next write
        (the model step's end, the final message), still before it in the log."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._text:
            turn = self.turn
            delta = events.message_delta(turn.id, "".join(self._text))
            self._text, self._chars = [], 0
            self.writes.defer(lambda tx: tx.emit(turn.session_id, turn.tenant_id, *delta))

    def send(self, write: Callable[[Tx], object]) -> None:
        """Queue a write of the turn without waiting for it: it is stored after the text
        streamed so far and before anything the turn writes next (one writer, in order);
        `settle()` surfaces its failure."""
        self.flush()
        self._pending.append(self.writes.send(write))

    async def emit(self, event: NewEvent) -> Event:
        turn = self.turn
        await self.settle()
        return await self.writes.now(lambda tx: tx.emit(turn.session_id, turn.tenant_id, *event))

    async def settle(self) -> None:
        self.flush()
        pending, self._pending = self._pending, []
        if pending:
            # Every outcome is looked at (one failed write usually fails its neighbours too:
            # the database went away); the first failure is the turn's.
            outcomes = await asyncio.gather(*pending, return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome

    def abandon(self) -> None:
        """The turn ended without settling: what it still had queued is stored or not, and a
        failure of it is no news (the turn's end says how it went)."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.add_done_callback(_seen)

    # -- model calls: nothing to announce (a wrapping StepRecorder records them) ---------------

    async def model_started(
        self, round_no: int, model: str, tools: list[ToolSpec], messages: int
    ) -> None:
        return None

    async def model_finished(
        self, reply: ModelReply, offered: list[str], route: ModelRoute | None
    ) -> None:
        return None

    async def model_failed(self, code: str, message: str, route: ModelRoute | None) -> None:
        return None

    # -- tool calls -----------------------------------------------------------------------------

    async def queue_calls(
        self,
        round_no: int,
        calls: list[RequestedToolCall],
        specs: dict[str, ToolSpec],
        reads: list[str],
    ) -> list[RequestedToolCall]:
        return []  # no queue to fill: every call may run

    async def started(self, call: RequestedToolCall) -> None:
        await self.emit(events.tool_started(self.turn.id, call.id, call.name))

    async def approval_requested(self, call: RequestedToolCall, approval: Approval) -> None:
        return None  # announced by the approval store as `approval.requested`

    async def approval_resolved(self, call: RequestedToolCall, approval: Approval) -> None:
        return None  # announced by the approval store as `approval.resolved`

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None:
        await self.emit(
            events.tool_completed(self.turn.id, call.id, call.name, result.status, result.to_dict())
        )


def _seen(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: not "never retrieved" at garbage collection
