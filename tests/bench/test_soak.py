"""bench/soak.py's arithmetic: the turn log read as it grows, the RSS slope and the verdict."""

from __future__ import annotations

from pathlib import Path

from bench.soak import Sample, Turn, TurnLog, slope, verdict


def test_the_turn_log_is_read_line_by_line_as_it_grows(tmp_path: Path) -> None:
    log = TurnLog(tmp_path / "turns.log")
    assert log.read() == []
    with log.path.open("a") as f:
        f.write("100.5 812.0 1 order_status\n200.0 90.5 0 compl")  # the last line half-written
    assert log.read() == [Turn(100.5, 812.0, True)]
    with log.path.open("a") as f:
        f.write("aint\n")
    assert log.read() == [Turn(200.0, 90.5, False)]
    assert len(log.turns) == 2


def test_slope_is_least_squares_per_minute() -> None:
    assert slope([(5, 100.0), (6, 100.5), (7, 101.0), (8, 101.5)]) == 0.5
    assert slope([(5, 100.0)]) == 0.0


def sample(minute: float, rss: float, wal: int = 1 << 20) -> Sample:
    return Sample(minute, rss, 40, 1 << 20, wal, 100, 0, 600.0, 700.0)


def test_the_verdict_holds_each_target() -> None:
    began = 1000.0
    steady = [sample(m, 300.0 + (20 if m < 5 else 0.1 * m)) for m in range(1, 31)]
    turns = [Turn(began + s, 700.0, True) for s in range(0, 1800, 10)]
    assert all(ok for ok, _ in verdict(steady, turns, began, 300, 5000))

    big_wal = 70 << 20
    growing = [sample(m, 300.0 + 0.5 * m, wal=big_wal if m == 20 else 1 << 20) for m in range(31)]
    slower = [Turn(t.at, 900.0 if t.at > began + 1500 else 700.0, t.ok) for t in turns]
    failed = [*slower, Turn(began + 1799, 100.0, False)]
    why = [line for ok, line in verdict(growing, failed, began, 300, 7000) if not ok]
    assert [line.split(" ")[0] for line in why] == ["RSS", "largest", "p95", "1", "database"]
