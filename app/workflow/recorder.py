"""Records the steps of one turn as it runs: every model call and tool call becomes a traced
Step; independent reads of one model response form a batch step with its members.

The recorder is a decorator around the turn's `TurnReports` (app/tools/reports.py): it records
the step of each call it is told about and forwards every call to the emitter it wraps, so the
loop and the executor report to one interface whether steps are recorded or not, and a tool
call's step and its `tool.*` events move together.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from app.errors import StepQueueFull
from app.events import EventType, NewEvent
from app.llm.gateway import ModelReply, ModelRoute, RequestedToolCall
from app.observability import metrics
from app.storage.approvals import Approval
from app.storage.deferred import DeferredWrites
from app.storage.records import Event
from app.storage.steps import (
    NewStep,
    Step,
    StepStatus,
    StepStore,
    TurnRef,
    enqueue_steps,
    event_ref,
    finish_step,
    start_step,
)
from app.storage.tx import Tx
from app.tools.reports import TurnReports
from app.tools.results import ToolResult
from app.tools.shaping import Redactor
from app.tools.spec import ToolSpec
from app.workflow.traces import models_to_store

log = logging.getLogger(__name__)


def _status_of(result: ToolResult) -> StepStatus:
    if result.status != "error":
        return "succeeded"
    if result.error is not None and result.error.code == "timeout":
        return "timed_out"
    return "failed"


def _by_event(tx: Tx, call: RequestedToolCall, trace: dict[str, Any]) -> dict[str, Any]:
    """`trace` with its result as a reference to the call's `tool.completed` of this
    transaction, when that event carries exactly this result (else as it is)."""
    result = trace["result"]
    if result is None:
        return trace
    for event in reversed(tx.events):
        if event.type == EventType.TOOL_COMPLETED and event.data.get("call_id") == call.id:
            if event.data.get("result") == result:
                return {**trace, "result": event_ref(event.seq)}
            break
    return trace


@dataclass
class StepRecorder:
    store: StepStore
    turn: TurnRef
    inner: TurnReports
    max_depth: int  # HERMES_STEP_QUEUE_MAX_DEPTH
    redactor: Redactor
    # The turn's writes, shared with `inner` (its events go through them), and with them the
    # turn's `SessionWriter` (its session's lane, its worker's lease) for every step write: a
    # step change nobody waits for is deferred and stored with the next event (a tool's start
    # with its `tool.started`, a model call's end with what the turn writes next).
    writes: DeferredWrites
    _model_step: Step | None = None  # the model call under way (one at a time per turn)
    _call_steps: dict[str, Step] = field(default_factory=dict)
    _waits: dict[str, Step] = field(default_factory=dict)
    _batch: str | None = None
    _batch_left: set[str] = field(default_factory=set)

    # -- the reply as it streams: nothing to record, forwarded -----------------------------------

    def delta(self, text: str) -> None:
        self.inner.delta(text)

    def flush(self) -> None:
        self.inner.flush()

    def defer_text(self) -> None:
        self.inner.defer_text()

    async def settle(self) -> None:
        await self.inner.settle()

    async def emit(self, event: NewEvent) -> Event:
        return await self.inner.emit(event)

    # -- model calls ----------------------------------------------------------------------------

    async def model_started(
        self, round_no: int, model: str, tools: list[ToolSpec], messages: int
    ) -> None:
        step = NewStep(
            key=f"model:{round_no}",
            action_type="generate_response",
            name=model,
            input_context={"messages": messages, "tools": [t.name for t in tools]},
            # Its schema, always traces.MODEL_OUTPUT_SCHEMA, is not stored: read, it is put back.
            status="running",  # a model call starts the moment it is queued
        )
        queued, refused = await self.writes.now(
            lambda tx: enqueue_steps(tx, self.turn, [step], self.max_depth)
        )
        if refused:
            raise StepQueueFull(
                f"the session's step queue is full ({self.max_depth} steps)",
                max_depth=self.max_depth,
            )
        self._model_step = queued[0]
        await self.inner.model_started(round_no, model, tools, messages)

    async def model_finished(
        self, reply: ModelReply, offered: list[str], route: ModelRoute | None = None
    ) -> None:
        """The step takes the name of the model that answered (a fallback, say), and keeps
        which models were tried or skipped before it."""
        step, self._model_step = self._model_step, None
        if step is not None:
            await self._model_succeeded(step, reply, offered, route)
        await self.inner.model_finished(reply, offered, route)

    async def _model_succeeded(
        self, step: Step, reply: ModelReply, offered: list[str], route: ModelRoute | None
    ) -> None:
        problems = []
        for call in reply.tool_calls:
            if call.name not in offered:
                problems.append(f"{call.name} is not an offered tool")
        result: dict[str, Any] = {
            "text": self.redactor.text(reply.text[:2000]),
            "tool_calls": [{"id": c.id, "name": c.name} for c in reply.tool_calls],
            "finish_reason": reply.finish_reason,
        }
        named: dict[str, Any] = {}
        if route is not None and route.answered_by:
            named["name"] = route.answered_by
        # What every model step would hold alike is left out (`traces.whole` puts it back).
        models = models_to_store(route)
        if models is not None:
            result["models"] = models
        trace = {
            "result": result,
            "model": reply.model,
            "input_tokens": reply.prompt_tokens,
            "output_tokens": reply.completion_tokens,
            "validation": {"valid": False, "errors": problems} if problems else None,
            **named,
        }
        self.writes.defer(lambda tx: finish_step(tx, step.id, "succeeded", trace))
        metrics.STEPS.labels(action_type="generate_response", status="succeeded").inc()

    async def model_failed(self, code: str, message: str, route: ModelRoute | None = None) -> None:
        step, self._model_step = self._model_step, None
        if step is not None:
            status: StepStatus = "timed_out" if code in ("llm_timeout",) else "failed"
            error: dict[str, Any] = {"code": code, "message": self.redactor.text(message)}
            if route is not None:
                error["models"] = route.trace()
            await self.store.finish(self.writes.writer, step.id, status, error=error)
            metrics.STEPS.labels(action_type="generate_response", status=status).inc()
        await self.inner.model_failed(code, message, route)

    # -- tool calls -----------------------------------------------------------------------------

    async def queue_calls(
        self,
        round_no: int,
        calls: list[RequestedToolCall],
        specs: dict[str, ToolSpec],
        reads: list[str],
    ) -> list[RequestedToolCall]:
        """Queue a step per call (reads of the batch under a batch step); returns the calls that
        did not fit in the queue."""
        batch: NewStep | None = None
        if len(reads) > 1:
            batch = NewStep(
                key=f"batch:{round_no}",
                action_type="batch",
                name="parallel_reads",
                input_context={"calls": reads},
                status="running",
            )
        new = []
        for call in calls:
            spec = specs.get(call.name)
            new.append(
                NewStep(
                    key=f"tool:{call.id}",
                    action_type="call_tool",
                    name=call.name,
                    input_context={
                        "call_id": call.id,
                        "arguments": self.redactor.arguments(call.arguments)[:4000],
                    },
                    expected_output_schema=spec.output_schema if spec else None,
                )
            )

        def enqueue(tx: Tx) -> tuple[str | None, list[Step]]:
            parent = None
            if batch is not None:
                parent = enqueue_steps(tx, self.turn, [batch], self.max_depth)[0][0].id
            members = [
                replace(step, parent_id=parent) if step.key[5:] in reads else step for step in new
            ]
            return parent, enqueue_steps(tx, self.turn, members, self.max_depth)[0]

        parent, queued = await self.writes.now(enqueue)
        by_key = {s.key: s for s in queued}
        overflow = []
        for call in calls:
            step = by_key.get(f"tool:{call.id}")
            if step is None:
                overflow.append(call)
            else:
                self._call_steps[call.id] = step
        self._batch = parent
        self._batch_left = {c for c in reads if c in self._call_steps}
        fits = [c for c in calls if c not in overflow]
        return overflow + await self.inner.queue_calls(round_no, fits, specs, reads)

    async def started(self, call: RequestedToolCall) -> None:
        step = self._call_steps.get(call.id)
        if step is not None:
            self.writes.defer(lambda tx: start_step(tx, step.id))
        await self.inner.started(call)

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None:
        step = self._call_steps.get(call.id)
        if step is not None:
            status = _status_of(result)
            schema = step.expected_output_schema is not None
            invalid = result.error is not None and result.error.code == "invalid_output"
            trace = {
                "result": result.to_dict() if result.status != "error" else None,
                "error": None if result.error is None else result.error.to_dict(),
                "tool_duration_ms": result.metadata.get("duration_ms"),
                # A success's is implied (`traces.whole` puts it back): the output was valid
                # (an invalid output fails the call) against its schema if it had one.
                "validation": None
                if status == "succeeded"
                else {"schema": schema, "valid": not invalid}
                if schema
                else {"schema": False},
            }
            # Stored right after the call's `tool.completed` event, in its transaction, so the
            # step can refer to the result the event holds instead of storing it again.
            self.writes.defer_after(
                lambda tx: finish_step(tx, step.id, status, _by_event(tx, call, trace))
            )
            metrics.STEPS.labels(action_type="call_tool", status=status).inc()
            await self._batch_member_done(call.id)
        await self.inner.completed(call, result)

    async def _batch_member_done(self, call_id: str) -> None:
        if call_id not in self._batch_left:
            return
        self._batch_left.discard(call_id)
        if not self._batch_left and self._batch is not None:
            batch = self._batch
            self.writes.defer_after(lambda tx: finish_step(tx, batch, "succeeded", {}))
            metrics.STEPS.labels(action_type="batch", status="succeeded").inc()
            self._batch = None

    @staticmethod
    def store_now() -> float:
        return time.time()

    # -- waiting for a person -------------------------------------------------------------------

    async def approval_requested(self, call: RequestedToolCall, approval: Approval) -> None:
        queued, _ = await self.store.enqueue(
            self.writes.writer,
            self.turn,
            [
                NewStep(
                    key=f"approval:{approval.id}",
                    action_type="wait_for_event",
                    name="approval",
                    input_context={"approval_id": approval.id, "tool": approval.tool},
                    status="running",
                    deadline_at=approval.expires_at,
                )
            ],
            self.max_depth,
        )
        self._waits[approval.id] = queued[0]
        call_step = self._call_steps.get(call.id)
        if call_step is not None:  # waiting for a person is not running: the watchdog leaves it
            self._call_steps[call.id] = await self.store.update(
                self.writes.writer, call_step.id, status="queued"
            )
        await self.inner.approval_requested(call, approval)

    async def approval_resolved(self, call: RequestedToolCall, approval: Approval) -> None:
        step = self._waits.pop(approval.id, None)
        if step is not None:
            await self._wait_ended(call, approval, step)
        await self.inner.approval_resolved(call, approval)

    async def _wait_ended(self, call: RequestedToolCall, approval: Approval, step: Step) -> None:
        status: StepStatus = {"approved": "succeeded", "expired": "timed_out"}.get(
            approval.status, "failed"
        )  # type: ignore[assignment]
        await self.store.finish(
            self.writes.writer, step.id, status, result={"decision": approval.status}
        )
        # The tool itself starts now, not when it was first asked for.
        call_step = self._call_steps.get(call.id)
        if call_step is not None and approval.status == "approved":
            self._call_steps[call.id] = await self.store.update(
                self.writes.writer, call_step.id, status="running", started_at=self.store_now()
            )
