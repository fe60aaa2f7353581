"""Backoff between tries of one model."""

from __future__ import annotations

from app.llm.retry import RetryPolicy


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(retries=5, backoff_s=0.5, backoff_max_s=3.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.tries == 6


def test_jitter_stays_within_its_share() -> None:
    policy = RetryPolicy(backoff_s=1.0, jitter=0.1)
    delays = {policy.delay(1) for _ in range(50)}
    assert all(0.9 <= d <= 1.1 for d in delays) and len(delays) > 1


def test_a_retry_after_is_waited_for_but_capped() -> None:
    policy = RetryPolicy(backoff_s=0.1, backoff_max_s=2.0, jitter=0.0)
    assert policy.delay(1, retry_after=1.5) == 1.5
    assert policy.delay(1, retry_after=60) == 2.0
    assert policy.delay(1, retry_after=0) == 0.1
