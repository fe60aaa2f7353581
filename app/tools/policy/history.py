"""Guard 3: rules over history, read from the tool's own store before the call runs.

A per-call limit (`max_value`) sees one call; split into 400 + 400 + 148, a refund of 948
passes it three times. A `cumulative_max` rule adds what was already done under the same key
(the order, or the customer within a window) to this call; a `sequence` rule flags a call
that follows a risky one (a password reset right after a contact change).

Each rule names a reader, `module:function`, an async function `(ctx, query) -> History`
provided beside the tool's handler, because only the tool's own store knows what was done.
If the reader fails or is slow, the rule counts as broken: rules over history fail closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, cast

from app.tools.context import ToolContext
from app.tools.loader import resolve_python
from app.tools.spec import HistoryRule, ToolSpec

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class HistoryQuery:
    rule: HistoryRule
    arguments: dict[str, Any]
    since: float | None  # epoch seconds; None: all time (or, for sequences, this session)


@dataclass(frozen=True)
class History:
    """What the store says: for `cumulative_max` the sum already done under the rule's key,
    for `sequence` how many of the `after` actions happened in the session or window.
    `this_call` is what the call would add when its own arguments leave the field out (a
    refund of "the whole order" adds what is left of it)."""

    done: float
    this_call: float | None = None


Reader = Callable[[ToolContext[Any], HistoryQuery], Awaitable[History]]


@dataclass(frozen=True)
class Finding:
    action: Literal["approval", "reject"]
    reason: str


@lru_cache(maxsize=64)
def _reader(target: str) -> Reader:
    return cast(Reader, resolve_python(target))


async def findings(spec: ToolSpec, ctx: ToolContext[Any], args: dict[str, Any]) -> list[Finding]:
    out = []
    for rule in spec.history_rules:
        found = await _check(spec, rule, ctx, args)
        if found is not None:
            out.append(found)
    return out


async def _check(
    spec: ToolSpec, rule: HistoryRule, ctx: ToolContext[Any], args: dict[str, Any]
) -> Finding | None:
    since = None if rule.window_hours is None else time.time() - rule.window_hours * 3600
    query = HistoryQuery(rule, args, since)
    try:
        async with asyncio.timeout(min(READ_TIMEOUT_S, spec.timeout_s)):
            history = await _reader(rule.history)(ctx, query)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the store can't say what was done: assume the worst
        log.warning("history rule of %s could not be checked: %s", spec.name, type(exc).__name__)
        return Finding(
            rule.on_violation,
            f"the history {spec.name} depends on could not be read, so the rule "
            f"({rule.message or rule.kind}) could not be checked",
        )
    if rule.kind == "sequence":
        return _sequence(spec, rule, history)
    return _cumulative(rule, args, history)


def _cumulative(rule: HistoryRule, args: dict[str, Any], history: History) -> Finding | None:
    assert rule.field is not None and rule.limit is not None
    own = args.get(rule.field)
    this = float(own) if isinstance(own, int | float) else history.this_call
    if this is None:
        return Finding(
            rule.on_violation,
            f"what this call adds to {rule.field} is unknown, so the limit of {rule.limit:g} "
            f"per {rule.per} could not be checked",
        )
    total = history.done + this
    if total <= rule.limit + 1e-9:
        return None
    window = f" in {rule.window_hours:g}h" if rule.window_hours else ""
    return Finding(
        rule.on_violation,
        (rule.message + " " if rule.message else "")
        + f"({rule.field} {this:g} + {history.done:g} already done for this {rule.per}{window}"
        f" = {total:g}, above {rule.limit:g})",
    )


def _sequence(spec: ToolSpec, rule: HistoryRule, history: History) -> Finding | None:
    if history.done <= 0:
        return None
    window = f"within {rule.window_hours:g}h" if rule.window_hours else "in this session"
    return Finding(
        rule.on_violation,
        (rule.message + " " if rule.message else "")
        + f"({spec.name} follows {' / '.join(rule.after)} {window})",
    )
