"""Soak: the articles' load profile at a steady number of customers for a long time, watching
what grows.

Starts, each in its own process: the fake model (`RuleModel`, every answer after `--model-delay`
seconds, 300 ms), `hermes serve` with SQLite and fresh demo data in a temp dir, and locust on
locustfile.py (the 60/20/15/5 task mix, think time normal(3 s, 1 s)) with `--users` customers
for `--minutes`. With `--call-turns N` each customer's call ends after N turns and the next one
starts in a new session (0: one session per customer for the whole run, as the issue measured).

Every `--interval` seconds it prints the Hermes process's RSS and open file descriptors, the
database and WAL sizes, the turns and failures of the interval and their p50/p95. At the end:
the RSS slope after the first `--warm-minutes` (MiB per minute, least squares), the largest WAL,
database bytes per turn, the p95 of the first and the last `--warm-minutes` of turns, and
PASS/FAIL against issue 16's targets (RSS slope <= 0.2 MiB/min, WAL <= 64 MiB, last p95 within
10 % of the first, no failures; bytes per turn <= 6 KB, the target of a turn with a tool call,
which most of the mix are).

`--tracemalloc` runs Hermes under bench/_traced_hermes.py: allocation snapshots after the warm
minutes and at the end, and the sites that grew most between them. Tracing slows the process
(its latencies are then not the service's), and each snapshot takes memory of its own: read
the RSS slope from a run without it.

    python bench/soak.py --minutes 30                  # the issue's soak
    python bench/soak.py --minutes 12 --tracemalloc    # what grows, and where
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._hermes import add_env_option, parse_env, start_on_rule_model
from bench._procs import memory_mb, pct, spawn, stop
from bench.load import warm_up
from bench.load_ci import locust_binary

MIB = 1024 * 1024
RSS_SLOPE_MAX = 0.2  # MiB per minute
WAL_MAX = 64 * MIB
P95_DRIFT_MAX = 0.10
BYTES_PER_TURN_MAX = 6 * 1024


@dataclass(frozen=True)
class Turn:
    at: float  # unix time it ended
    ms: float
    ok: bool


@dataclass(frozen=True)
class Sample:
    minute: float
    rss_mib: float
    fds: int
    db: int
    wal: int
    turns: int
    failures: int
    p50: float
    p95: float


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


class TurnLog:
    """The locustfile's `--turn-log`, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.turns: list[Turn] = []

    def read(self) -> list[Turn]:
        if not self.path.exists():
            return []
        with self.path.open() as f:
            f.seek(self._offset)
            text = f.read()
        complete = text[: text.rfind("\n") + 1]
        self._offset += len(complete.encode())
        new = []
        for line in complete.splitlines():
            at, ms, ok, _name = line.split(" ", 3)
            new.append(Turn(float(at), float(ms), ok == "1"))
        self.turns += new
        return new


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x (0 for fewer than two points)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return 0.0 if var == 0 else sum((x - mx) * (y - my) for x, y in points) / var


