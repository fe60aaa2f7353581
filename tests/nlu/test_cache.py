"""The parse cache returns what the parser said, per text and per day, within its size."""

from __future__ import annotations

from datetime import date

from app.nlu.cache import CachingParser
from app.nlu.testing import ScriptedParser


def test_hits_misses_days_and_eviction() -> None:
    inner = ScriptedParser().on("明天送到吗", "track_shipment", 0.9)
    day = [date(2024, 5, 22)]
    cached = CachingParser(inner, maxsize=2, today=lambda: day[0])
    first = cached.parse("明天送到吗")
    assert cached.parse("明天送到吗") is first
    assert (cached.hits, cached.misses) == (1, 1)
    day[0] = date(2024, 5, 23)  # "明天" means another day now
    cached.parse("明天送到吗")
    assert cached.misses == 2 and len(inner.calls) == 2
    cached.parse("a")
    cached.parse("b")  # evicts the oldest entry
    cached.parse("明天送到吗")
    assert cached.misses == 5 and inner.calls[-1] == "明天送到吗"
