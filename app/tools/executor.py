"""Run the tool calls of one model response, safely.

For each call, in this order and before any side effect: the tool must exist and be offered,
the arguments must parse and validate, business rules must pass. Writes and external actions
then check the idempotency store (a stored success is returned, not redone), wait for human
approval when the risk or a rule says so, and only then run, under the tool's breaker, rate
limit, concurrency limit and timeout. Whatever happens, the call ends as one `ToolResult`,
masked and cut to its token budget.

Reads from one model response run concurrently; writes and external actions run one at a
time, after the reads, in the order the model gave.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from app.llm.gateway import RequestedToolCall
from app.observability import metrics
from app.storage.approvals import Approval
from app.storage.tool_calls import ToolCallStore
from app.tools import rules
from app.tools.approvals import ApprovalBroker
from app.tools.context import ToolContext, TurnScope, idempotency_key
from app.tools.flow import ToolGuards
from app.tools.handlers import ToolHandlerError
from app.tools.registry import RegisteredTool, ToolRegistry
from app.tools.results import ToolError, ToolResult
from app.tools.shaping import Redactor, truncate
from app.tools.spec import ToolSpec
from app.tools.validation import (
    InvalidArguments,
    output_problems,
    parse_arguments,
    validate_arguments,
)

log = logging.getLogger(__name__)


class ToolEvents(Protocol):
    async def started(self, call: RequestedToolCall) -> None: ...

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None: ...

    async def approval_requested(self, call: RequestedToolCall, approval: Approval) -> None: ...

    async def approval_resolved(self, call: RequestedToolCall, approval: Approval) -> None: ...


@dataclass(frozen=True)
class ExecutorConfig:
    max_result_tokens: int = 2000
    max_failures_per_turn: int = 3


class ToolExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        *,
        services: dict[str, Any] | None = None,
        guards: ToolGuards | None = None,
        redactor: Redactor | None = None,
        calls: ToolCallStore | None = None,
        approvals: ApprovalBroker | None = None,
        config: ExecutorConfig | None = None,
    ) -> None:
        self.registry = registry
        self.services = services or {}
        self.guards = guards or ToolGuards()
        self.redactor = redactor or Redactor()
        self.calls = calls
        self.approvals = approvals
        self.config = config or ExecutorConfig()

    def for_turn(self, scope: TurnScope, events: ToolEvents) -> TurnTools:
        return TurnTools(self, scope, events)

    async def run_calls(
        self, calls: list[RequestedToolCall], scope: TurnScope, events: ToolEvents
    ) -> list[ToolResult]:
        """One batch without per-turn bookkeeping (for callers outside a turn)."""
        return await self.for_turn(scope, events).run_calls(calls)

    # -- shaping --------------------------------------------------------------------------------

    def shape(self, result: ToolResult, spec: ToolSpec | None) -> ToolResult:
        error = result.error
        if error is not None:
            error = ToolError(
                error.code,
                self.redactor.text(error.message),
                None if error.hint is None else self.redactor.text(error.hint),
            )
        data, extra = result.data, {}
        if data is not None:
            shaped = truncate(self.redactor.data(data), self.config.max_result_tokens)
            data = shaped.data
            if shaped.truncated:
                extra = {"truncated": True, "original_tokens": shaped.original_tokens}
        if spec is not None and spec.untrusted_output and result.status != "error":
            extra["untrusted"] = True
        return ToolResult(result.status, data, error, {**result.metadata, **extra})


class TurnTools:
    """The tools as one turn sees them: counts failures per tool and gives up on a tool that
    keeps failing, so the model stops retrying it and tells the user."""

    def __init__(self, executor: ToolExecutor, scope: TurnScope, events: ToolEvents) -> None:
        self.executor = executor
        self.scope = scope
        self.events = events
        self.attempts: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.given_up: set[str] = set()

    async def run_calls(self, calls: list[RequestedToolCall]) -> list[ToolResult]:
        results: dict[int, ToolResult] = {}
        reads = [i for i, c in enumerate(calls) if self.is_read(c)]
        ordered = [i for i in range(len(calls)) if i not in set(reads)]
        if reads:
            outcomes = await asyncio.gather(*(self.run_one(calls[i]) for i in reads))
            results.update(zip(reads, outcomes, strict=True))
        for i in ordered:
            results[i] = await self.run_one(calls[i])
        return [results[i] for i in range(len(calls))]

    def is_read(self, call: RequestedToolCall) -> bool:
        tool = self.executor.registry.get(call.name)
        return tool is not None and tool.spec.risk == "read"

    async def run_one(self, call: RequestedToolCall) -> ToolResult:
        started = time.perf_counter()
        self.attempts[call.name] += 1
        await self.events.started(call)
        tool = self.executor.registry.get(call.name)
        spec = tool.spec if tool is not None else None
        try:
            raw = await self._execute(call, tool)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug in Hermes itself must not take the turn down
            log.exception("tool call %s (%s) crashed the executor", call.id, call.name)
            raw = ToolResult.fail("internal_error", f"{call.name} could not be run")
        raw = self._count(call.name, raw)
        duration = time.perf_counter() - started
        result = self.executor.shape(raw, spec).with_metadata(
            duration_ms=round(duration * 1000, 3),
            attempt=self.attempts[call.name],
            trace_id=self.scope.trace_id,
        )
        metrics.TOOL_CALLS.labels(tool=call.name, status=result.status).inc()
        metrics.TOOL_SECONDS.labels(tool=call.name).observe(duration)
        log.info(
            "tool call",
            extra={
                "tool": call.name,
                "call_id": call.id,
                "status": result.status,
                "error": result.error.code if result.error else None,
                "duration_ms": result.metadata["duration_ms"],
                "trace_id": self.scope.trace_id,
            },
        )
        await self.events.completed(call, result)
        return result

    def _count(self, name: str, result: ToolResult) -> ToolResult:
        if result.status == "success" or (result.error and result.error.code == "tool_gave_up"):
            return result
        self.failures[name] += 1
        limit = self.executor.config.max_failures_per_turn
        if self.failures[name] < limit:
            return result
        self.given_up.add(name)
        error = result.error or ToolError("tool_failed", f"{name} did not succeed")
        hint = (
            f"{name} has failed {self.failures[name]} times in this turn. Do not call it again. "
            "Tell the user it is not available right now and offer a human agent."
        )
        return ToolResult(
            result.status, result.data, ToolError(error.code, error.message, hint), result.metadata
        )

    # -- the pipeline of one call ---------------------------------------------------------------

    async def _execute(self, call: RequestedToolCall, tool: RegisteredTool | None) -> ToolResult:
        registry = self.executor.registry
        if tool is None or not tool.offered:
            available = ", ".join(t.spec.name for t in registry.all() if t.offered)
            return ToolResult.fail(
                "unknown_tool",
                f"there is no tool named {call.name!r}",
                hint=f"Use one of: {available}" if available else "No tools are available.",
            )
        spec = tool.spec
        if spec.name in self.given_up:
            return ToolResult.fail(
                "tool_gave_up",
                f"{spec.name} already failed {self.failures[spec.name]} times in this turn",
                hint="Do not call it again. Tell the user it is not available right now.",
            )
        try:
            args = validate_arguments(parse_arguments(call.arguments), spec.parameters)
        except InvalidArguments as exc:
            code = "malformed_arguments" if exc.malformed_json else "invalid_arguments"
            return ToolResult.fail(code, str(exc), hint=exc.hint)

        found = rules.violations(spec, args)
        rejected = [v for v in found if v.action == "reject"]
        if rejected:
            return ToolResult.fail(
                "business_rule",
                "; ".join(v.reason for v in rejected),
                hint="This request is not allowed as asked. Explain the rule to the user.",
            )
        approval_reasons = [v.reason for v in found if v.action == "approval"]
        if spec.risk == "external":
            approval_reasons.insert(0, f"{spec.name} acts outside the company (risk: external)")

        key = idempotency_key(self.scope, call.id, spec.name, args)
        side_effects = spec.risk != "read"
        calls = self.executor.calls if side_effects else None
        if calls is not None:
            stored = await calls.stored_result(key)
            if stored is not None:
                return ToolResult.from_dict(stored).with_metadata(replayed=True)

        if approval_reasons:
            refusal = await self._approve(call, spec, args, "; ".join(approval_reasons))
            if refusal is not None:
                return refusal

        ctx = ToolContext(
            scope=self.scope,
            call_id=call.id,
            tool=spec.name,
            idempotency_key=key,
            services=self.executor.services,
        )
        if calls is not None:
            await calls.begin(
                key=key,
                tenant_id=self.scope.tenant_id,
                session_id=self.scope.session_id,
                turn_id=self.scope.turn_id,
                call_id=call.id,
                tool=spec.name,
            )
        result = await self._guarded(tool, ctx, args)
        if calls is not None:
            if result.status == "success":
                await calls.succeed(key, self.executor.shape(result, spec).to_dict())
            else:
                await calls.abandon(key)
        return result

    async def _approve(
        self, call: RequestedToolCall, spec: ToolSpec, args: dict[str, Any], reason: str
    ) -> ToolResult | None:
        broker = self.executor.approvals
        if broker is None:
            return ToolResult.fail(
                "approval_unavailable",
                f"{spec.name} needs a human approval and none can be asked for here",
            )
        from app.resilience import deadline

        deadline.extend(broker.timeout_s)  # waiting for a person is not the turn's own time
        outcome = await broker.request(
            self.scope,
            call_id=call.id,
            tool=spec.name,
            arguments=self.executor.redactor.data(args),
            reason=reason,
            on_created=lambda approval: self.events.approval_requested(call, approval),
        )
        await self.events.approval_resolved(call, outcome.approval)
        if outcome.decision == "approved":
            return None
        if outcome.decision == "rejected":
            why = f": {outcome.reason}" if outcome.reason else ""
            return ToolResult.fail(
                "approval_rejected",
                f"an operator declined {spec.name}{why}",
                hint="Do not retry. Tell the user it was declined and why, if a reason was given.",
                approval_id=outcome.approval.id,
            )
        return ToolResult.fail(
            "approval_expired",
            f"nobody approved {spec.name} within {broker.timeout_s:g}s, so it was not done",
            hint="Tell the user the request is waiting for a colleague and was not carried out.",
            approval_id=outcome.approval.id,
        )

    async def _guarded(
        self, tool: RegisteredTool, ctx: ToolContext, args: dict[str, Any]
    ) -> ToolResult:
        spec, guards = tool.spec, self.executor.guards
        breaker = guards.breaker(spec.name)
        if not breaker.allow():
            return _unavailable(
                spec,
                "circuit_open",
                f"{spec.name} is switched off for {breaker.retry_after():.0f}s after repeated "
                "failures",
            )
        if not await guards.admit(spec):
            breaker.release_probe()
            return _unavailable(spec, "rate_limited", f"{spec.name} is at its rate limit")
        try:
            async with asyncio.timeout(spec.timeout_s), guards.slot(spec):
                data = await tool.run(ctx, args)
        except TimeoutError:
            breaker.record_failure(timeout=True)
            return _unavailable(
                spec, "timeout", f"{spec.name} did not answer within {spec.timeout_s:g}s"
            )
        except ToolHandlerError as exc:
            if exc.retryable:
                breaker.record_failure(error=exc.code)
                return _unavailable(spec, exc.code, exc.message)
            breaker.record_success()  # a definite answer: the tool itself works
            return ToolResult.fail(exc.code, exc.message)
        except asyncio.CancelledError:
            breaker.release_probe()
            raise
        except Exception as exc:
            log.exception("tool %s raised", spec.name)
            breaker.record_failure(error=type(exc).__name__)
            return _unavailable(spec, "tool_failed", f"{spec.name} failed unexpectedly")
        if spec.output_schema is not None:
            problems = output_problems(data, spec.output_schema)
            if problems:
                breaker.record_failure(error="invalid_output")
                return ToolResult.fail(
                    "invalid_output",
                    f"{spec.name} returned data that does not match its output schema",
                    hint="; ".join(problems[:5]),
                )
        breaker.record_success()
        return ToolResult.ok(data)


def _unavailable(spec: ToolSpec, code: str, message: str) -> ToolResult:
    """The tool can't answer now: its declared fallback if it has one, else an error."""
    if spec.fallback is not None:
        data = (
            spec.fallback.data
            if spec.fallback.data is not None
            else {"message": spec.fallback.message}
        )
        return ToolResult(
            "fallback",
            data=data,
            error=ToolError(code, message),
            metadata={"fallback_reason": code},
        )
    return ToolResult.fail(
        code,
        message,
        hint="The tool is unavailable right now. Tell the user and offer another way.",
    )
