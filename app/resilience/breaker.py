"""Circuit breaker: closed -> open after too many failures in a row -> one half-open probe.

Timeouts and other failures are counted separately (a slow dependency trips sooner than a
flaky one). While open, calls are refused without touching the dependency; after the cool-down
exactly one caller gets to probe, and its outcome closes or re-opens the breaker.

`Breaker` is the seam the tools and the model chain use: async, so the state may live
elsewhere. `CircuitBreaker` keeps it in this process (and keeps its sync API for callers that
are only ever local, like MCP connections); `app.resilience.redis_breaker` shares it between
processes through Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from app.settings import ModelSettings, ToolSettings


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerPolicy:
    max_failures: int
    max_timeouts: int
    open_seconds: float

    @classmethod
    def from_settings(cls, settings: ToolSettings | ModelSettings) -> BreakerPolicy:
        """The tools' breaker (HERMES_TOOL_BREAKER_*) or the models' (HERMES_MODEL_BREAKER_*)."""
        return cls(settings.breaker_failures, settings.breaker_timeouts, settings.breaker_open_s)


@dataclass(frozen=True)
class BreakerView:
    """A breaker's health as read at one moment."""

    state: BreakerState
    failures: int = 0
    timeouts: int = 0
    retry_after_s: float = 0.0
    last_error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "state": self.state.value,
            "consecutive_failures": self.failures,
            "consecutive_timeouts": self.timeouts,
            "retry_after_s": round(self.retry_after_s, 3),
            "last_error": self.last_error,
        }


OnChange = Callable[[str, BreakerState], None]


class Breaker(Protocol):
    """One breaker, wherever its state is kept. `admit` is `allow`: in half-open only one
    caller (the probe) is admitted; `failed` answers the state the failure left behind."""

    name: str
    policy: BreakerPolicy
    last_error: str | None

    async def admit(self) -> bool: ...

    async def succeeded(self) -> None: ...

    async def failed(
        self, *, timed_out: bool = False, error: str | None = None
    ) -> BreakerState: ...

    async def release(self) -> None: ...

    async def inspect(self) -> BreakerView: ...


class BreakerFactory(Protocol):
    """Makes the breaker for `key` (unique among all breakers sharing a store), shown as
    `name`; `on_change` hears the transitions this process causes."""

    def __call__(
        self, key: str, name: str, policy: BreakerPolicy, on_change: OnChange | None = None
    ) -> Breaker: ...


def local_breakers(clock: Callable[[], float] = time.monotonic) -> BreakerFactory:
    """Breakers whose state lives in this process."""

    def make(
        key: str, name: str, policy: BreakerPolicy, on_change: OnChange | None = None
    ) -> Breaker:
        return CircuitBreaker(name, policy, clock=clock, on_change=on_change)

    return make


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        policy: BreakerPolicy,
        clock: Callable[[], float] = time.monotonic,
        on_change: OnChange | None = None,
    ) -> None:
        self.name = name
        self.policy = policy
        self._clock = clock
        self._on_change = on_change
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._timeouts = 0
        self._opened_at = 0.0
        self._probing = False
        self.last_error: str | None = None

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self._cooled_down():
            return BreakerState.HALF_OPEN
        return self._state

    def _cooled_down(self) -> bool:
        return self._clock() - self._opened_at >= self.policy.open_seconds

    def retry_after(self) -> float:
        if self._state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self.policy.open_seconds - (self._clock() - self._opened_at))

    def allow(self) -> bool:
        """May a call go through now? In half-open, only the first caller (the probe) may."""
        if self._state is BreakerState.CLOSED:
            return True
        if self._state is BreakerState.OPEN:
            if not self._cooled_down():
                return False
            self._set(BreakerState.HALF_OPEN)
        if self._probing:
            return False
        self._probing = True
        return True

    def record_success(self) -> None:
        self._failures = self._timeouts = 0
        self._probing = False
        self.last_error = None
        if self._state is not BreakerState.CLOSED:
            self._set(BreakerState.CLOSED)

    def record_failure(self, *, timeout: bool = False, error: str | None = None) -> None:
        self.last_error = error or ("timeout" if timeout else "failure")
        if self._state is BreakerState.HALF_OPEN:
            self._probing = False
            self._open()
            return
        if timeout:
            self._timeouts += 1
        else:
            self._failures += 1
        if self._timeouts >= self.policy.max_timeouts or self._failures >= self.policy.max_failures:
            self._open()

    def release_probe(self) -> None:
        """The probe ended without a verdict (e.g. cancelled): let another caller probe."""
        self._probing = False

    def _open(self) -> None:
        self._opened_at = self._clock()
        self._failures = self._timeouts = 0
        self._set(BreakerState.OPEN)

    def _set(self, state: BreakerState) -> None:
        if state is not self._state:
            self._state = state
            if self._on_change is not None:
                self._on_change(self.name, state)

    def view(self) -> BreakerView:
        return BreakerView(
            self.state, self._failures, self._timeouts, self.retry_after(), self.last_error
        )

    def snapshot(self) -> dict[str, object]:
        return self.view().as_dict()

    # -- the `Breaker` seam: the same, async --------------------------------------------------

    async def admit(self) -> bool:
        return self.allow()

    async def succeeded(self) -> None:
        self.record_success()

    async def failed(self, *, timed_out: bool = False, error: str | None = None) -> BreakerState:
        self.record_failure(timeout=timed_out, error=error)
        return self.state

    async def release(self) -> None:
        self.release_probe()

    async def inspect(self) -> BreakerView:
        return self.view()
