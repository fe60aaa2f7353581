"""CI's load stage: locustfile.py headless against one Hermes process, bounded, with a gate.

Starts, each in its own process: the fake OpenAI-compatible model (`RuleModel`, every answer
after `--model-delay` seconds, 300 ms), `hermes serve` on 127.0.0.1 with SQLite and fresh demo
data in a temp dir, and `locust` headless (`--users` customers spawned over `--spawn-s` seconds,
for `--duration` seconds; users finish the turn they are in). Then prints one line per locust
entry (turns per task, time to first delta per task) and fails (exit 1) on any failed request
or when a turn entry's p95 is above `--max-p95-ms` (the Makefile keeps the threshold).

    python bench/load_ci.py --users 50 --duration 60 --max-p95-ms 2500
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._hermes import add_env_option, parse_env, start_on_rule_model
from bench._procs import CpuMeter, memory_mb, spawn, stop
from bench.load import warm_up

TURN = "turn "  # the locustfile's turn entries; `ttfd ` ones are reported, not gated


@dataclass(frozen=True)
class Entry:
    name: str
    requests: int
    failures: int
    p50: float
    p95: float
    p99: float
    rps: float


def read_stats(path: Path) -> list[Entry]:
    """locust's `<prefix>_stats.csv`, without its Aggregated row."""
    with path.open(newline="") as f:
        return [
            Entry(
                row["Name"],
                int(row["Request Count"]),
                int(row["Failure Count"]),
                float(row["50%"] or 0),
                float(row["95%"] or 0),
                float(row["99%"] or 0),
                float(row["Requests/s"] or 0),
            )
            for row in csv.DictReader(f)
            if row["Name"] != "Aggregated"
        ]


def verdict(entries: list[Entry], max_p95_ms: float) -> list[str]:
    """Why the run fails (nothing: it passes)."""
    why = [f"{e.name}: {e.failures} of {e.requests} failed" for e in entries if e.failures]
    turns = [e for e in entries if e.name.startswith(TURN)]
    if not turns or not sum(e.requests for e in turns):
        why.append("no turn ran")
    why += [
        f"{e.name}: p95 {e.p95:.0f} ms > {max_p95_ms:.0f} ms" for e in turns if e.p95 > max_p95_ms
    ]
    return why


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--spawn-s", type=float, default=5.0, help="seconds to start all users")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--model-delay", type=float, default=0.3, help="seconds per model call")
    parser.add_argument("--turn-timeout", type=float, default=30.0)
    parser.add_argument("--max-p95-ms", type=float, required=True)
    add_env_option(parser)
    return parser.parse_args()


def locust_binary() -> str:
    found = Path(sys.executable).with_name("locust")
    return str(found) if found.exists() else (shutil.which("locust") or "locust")


async def main() -> int:
    args = parse_args()
    from app.demo.generator import regenerate
    from bench._load_users import customers

    tmp = Path(tempfile.mkdtemp(prefix="hermes-load-ci-"))
    demo = tmp / "demo.db"
    regenerate(demo)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        _fake, hermes = await start_on_rule_model(
            tmp, args.model_delay, parse_env(args.env), procs, HERMES_DEMO_DB_PATH=str(demo)
        )
        await warm_up(hermes.url, customers(demo)[0])
        rate = args.users / max(args.spawn_s, 0.1)
        command = [
            locust_binary(), "-f", "locustfile.py", "--headless", "--only-summary",
            "--host", hermes.url, "-u", str(args.users), "-r", f"{rate:g}",
            "-t", f"{args.duration:g}s", "--stop-timeout", f"{args.turn_timeout + 5:g}",
            "--csv", str(tmp / "load"), "--demo-db", str(demo),
            "--turn-timeout", f"{args.turn_timeout:g}", "--loglevel", "WARNING",
        ]  # fmt: skip
        meter = CpuMeter(hermes.pid)
        meter.start()
        began = time.monotonic()
        gen = spawn(command, {}, tmp / "locust.log")
        procs.append(gen)
        while gen.poll() is None:  # noqa: ASYNC110  # a subprocess, not an asyncio one
            await asyncio.sleep(0.2)
        meter.stop()
        rss_now, rss_peak = memory_mb(hermes.pid)
        stats = tmp / "load_stats.csv"
        if not stats.exists():
            log = (tmp / "locust.log").read_text()[-3000:]
            print(f"locust wrote no stats (exit {gen.returncode}):\n{log}", file=sys.stderr)
            return 1
        entries = read_stats(stats)
    finally:
        stop(procs)
    print(
        f"load-ci: {args.users} users for {args.duration:g} s (locust ran"
        f" {time.monotonic() - began:.0f} s), think normal(3, 1) s, model"
        f" {args.model_delay * 1000:.0f} ms per call, SQLite, loopback"
    )
    print(
        f"{'entry':<24}{'requests':>9}{'fails':>7}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'/s':>7}"
    )
    for e in sorted(entries, key=lambda e: (not e.name.startswith(TURN), e.name)):
        print(
            f"{e.name:<24}{e.requests:>9}{e.failures:>7}{e.p50:>8.0f}{e.p95:>8.0f}"
            f"{e.p99:>8.0f}{e.rps:>7.1f}"
        )
    print(
        f"hermes process: CPU {meter.cores:.2f} cores (event loop {meter.main_thread_cores:.2f}),"
        f" RSS {rss_now:.0f} MB (peak {rss_peak:.0f} MB)"
    )
    failed = verdict(entries, args.max_p95_ms)
    for why in failed:
        print(f"FAIL  {why}")
    if not failed:
        print(f"PASS  no failures; every turn entry's p95 <= {args.max_p95_ms:.0f} ms")
    if failed:
        print(f"logs and locust's CSV files: {tmp}")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
