"""Run the tool calls of one model response.

Reads run concurrently; writes and external actions run one at a time, after the reads, in
the order the model gave. Every call ends as a `ToolResult`, whatever happened.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from app.llm.gateway import RequestedToolCall
from app.tools.context import ToolContext, TurnScope, idempotency_key
from app.tools.handlers import ToolHandlerError
from app.tools.registry import RegisteredTool, ToolRegistry
from app.tools.results import ToolResult
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


class ToolExecutor:
    def __init__(self, registry: ToolRegistry, *, services: dict[str, Any] | None = None) -> None:
        self.registry = registry
        self.services = services or {}

    async def run_calls(
        self, calls: list[RequestedToolCall], scope: TurnScope, events: ToolEvents
    ) -> list[ToolResult]:
        results: dict[int, ToolResult] = {}
        reads = [i for i, c in enumerate(calls) if self._is_read(c)]
        ordered = [i for i in range(len(calls)) if i not in set(reads)]
        if reads:
            outcomes = await asyncio.gather(*(self.run_one(calls[i], scope, events) for i in reads))
            results.update(zip(reads, outcomes, strict=True))
        for i in ordered:
            results[i] = await self.run_one(calls[i], scope, events)
        return [results[i] for i in range(len(calls))]

    def _is_read(self, call: RequestedToolCall) -> bool:
        tool = self.registry.get(call.name)
        return tool is not None and tool.spec.risk == "read"

    async def run_one(
        self, call: RequestedToolCall, scope: TurnScope, events: ToolEvents
    ) -> ToolResult:
        started = time.perf_counter()
        await events.started(call)
        result = await self._execute(call, scope)
        result = result.with_metadata(
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            attempt=result.metadata.get("attempt", 1),
            trace_id=scope.trace_id,
        )
        await events.completed(call, result)
        return result

    async def _execute(self, call: RequestedToolCall, scope: TurnScope) -> ToolResult:
        tool = self.registry.get(call.name)
        if tool is None or not tool.offered:
            available = ", ".join(t.spec.name for t in self.registry.all() if t.offered)
            return ToolResult.fail(
                "unknown_tool",
                f"there is no tool named {call.name!r}",
                hint=f"Use one of: {available}" if available else "No tools are available.",
            )
        try:
            args = validate_arguments(parse_arguments(call.arguments), tool.spec.parameters)
        except InvalidArguments as exc:
            code = "malformed_arguments" if exc.malformed_json else "invalid_arguments"
            return ToolResult.fail(code, str(exc), hint=exc.hint)
        return await self._invoke(tool, call, scope, args)

    async def _invoke(
        self, tool: RegisteredTool, call: RequestedToolCall, scope: TurnScope, args: dict[str, Any]
    ) -> ToolResult:
        spec = tool.spec
        ctx = ToolContext(
            scope=scope,
            call_id=call.id,
            tool=spec.name,
            idempotency_key=idempotency_key(scope, call.id, spec.name),
            services=self.services,
        )
        try:
            data = await asyncio.wait_for(tool.run(ctx, args), timeout=spec.timeout_s)
        except TimeoutError:
            return ToolResult.fail(
                "timeout", f"{spec.name} did not answer within {spec.timeout_s}s"
            )
        except ToolHandlerError as exc:
            return ToolResult.fail(exc.code, exc.message)
        except Exception as exc:
            log.exception("tool %s failed", spec.name)
            return ToolResult.fail("tool_failed", f"{spec.name} failed: {type(exc).__name__}")
        if spec.output_schema is not None:
            problems = output_problems(data, spec.output_schema)
            if problems:
                return ToolResult.fail(
                    "invalid_output",
                    f"{spec.name} returned data that does not match its output schema",
                    hint="; ".join(problems[:5]),
                )
        return ToolResult.ok(data)
