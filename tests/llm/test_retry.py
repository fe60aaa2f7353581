"""Tries of one model: which failures are tried again, and how long the backoff between tries
is (read from the retry log lines, which state each wait)."""

from __future__ import annotations

import logging
import re

import pytest

from app.llm.failures import ModelFailure
from app.llm.retry import RetryPolicy


class Flaky:
    """Fails with the given failures in order, then answers."""

    def __init__(self, *failures: ModelFailure) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "answer"


def unavailable() -> ModelFailure:
    return ModelFailure("llm_unavailable", "openai/m", status=500)


async def run(policy: RetryPolicy, flaky: Flaky) -> str:
    return await policy.caller()(policy.backoff, flaky)


def waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    found = [re.search(r"trying again in ([\d.]+) s", r.getMessage()) for r in caplog.records]
    return [float(m[1]) for m in found if m]


async def test_backoff_doubles_up_to_the_cap(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    policy = RetryPolicy(retries=4, backoff_s=0.01, backoff_max_s=0.03, jitter=0.0)
    flaky = Flaky(*[unavailable() for _ in range(4)])
    assert await run(policy, flaky) == "answer"
    assert flaky.calls == 5 == policy.tries
    assert waits(caplog) == [0.01, 0.02, 0.03, 0.03]


async def test_tries_run_out_and_the_last_failure_is_raised() -> None:
    policy = RetryPolicy(retries=2, backoff_s=0.001, backoff_max_s=1.0)
    flaky = Flaky(*[unavailable() for _ in range(5)])
    with pytest.raises(ModelFailure):
        await run(policy, flaky)
    assert flaky.calls == 3


async def test_jitter_adds_at_most_its_share(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    policy = RetryPolicy(retries=3, backoff_s=0.02, backoff_max_s=1.0, jitter=0.5)
    await run(policy, Flaky(*[unavailable() for _ in range(3)]))
    found = waits(caplog)
    bases = [0.02, 0.04, 0.08]
    assert all(base <= wait <= base + 0.0101 for base, wait in zip(bases, found, strict=True))
    assert found != bases  # some jitter was added


async def test_a_retry_after_replaces_the_backoff_but_is_capped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    policy = RetryPolicy(retries=2, backoff_s=0.001, backoff_max_s=0.05, jitter=0.0)
    limited = [
        ModelFailure("llm_rate_limited", "openai/m", status=429, retry_after=seconds)
        for seconds in (0.03, 60)
    ]
    assert await run(policy, Flaky(*limited)) == "answer"
    assert waits(caplog) == [0.03, 0.05]


@pytest.mark.parametrize(
    "failure",
    [
        ModelFailure("llm_auth_failed", "openai/m", status=401),
        ModelFailure("llm_no_api_key", "openai/m"),
        ModelFailure("llm_bad_request", "openai/m", status=400),
        ModelFailure("llm_model_not_found", "openai/m", status=404),
        ModelFailure("llm_context_too_long", "openai/m", status=400),
    ],
)
async def test_failures_another_try_cannot_fix_are_not_retried(failure: ModelFailure) -> None:
    flaky = Flaky(failure)
    with pytest.raises(ModelFailure):
        await run(RetryPolicy(retries=3, backoff_s=0.001, backoff_max_s=1.0), flaky)
    assert flaky.calls == 1


async def test_other_exceptions_are_not_retried() -> None:
    calls = 0

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise KeyError("a bug, not a model failure")

    policy = RetryPolicy(retries=3, backoff_s=0.001, backoff_max_s=1.0)
    with pytest.raises(KeyError):
        await policy.caller()(policy.backoff, broken)
    assert calls == 1