def verdict(
    samples: list[Sample], turns: list[Turn], began: float, warm_s: float, bytes_per_turn: float
) -> list[tuple[bool, str]]:
    """(passed, line) for each of the issue's targets."""
    after_warm = [(s.minute, s.rss_mib) for s in samples if s.minute * 60 >= warm_s]
    rss = slope(after_warm)
    wal = max((s.wal for s in samples), default=0)
    end = max((t.at for t in turns), default=began)
    first = [t.ms for t in turns if t.ok and t.at < began + warm_s]
    last = [t.ms for t in turns if t.ok and t.at >= end - warm_s]
    p95_first, p95_last = pct(first, 95), pct(last, 95)
    drift = (p95_last - p95_first) / p95_first if p95_first else 0.0
    failures = sum(not t.ok for t in turns)
    warm_min = warm_s / 60
    return [
        (
            rss <= RSS_SLOPE_MAX,
            f"RSS slope after minute {warm_min:g}: {rss:+.2f} MiB/min"
            f" ({len(after_warm)} samples; target <= {RSS_SLOPE_MAX})",
        ),
        (wal <= WAL_MAX, f"largest WAL {wal / MIB:.1f} MiB (target <= {WAL_MAX / MIB:.0f})"),
        (
            drift <= P95_DRIFT_MAX,
            f"p95 first {warm_min:g} min {p95_first:.0f} ms, last {warm_min:g} min"
            f" {p95_last:.0f} ms ({drift:+.0%}; target <= +{P95_DRIFT_MAX:.0%})",
        ),
        (failures == 0, f"{failures} failed turns of {len(turns)}"),
        (
            bytes_per_turn <= BYTES_PER_TURN_MAX,
            f"database + WAL {bytes_per_turn:.0f} bytes per turn"
            f" (target <= {BYTES_PER_TURN_MAX}: a turn with a tool call)",
        ),
    ]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=60)
    parser.add_argument("--minutes", type=float, default=30.0, help="minutes of load")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between rows")
    parser.add_argument("--warm-minutes", type=float, default=5.0, help="left out of the slope")
    parser.add_argument("--spawn-s", type=float, default=10.0, help="seconds to start all users")
    parser.add_argument("--call-turns", type=int, default=0, help="turns per session (0: all)")
    parser.add_argument("--model-delay", type=float, default=0.3, help="seconds per model call")
    parser.add_argument("--turn-timeout", type=float, default=30.0)
    parser.add_argument("--tracemalloc", action="store_true", help="where the growth is")
    parser.add_argument("--top", type=int, default=25, help="allocation sites to print")
    add_env_option(parser)
    return parser.parse_args()


def snapshot(pid: int, folder: Path, number: int, timeout_s: float = 120) -> Path:
    """Ask the traced Hermes for snapshot `number` and wait for its file."""
    path = folder / f"{number}.snap"
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no allocation snapshot {path} within {timeout_s:g}s")
        time.sleep(0.2)
    return path


def print_growth(old: Path, new: Path, top: int) -> None:
    import tracemalloc

    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
        tracemalloc.Filter(False, "<unknown>"),
    ]
    before = tracemalloc.Snapshot.load(str(old)).filter_traces(ignore)
    after = tracemalloc.Snapshot.load(str(new)).filter_traces(ignore)
    diff = after.compare_to(before, "lineno")
    total = sum(d.size_diff for d in diff)
    grew = sorted((d for d in diff if d.size_diff > 0), key=lambda d: -d.size_diff)
    print(f"allocation sites that grew most between the snapshots (all: {total / MIB:+.1f} MiB):")
    for d in grew[:top]:
        frame = d.traceback[0]
        print(
            f"  {d.size_diff / 1024:+9.0f} KiB {d.count_diff:+8d} blocks"
            f"  {_short(frame.filename)}:{frame.lineno}"
        )


def _short(filename: str) -> str:
    found = re.search(r"/site-packages/|/lib/python3\.\d+/", filename)
    if found:
        return filename[found.end() :]
    return os.path.relpath(filename, Path(__file__).resolve().parents[1])


