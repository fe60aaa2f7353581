"""Confidence decay: c(t) = c0 * exp(-lambda * hours since last confirmed). Pure functions.

A memory below the archive threshold is archived (kept for listing, never recalled); one whose
`valid_until` has passed is never recalled either. The time at which a memory will cross the
threshold is computed when it is written, so the sweeper finds decayed rows through an index
instead of evaluating the formula over every row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.settings import MemorySettings

HOUR = 3600.0


@dataclass(frozen=True)
class DecayPolicy:
    lam: float  # per hour
    archive_below: float
    # Recency in scoring halves every `recency_half_life_h` hours since the last update (not a
    # setting).
    recency_half_life_h: float = 24.0 * 14

    @classmethod
    def from_settings(cls, settings: MemorySettings) -> DecayPolicy:
        return cls(settings.decay_lambda, settings.archive_below)


def effective_confidence(c0: float, hours: float, lam: float) -> float:
    """Confidence after `hours` without confirmation (negative hours count as none)."""
    return c0 * math.exp(-lam * max(0.0, hours))


def hours_between(earlier: float, later: float) -> float:
    return max(0.0, (later - earlier) / HOUR)


def decay_at(c0: float, confirmed_at: float, policy: DecayPolicy) -> float | None:
    """When `c0` confirmed at `confirmed_at` decays below the threshold; None if never."""
    if c0 < policy.archive_below:
        return confirmed_at
    if policy.lam <= 0 or policy.archive_below <= 0:
        return None
    return confirmed_at + HOUR * math.log(c0 / policy.archive_below) / policy.lam


def current_confidence(
    c0: float, last_confirmed_at: float, now: float, policy: DecayPolicy
) -> float:
    return effective_confidence(c0, hours_between(last_confirmed_at, now), policy.lam)


def recallable(
    c0: float,
    last_confirmed_at: float,
    valid_until: float | None,
    now: float,
    policy: DecayPolicy,
) -> bool:
    """Fresh enough and not expired: the two conditions that gate every recall."""
    if valid_until is not None and valid_until <= now:
        return False
    return current_confidence(c0, last_confirmed_at, now, policy) >= policy.archive_below


def recency(updated_at: float, now: float, policy: DecayPolicy) -> float:
    """1.0 for just now, 0.5 after one half-life, towards 0 for old memories."""
    hours = hours_between(updated_at, now)
    return math.pow(0.5, hours / policy.recency_half_life_h)
