"""Run one tool call under its flow control: breaker, rate limit, concurrency slot, timeout.

Only failures of the tool count against its breaker. An error caused by the arguments (a
handler's `ValueError`, `TypeError`, or an `OSError` such as "no such file" raised while
looking up what the model named) is the caller's problem: it goes back to the model as
invalid arguments and leaves the breaker as it was, so one tenant's bad input cannot switch
the tool off. Connection errors and timeouts stay failures of the tool.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any

from app.errors import ToolHandlerError
from app.tools.context import ToolContext
from app.tools.flow import ToolGuards
from app.tools.registry import RegisteredTool
from app.tools.results import ToolError, ToolResult
from app.tools.spec import ToolSpec
from app.tools.validation import output_problems

log = logging.getLogger(__name__)

# OSErrors that describe the name the caller gave, not the health of the tool.
_INPUT_ERRNOS = frozenset(
    {errno.ENOENT, errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ}
)


def caused_by_input(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | TimeoutError):
        return False
    if isinstance(exc, OSError):
        return exc.errno in _INPUT_ERRNOS
    return isinstance(exc, ValueError | TypeError)


async def run_guarded(
    tool: RegisteredTool, ctx: ToolContext[Any], args: dict[str, Any], guards: ToolGuards
) -> ToolResult:
    spec = tool.spec
    breaker = guards.breaker(spec, ctx.tenant_id)
    if not await breaker.admit():
        retry_after = (await breaker.inspect()).retry_after_s
        return unavailable(
            spec,
            "circuit_open",
            f"{spec.name} is switched off for {retry_after:.0f}s after repeated failures",
        )
    if not await guards.admit(spec, ctx.tenant_id):
        await breaker.release()
        return unavailable(spec, "rate_limited", f"{spec.name} is at its rate limit")
    try:
        async with asyncio.timeout(spec.timeout_s), guards.slot(spec):
            data = await tool.run(ctx, args)
    except TimeoutError:
        await breaker.failed(timed_out=True)
        return unavailable(
            spec, "timeout", f"{spec.name} did not answer within {spec.timeout_s:g}s"
        )
    except ToolHandlerError as exc:
        if exc.retryable:
            await breaker.failed(error=exc.code)
            return unavailable(spec, exc.code, exc.message)
        await breaker.succeeded()  # a definite answer: the tool itself works
        return ToolResult.fail(exc.code, exc.message)
    except asyncio.CancelledError:
        await breaker.release()
        raise
    except Exception as exc:
        if caused_by_input(exc):
            await breaker.release()  # says nothing about the tool's health
            log.info("tool %s refused its arguments: %s", spec.name, type(exc).__name__)
            return ToolResult.fail(
                "invalid_arguments",
                f"{spec.name} could not use these arguments ({type(exc).__name__})",
                hint="Check the values against the tool's description and try again once; "
                "if the customer gave them, ask the customer to check them.",
            )
        log.exception("tool %s raised", spec.name)
        await breaker.failed(error=type(exc).__name__)
        return unavailable(spec, "tool_failed", f"{spec.name} failed unexpectedly")
    if spec.output_schema is not None:
        problems = output_problems(data, spec.output_schema)
        if problems:
            await breaker.failed(error="invalid_output")
            return ToolResult.fail(
                "invalid_output",
                f"{spec.name} returned data that does not match its output schema",
                hint="; ".join(problems[:5]),
            )
    await breaker.succeeded()
    return ToolResult.ok(data)


def unavailable(spec: ToolSpec, code: str, message: str) -> ToolResult:
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
