"""The running turn's deadline, reachable from deep inside it (e.g. to pause it for a human).

Waiting for an operator's approval should not eat the turn's own time budget: the approval
wait extends the turn's deadline by as long as it may wait.
"""

from __future__ import annotations

import asyncio
import contextvars

_current: contextvars.ContextVar[asyncio.Timeout | None] = contextvars.ContextVar(
    "turn_deadline", default=None
)


def bind(timeout: asyncio.Timeout) -> contextvars.Token[asyncio.Timeout | None]:
    return _current.set(timeout)


def unbind(token: contextvars.Token[asyncio.Timeout | None]) -> None:
    _current.reset(token)


def extend(seconds: float) -> None:
    timeout = _current.get()
    if timeout is None:
        return
    when = timeout.when()
    if when is not None:
        timeout.reschedule(when + seconds)
