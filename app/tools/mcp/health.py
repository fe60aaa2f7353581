"""How an MCP connection is doing: reconnect backoff, recent call latency, connection state."""

from __future__ import annotations

import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class ConnectionState(StrEnum):
    DISABLED = "disabled"  # `enabled: false` in the configuration
    CONNECTING = "connecting"
    CONNECTED = "connected"
    BACKOFF = "backoff"  # lost or never reached; the next attempt is scheduled
    CLOSED = "closed"  # Hermes is shutting down


@dataclass(frozen=True)
class Backoff:
    """Exponential reconnect delay with jitter, capped: a dead server is retried forever, but
    never more often than every `max_s` seconds once it has failed a few times, and many
    Hermes instances do not knock on a restarted server in lockstep."""

    initial_s: float = 0.5
    max_s: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2  # +/- this fraction of the delay

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        base = min(self.max_s, self.initial_s * self.factor ** min(attempt, 32))
        spread = base * self.jitter * (2 * rand() - 1)
        return max(0.0, min(self.max_s, base + spread))


class Latencies:
    """Durations of the most recent calls (seconds)."""

    def __init__(self, keep: int = 200) -> None:
        self._recent: deque[float] = deque(maxlen=keep)
        self.count = 0

    def add(self, seconds: float) -> None:
        self._recent.append(seconds)
        self.count += 1

    def p50_ms(self) -> float | None:
        if not self._recent:
            return None
        return round(statistics.median(self._recent) * 1000, 3)
