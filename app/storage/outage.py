"""Waiting out a database that cannot be reached: the same call again, after growing pauses.

Only `DatabaseUnavailable` is waited out (the engines raise it for a broken connection, a server
going away, a pool with no connection to give); any other error is the caller's at once. The
wait has no bound of its own: the caller's timeout or cancellation is the bound.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from app.errors import DatabaseUnavailable

T = TypeVar("T")
log = logging.getLogger(__name__)

FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 2.0


async def when_reachable(
    call: Callable[[], Awaitable[T]], what: str, *, max_pause_s: float = MAX_PAUSE_S
) -> T:
    """`call()`, called again after each `DatabaseUnavailable` until it answers; the pauses
    double from 50 ms up to `max_pause_s`, with jitter (many waiters do not come back in step).
    `what` names the call for the log."""
    pause = FIRST_PAUSE_S
    waited = False
    while True:
        try:
            answer = await call()
        except DatabaseUnavailable as exc:
            if not waited:
                log.warning("%s: the database cannot be reached; waiting for it (%s)", what, exc)
            waited = True
        else:
            if waited:
                log.info("%s: the database answers again", what)
            return answer
        await asyncio.sleep(pause * (0.5 + random.random() / 2))
        pause = min(pause * 2, max_pause_s)
