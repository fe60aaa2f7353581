"""Guard 2b: the tool's own precondition check, before anyone is asked to approve.

A refund of a cancelled order above the limit would otherwise wait for an operator, who
approves it, and only then would the backend refuse it: a person's time spent on a call that
could never run, and a customer kept waiting for the wrong answer. A tool may name a
`precheck` (tools.yaml), an async `(ctx, **arguments) -> None` beside its handler, that raises
the `ToolHandlerError` the tool would answer with now, and changes nothing.

A precheck can only refuse. Anything it lets through still goes through every rule, the
confirmation and the approval, and the tool checks again when it runs; so a precheck that
fails, times out or answers "retry" counts as no refusal (the stricter path stays in force).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any, cast

from app.errors import ToolHandlerError
from app.tools.context import ToolContext
from app.tools.loader import resolve_python
from app.tools.results import ToolResult
from app.tools.spec import ToolSpec

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 3.0

Precheck = Callable[..., Awaitable[None]]


@lru_cache(maxsize=64)
def _precheck(target: str) -> Precheck:
    return cast(Precheck, resolve_python(target))


async def refusal(spec: ToolSpec, ctx: ToolContext[Any], args: dict[str, Any]) -> ToolResult | None:
    """The tool's answer if it would refuse these arguments now; None to go on."""
    if spec.precheck is None:
        return None
    try:
        async with asyncio.timeout(min(READ_TIMEOUT_S, spec.timeout_s)):
            await _precheck(spec.precheck)(ctx, **args)
    except asyncio.CancelledError:
        raise
    except ToolHandlerError as exc:
        if exc.retryable:  # not an answer about these arguments
            return None
        return ToolResult.fail(exc.code, exc.message)
    except Exception as exc:
        log.warning("precheck of %s could not run: %s", spec.name, type(exc).__name__)
    return None
