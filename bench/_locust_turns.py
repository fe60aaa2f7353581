"""How the locustfile reads one streamed turn: from its POST to the terminal frame.

Kept apart from locustfile.py because importing locust patches the standard library for gevent;
this module imports nothing of locust, so tests read real streams with it in a plain process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class TurnReading:
    failure: str | None  # None: the turn ended with `turn.completed`
    seconds: float  # from the POST to the terminal frame (or to giving up)
    first_delta_s: float | None  # from the POST to the first `message.delta` frame


def read_turn(
    lines: Iterable[str],
    start: float,
    timeout_s: float,
    clock: Callable[[], float] = time.perf_counter,
) -> TurnReading:
    """Read SSE lines to the turn's end. `turn.failed`, a stream that ends without a terminal
    frame, and one still open after `timeout_s` (keep-alive comments go on arriving while a
    turn hangs) are failures."""
    event = ""
    first: float | None = None
    for line in lines:
        now = clock() - start
        if now > timeout_s:
            return TurnReading(f"no terminal frame within {timeout_s:g}s", now, first)
        if line.startswith("event:"):
            event = line[6:].strip()
            if event == "message.delta" and first is None:
                first = now
            elif event == "turn.completed":
                return TurnReading(None, now, first)
        elif line.startswith("data:") and event == "turn.failed":
            code = json.loads(line[5:]).get("code", "?")
            return TurnReading(f"turn.failed: {code}", now, first)
    return TurnReading("no terminal frame", clock() - start, first)
