"""The one interface a running turn reports through: its streamed text, its model calls and its
tool calls, in the order they happen.

`TurnEmitter` (app/conversation/emitter.py) implements it by storing events; `StepRecorder`
(app/workflow/recorder.py) wraps any implementation, records each model and tool call as a
traced step and forwards everything to the one it wraps. The loop and the executor only see
this Protocol, so they are the same whether steps are recorded or not. It lives in `tools`,
the lowest package whose types it speaks of, so the executor, the workflow and the conversation
may all depend on it.

`ToolReports` is the part the executor calls.
"""

from __future__ import annotations

from typing import Protocol

from app.events import NewEvent
from app.llm.gateway import ModelReply, ModelRoute, RequestedToolCall
from app.storage.approvals import Approval
from app.storage.records import Event
from app.tools.results import ToolResult
from app.tools.spec import ToolSpec


class ToolReports(Protocol):
    """What the executor reports about each tool call of a turn."""

    async def started(self, call: RequestedToolCall) -> None: ...

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None: ...

    async def approval_requested(self, call: RequestedToolCall, approval: Approval) -> None: ...

    async def approval_resolved(self, call: RequestedToolCall, approval: Approval) -> None: ...


class TurnReports(ToolReports, Protocol):
    """Everything one turn reports, from the loop and the executor."""

    # -- the reply as it streams ----------------------------------------------------------------

    def delta(self, text: str) -> None:
        """A piece of the reply; stored and sent in order, without waiting."""
        ...

    def flush(self) -> None:
        """Send the text gathered so far now (before a failure is recorded, say)."""
        ...

    def defer_text(self) -> None:
        """The reply is complete: its last text goes out with the turn's next write."""
        ...

    async def settle(self) -> None:
        """Wait until every queued write of the turn is stored; raise if one failed."""
        ...

    async def emit(self, event: NewEvent) -> Event:
        """Store an event of the turn (after everything queued before it) and return it."""
        ...

    # -- model calls ----------------------------------------------------------------------------

    async def model_started(
        self, round_no: int, model: str, tools: list[ToolSpec], messages: int
    ) -> None:
        """The turn is about to call the model (may refuse: a full step queue)."""
        ...

    async def model_finished(
        self, reply: ModelReply, offered: list[str], route: ModelRoute | None
    ) -> None: ...

    async def model_failed(self, code: str, message: str, route: ModelRoute | None) -> None: ...

    # -- tool calls -----------------------------------------------------------------------------

    async def queue_calls(
        self,
        round_no: int,
        calls: list[RequestedToolCall],
        specs: dict[str, ToolSpec],
        reads: list[str],
    ) -> list[RequestedToolCall]:
        """The calls of one model response are about to run (`reads`: the ids of those that run
        together); returns the calls refused, which must not run."""
        ...
