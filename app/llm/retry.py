"""How often and how soon one model is tried again after a failure that another try can fix.

Exponential backoff with a little jitter (so instances that failed together don't retry
together), capped, and never shorter than the provider's `Retry-After` when it sent one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 2  # tries after the first one (HERMES_LLM_RETRIES)
    backoff_s: float = 0.5  # before the first retry, doubling after (HERMES_LLM_RETRY_BACKOFF_S)
    backoff_max_s: float = 8.0  # (HERMES_LLM_RETRY_BACKOFF_MAX_S)
    jitter: float = 0.1  # +- this share of the delay

    @property
    def tries(self) -> int:
        return self.retries + 1

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (1 for the first)."""
        base = min(self.backoff_max_s, self.backoff_s * 2 ** (retry - 1))
        base *= 1 + random.uniform(-self.jitter, self.jitter)
        if retry_after is not None:
            base = max(base, min(retry_after, self.backoff_max_s))
        return max(0.0, base)