async def main() -> int:
    args = parse_args()
    from app.demo.generator import regenerate
    from bench._load_users import customers

    tmp = Path(tempfile.mkdtemp(prefix="hermes-soak-"))
    demo, db = tmp / "demo.db", tmp / "hermes.db"
    wal = db.with_name(db.name + "-wal")
    regenerate(demo)
    snaps = tmp / "snapshots"
    program = ("bench/_traced_hermes.py", str(snaps)) if args.tracemalloc else ("-m", "app.cli")
    procs: list[subprocess.Popen[bytes]] = []
    log = TurnLog(tmp / "turns.log")
    samples: list[Sample] = []
    warm_s = args.warm_minutes * 60
    taken: list[Path] = []
    try:
        _fake, hermes = await start_on_rule_model(
            tmp, args.model_delay, parse_env(args.env), procs, program,
            HERMES_DEMO_DB_PATH=str(demo),
        )  # fmt: skip
        await warm_up(hermes.url, customers(demo)[0])
        rate = args.users / max(args.spawn_s, 0.1)
        command = [
            locust_binary(), "-f", "locustfile.py", "--headless", "--only-summary",
            "--host", hermes.url, "-u", str(args.users), "-r", f"{rate:g}",
            "-t", f"{args.minutes * 60:g}s", "--stop-timeout", f"{args.turn_timeout + 5:g}",
            "--demo-db", str(demo), "--turn-timeout", f"{args.turn_timeout:g}",
            "--call-turns", str(args.call_turns), "--turn-log", str(log.path),
            "--loglevel", "WARNING",
        ]  # fmt: skip
        start_db = size(db) + size(wal)
        traced = ", tracemalloc on" if args.tracemalloc else ""
        print(
            f"soak: {args.users} users for {args.minutes:g} min, think normal(3, 1) s, model"
            f" {args.model_delay * 1000:.0f} ms per call, SQLite, calls of"
            f" {args.call_turns or 'unlimited'} turns{traced}; logs in {tmp}",
            flush=True,
        )
        print(
            f"{'min':>5}{'RSS MiB':>9}{'fds':>6}{'db MiB':>8}{'WAL MiB':>9}{'turns':>7}"
            f"{'fails':>7}{'p50 ms':>8}{'p95 ms':>8}"
        )
        began = time.time()
        gen = spawn(command, {}, tmp / "locust.log")
        procs.append(gen)
        next_row = began + args.interval
        while True:
            done = gen.poll() is not None
            if not done and time.time() < next_row:
                await asyncio.sleep(0.5)
                continue
            new = log.read()
            ms = [t.ms for t in new if t.ok]
            sample = Sample(
                (time.time() - began) / 60,
                memory_mb(hermes.pid)[0],
                open_fds(hermes.pid),
                size(db),
                size(wal),
                len(new),
                sum(not t.ok for t in new),
                pct(ms, 50),
                pct(ms, 95),
            )
            samples.append(sample)
            print(
                f"{sample.minute:5.1f}{sample.rss_mib:9.1f}{sample.fds:6d}{sample.db / MIB:8.1f}"
                f"{sample.wal / MIB:9.1f}{sample.turns:7d}{sample.failures:7d}"
                f"{sample.p50:8.0f}{sample.p95:8.0f}",
                flush=True,
            )
            if args.tracemalloc and not taken and time.time() - began >= warm_s:
                taken.append(await asyncio.to_thread(snapshot, hermes.pid, snaps, 0))
                # The snapshot itself takes memory: the slope starts after it.
                warm_s = time.time() - began + 1
            if done:
                break
            next_row += args.interval
        if args.tracemalloc:
            number = len(taken)
            taken.append(await asyncio.to_thread(snapshot, hermes.pid, snaps, number))
        grown = size(db) + size(wal) - start_db
    finally:
        stop(procs)
    turns = log.turns
    per_turn = grown / max(1, len(turns))
    print(
        f"{len(turns)} turns; database + WAL grew {grown / MIB:.1f} MiB;"
        f" RSS {samples[0].rss_mib:.0f} -> {samples[-1].rss_mib:.0f} MiB"
        f" (first row -> last); fds {samples[0].fds} -> {samples[-1].fds}"
    )
    if len(taken) == 2:
        print_growth(taken[0], taken[1], args.top)
    elif args.tracemalloc:
        print("one allocation snapshot only: the run was shorter than --warm-minutes")
    results = verdict(samples, turns, began, warm_s, per_turn)
    for passed, line in results:
        print(f"{'PASS' if passed else 'FAIL'}  {line}")
    if all(passed for passed, _ in results):
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
