"""How often and how soon one model is tried again after a failure that another try can fix.

The tries are stamina's: exponential backoff from `backoff_s`, doubling, capped at
`backoff_max_s`, plus up to `jitter` of `backoff_s` at random (so instances that failed
together don't retry together). A provider's `Retry-After` replaces the backoff, capped the same
way. Whether another try can help at all is the failure's own judgement
(`ModelFailure.retryable`: never auth or the request's own faults).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import stamina
from stamina.instrumentation import RetryDetails, set_on_retry_hooks

from app.llm.failures import ModelFailure
from app.settings import ModelSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    retries: int  # tries after the first one
    backoff_s: float  # before the first retry, doubling after
    backoff_max_s: float
    jitter: float = 0.1  # up to this share of backoff_s is added at random (not a setting)

    @classmethod
    def from_settings(cls, settings: ModelSettings) -> RetryPolicy:
        return cls(settings.retries, settings.retry_backoff_s, settings.retry_backoff_max_s)

    @property
    def tries(self) -> int:
        return self.retries + 1

    def caller(self) -> stamina.AsyncRetryingCaller:
        """Runs a try until it succeeds, `tries` run out, or `backoff` says stop."""
        _own_stamina_hooks()
        return stamina.AsyncRetryingCaller(
            attempts=self.tries,
            timeout=None,  # every wait has its own timeout (the chain's); tries are counted
            wait_initial=self.backoff_s,
            wait_max=self.backoff_max_s,
            wait_jitter=self.backoff_s * self.jitter,
        )

    def backoff(self, exc: BaseException) -> bool | float:
        """stamina's backoff hook: False when another try can't help, the provider's
        `Retry-After` (capped) when it sent one, True for the exponential backoff."""
        if not isinstance(exc, ModelFailure) or not exc.retryable:
            return False
        if exc.retry_after is not None:
            return min(exc.retry_after, self.backoff_max_s)
        return True


def _log_retry(details: RetryDetails) -> None:
    cause = details.caused_by
    if isinstance(cause, ModelFailure):
        log.info(
            "model %s: try %d failed (%s), trying again in %.3f s",
            cause.model,
            details.retry_num,
            cause.code,
            details.wait_for,
        )


def _own_stamina_hooks() -> None:
    """stamina's default hooks log every retry at WARNING with the exception's repr and count
    it in prometheus' default registry; Hermes logs model retries itself, by code only (the
    chain logs the masked failure once a model is given up)."""
    set_on_retry_hooks([_log_retry])
