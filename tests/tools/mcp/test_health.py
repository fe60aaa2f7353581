"""Reconnect backoff and the latency window."""

from __future__ import annotations

from app.tools.mcp.health import Backoff, Latencies


def test_backoff_grows_is_capped_and_jittered() -> None:
    backoff = Backoff(initial_s=0.5, max_s=30.0, jitter=0.2)
    middle = [backoff.delay(n, rand=lambda: 0.5) for n in range(8)]
    assert middle == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff.delay(0, rand=lambda: 0.0) == 0.4
    assert backoff.delay(0, rand=lambda: 1.0) == 0.6
    assert backoff.delay(10, rand=lambda: 1.0) == 30.0  # jitter never passes the cap
    assert backoff.delay(10_000, rand=lambda: 0.5) == 30.0


def test_latency_median_of_recent_calls() -> None:
    window = Latencies(keep=3)
    assert window.p50_ms() is None
    for seconds in (0.100, 0.001, 0.002, 0.003):
        window.add(seconds)
    assert window.p50_ms() == 2.0  # the oldest (100 ms) has left the window
    assert window.count == 4
