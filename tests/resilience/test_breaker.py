"""The breaker's states with a fixed clock."""

from __future__ import annotations

from app.resilience.breaker import BreakerPolicy, BreakerState, CircuitBreaker


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_three_timeouts_or_five_failures() -> None:
    clock = Clock()
    timeouts = CircuitBreaker("t", BreakerPolicy(5, 3, 600), clock)
    for _ in range(3):
        assert timeouts.allow()
        timeouts.record_failure(timeout=True)
    assert timeouts.state is BreakerState.OPEN and not timeouts.allow()
    failures = CircuitBreaker("f", BreakerPolicy(5, 3, 600), clock)
    for _ in range(4):
        failures.record_failure()
    assert failures.state is BreakerState.CLOSED
    failures.record_failure()
    assert failures.state is BreakerState.OPEN


def test_a_success_resets_the_count() -> None:
    breaker = CircuitBreaker("s", BreakerPolicy(5, 3, 600), Clock())
    for _ in range(4):
        breaker.record_failure()
    breaker.record_success()
    for _ in range(4):
        breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED


def test_one_half_open_probe_then_close_or_reopen() -> None:
    clock = Clock()
    changes: list[str] = []
    breaker = CircuitBreaker(
        "p", BreakerPolicy(1, 1, 600), clock, on_change=lambda _n, s: changes.append(s.value)
    )
    breaker.record_failure()
    assert breaker.retry_after() == 600
    clock.now = 599
    assert not breaker.allow()
    clock.now = 600
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # only one at a time
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    clock.now = 1200
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED
    assert changes == ["open", "half_open", "open", "half_open", "closed"]


def test_a_released_probe_lets_another_caller_probe() -> None:
    clock = Clock()
    breaker = CircuitBreaker("r", BreakerPolicy(1, 1, 10), clock)
    breaker.record_failure()
    clock.now = 10
    assert breaker.allow()
    breaker.release_probe()
    assert breaker.allow()
