import math
from dataclasses import replace

import pytest

from app.memory.decay import (
    DecayPolicy,
    current_confidence,
    decay_at,
    effective_confidence,
    recallable,
    recency,
)
from app.settings import MemorySettings

T0 = 1_800_000_000.0
HOUR = 3600.0
LAM = 0.02  # DESIGN.md's lambda, HERMES_MEMORY_DECAY_LAMBDA's default
DEFAULT = DecayPolicy.from_settings(MemorySettings())


def test_confidence_decays_exponentially_with_lambda_per_hour():
    assert DEFAULT.lam == LAM
    assert effective_confidence(1.0, 0, LAM) == 1.0
    assert effective_confidence(1.0, 10, LAM) == pytest.approx(math.exp(-0.2))
    assert effective_confidence(0.8, 24, lam=0.05) == pytest.approx(0.8 * math.exp(-1.2))
    # about 35 hours halve it at the default lambda
    assert effective_confidence(1.0, math.log(2) / 0.02, LAM) == pytest.approx(0.5)


def test_negative_elapsed_time_counts_as_none():
    assert effective_confidence(0.9, -5, LAM) == 0.9


def test_decay_point_is_where_the_threshold_is_crossed():
    policy = DecayPolicy(lam=0.02, archive_below=0.3)
    when = decay_at(0.9, T0, policy)
    assert when is not None
    hours = (when - T0) / HOUR
    assert hours == pytest.approx(math.log(3) / 0.02)
    assert current_confidence(0.9, T0, when - 1, policy) > 0.3
    assert current_confidence(0.9, T0, when + 1, policy) < 0.3


def test_no_decay_point_without_decay_and_immediate_below_threshold():
    assert decay_at(0.9, T0, replace(DEFAULT, lam=0.0)) is None
    assert decay_at(0.2, T0, DEFAULT) == T0


def test_recallable_needs_fresh_confidence_and_an_unexpired_validity():
    policy = DEFAULT
    assert recallable(0.9, T0, None, T0 + 10 * HOUR, policy)
    assert not recallable(0.9, T0, None, T0 + 60 * HOUR, policy)  # 0.9 e^-1.2 = 0.27
    assert not recallable(1.0, T0, T0 + HOUR, T0 + 2 * HOUR, policy)  # expired
    assert not recallable(1.0, T0, T0 + HOUR, T0 + HOUR, policy)  # expires at that instant
    assert recallable(1.0, T0, T0 + 3 * HOUR, T0 + 2 * HOUR, policy)


def test_recency_halves_every_half_life():
    policy = replace(DEFAULT, recency_half_life_h=10)
    assert recency(T0, T0, policy) == 1.0
    assert recency(T0, T0 + 10 * HOUR, policy) == pytest.approx(0.5)
    assert recency(T0, T0 + 20 * HOUR, policy) == pytest.approx(0.25)
