"""Scale-out: the same load against 1 process on SQLite, 1 on PostgreSQL, and N workers on
PostgreSQL + Redis.

Each case starts `hermes serve` fresh (its own SQLite file, or its own PostgreSQL database and
Redis key prefix, dropped afterwards), against one fake model (`--model-delay`, rules as in
bench/load.py) and the same users, think time and mix as bench/load.py, with the tools' rate
limits raised so the runtime is what is measured. The think time is shorter than the
articles' (default 1 s) so one process is saturated: the question is what a second process adds.

Honest note: this machine has 2 cores, and the load generator and the fake model run on them
too. "2 workers" therefore measures the overhead of PostgreSQL + Redis and the gain of a second
core, not a cluster.

    python bench/scale.py [--users 300] [--duration 30] [--workers 2]
    python bench/scale.py --users 40 --duration 8 --ramp 2 --think-mean 1      # smoke

Targets (issue 12): N workers >= 1.6x one SQLite process; PostgreSQL single >= 0.8x SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._hermes import start_hermes
from bench._pg import create_database, drop_database
from bench._procs import (
    CpuMeter,
    GroupCpuMeter,
    machine_busy_seconds,
    pct,
    pids_named,
    python,
    spawn,
    stop,
    wait_port_file,
)
from bench.load import customers, make_plan, tools_file, warm_up

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds per case")
    parser.add_argument("--ramp", type=float, default=8.0)
    parser.add_argument("--model-delay", type=float, default=0.3)
    parser.add_argument("--think-mean", type=float, default=1.0)
    parser.add_argument("--think-sd", type=float, default=0.3)
    parser.add_argument("--turn-timeout", type=float, default=30.0)
    parser.add_argument("--procs", type=int, default=1, help="load generator processes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--cases", default="sqlite,postgres,workers", help="which of sqlite,postgres,workers"
    )
    return parser.parse_args()


@dataclass
class Result:
    name: str
    turns_per_s: float
    p50_ms: float
    p95_ms: float
    failures: int
    hermes_cores: float
    database_cores: float  # the PostgreSQL server (0 on SQLite: it is inside Hermes)
    redis_cores: float
    driver_cores: float  # the load generator and the fake model
    machine_cores: float  # everything this machine ran, this bench or not
    writer_busy: float | None  # share of the window the database writers were running batches

    @property
    def cpu_ms_per_turn(self) -> float:
        """Machine CPU per finished turn: what a turn costs everything that serves it."""
        return self.machine_cores / self.turns_per_s * 1000 if self.turns_per_s else 0.0


async def writer_busy_s(url: str) -> float:
    """Seconds the writer connections spent running batches, per connection."""
    async with httpx.AsyncClient(timeout=10) as client:
        text = (await client.get(f"{url}/metrics")).text
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("hermes_db_writer_busy_seconds_total", "hermes_db_writer_connections"):
            found[name] = float(value)
    return found.get("hermes_db_writer_busy_seconds_total", 0.0) / max(
        1.0, found.get("hermes_db_writer_connections", 1.0)
    )


def drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=500):
            client.delete(key)
    finally:
        client.close()


async def run_case(
    name: str,
    args: argparse.Namespace,
    api_base: str,
    fake_pid: int,
    demo: Path,
    tmp: Path,
    settings: dict[str, str],
    serve_args: tuple[str, ...] = (),
) -> Result:
    case_dir = tmp / name
    case_dir.mkdir()
    people = customers(demo)
    hermes = await start_hermes(
        case_dir,
        api_base,
        {},
        serve_args,
        HERMES_DEMO_DB_PATH=str(demo),
        HERMES_TOOLS_FILE=str(tools_file(case_dir, True)),
        HERMES_LOCAL_FALLBACK="false",
        **settings,
    )
    procs = [hermes.proc]
    try:
        await warm_up(hermes.url, people[0])
        start_at = time.time() + 2.0
        window_start, window_end = start_at + args.ramp, start_at + args.ramp + args.duration
        gens, results = [], []
        for n in range(args.procs):
            plan = case_dir / f"plan{n}.json"
            plan.write_text(json.dumps(make_plan(args, hermes.url, people, start_at, n)))
            results.append(case_dir / f"result{n}.json")
            gen = spawn(python("bench/_load_users.py", str(plan), str(results[n])), {})
            gens.append(gen)
        procs.extend(gens)
        meter = CpuMeter(hermes.pid, children=True)
        database = GroupCpuMeter(lambda: pids_named("postgres"))
        redis = GroupCpuMeter(lambda: pids_named("redis-server"))
        driver = GroupCpuMeter(lambda: [fake_pid, *(g.pid for g in gens)])
        await asyncio.sleep(max(0.0, window_start - time.time()))
        for m in (meter, database, redis, driver):
            m.start()
        busy, wall = machine_busy_seconds(), time.monotonic()
        writer_before = await writer_busy_s(hermes.url)
        await asyncio.sleep(max(0.0, window_end - time.time()))
        window = time.monotonic() - wall
        machine = (machine_busy_seconds() - busy) / window
        writer_after = await writer_busy_s(hermes.url)
        for m in (meter, database, redis, driver):
            m.stop()
        deadline = time.monotonic() + args.turn_timeout + 30
        for gen in gens:
            while gen.poll() is None and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        turns = [t for path in results for t in json.loads(path.read_text())["turns"]]
    finally:
        stop(procs)
    started = [t for t in turns if window_start <= t[1] < window_end and t[3] is None]
    finished = [t for t in turns if window_start <= t[1] + t[2] < window_end and t[3] is None]
    ms = [t[2] * 1000 for t in started]
    return Result(
        name,
        len(finished) / args.duration,
        pct(ms, 50),
        pct(ms, 95),
        sum(1 for t in turns if t[3] is not None),
        meter.cores,
        database.cores,
        redis.cores,
        driver.cores,
        machine,
        # With several workers one scrape reaches one of them: only a lone process is read.
        None if serve_args else (writer_after - writer_before) / window,
    )


async def main() -> None:
    args = parse_args()
    from app.demo.generator import regenerate

    cases = set(args.cases.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="hermes-scale-"))
    demo = tmp / "demo.db"
    regenerate(demo)
    port_file = tmp / "llm.port"
    fake_args = ["bench/_fake_llm.py", "--port-file", str(port_file), "--rules"]
    fake = spawn(python(*fake_args, "--delay", str(args.model_delay)), {}, tmp / "llm.log")
    results: list[Result] = []
    try:
        api_base = f"http://127.0.0.1:{await wait_port_file(port_file, fake)}/v1"
        if "sqlite" in cases:
            sqlite = await run_case("1 process, SQLite", args, api_base, fake.pid, demo, tmp, {})
            results.append(sqlite)
        if "postgres" in cases:
            url = create_database()
            try:
                results.append(
                    await run_case(
                        "1 process, PostgreSQL",
                        args,
                        api_base,
                        fake.pid,
                        demo,
                        tmp,
                        {"HERMES_DATABASE_URL": url},
                    )
                )
            finally:
                drop_database(url)
        if "workers" in cases:
            url, prefix = create_database(), f"hermes-bench-{uuid.uuid4().hex[:8]}"
            try:
                results.append(
                    await run_case(
                        f"{args.workers} workers, PostgreSQL + Redis",
                        args,
                        api_base,
                        fake.pid,
                        demo,
                        tmp,
                        {
                            "HERMES_DATABASE_URL": url,
                            "HERMES_REDIS_URL": REDIS_URL,
                            "HERMES_REDIS_PREFIX": prefix,
                        },
                        ("--workers", str(args.workers)),
                    )
                )
            finally:
                drop_database(url)
                drop_redis_prefix(prefix)
    finally:
        stop([fake])
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"scale: {args.users} users, think normal({args.think_mean:g}, {args.think_sd:g}) s,"
        f" model {args.model_delay * 1000:.0f} ms per call, {args.duration:g} s measured per case"
        f" after {args.ramp:g} s ramp-up; {os.cpu_count()} cores on this machine (shared with"
        " the load generator and the fake model: a second process measures overhead and the"
        " gain of a second core, not a cluster)"
    )
    print(
        f"{'case':<36}{'turns/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'failures':>10}"
        f"{'hermes':>8}{'pg':>6}{'redis':>7}{'driver':>8}{'machine':>9}{'cpu ms/turn':>13}"
        f"{'writer':>8}"
    )
    for r in results:
        print(
            f"{r.name:<36}{r.turns_per_s:>9.1f}{r.p50_ms:>9.0f}{r.p95_ms:>9.0f}"
            f"{r.failures:>10}{r.hermes_cores:>8.2f}{r.database_cores:>6.2f}{r.redis_cores:>7.2f}"
            f"{r.driver_cores:>8.2f}{r.machine_cores:>9.2f}{r.cpu_ms_per_turn:>13.1f}"
            f"{'-' if r.writer_busy is None else f'{r.writer_busy:.0%}':>8}"
        )
    print("(cores used in the measured window: hermes = its processes, pg = the PostgreSQL")
    print(" server, driver = the load generator and the fake model, machine = all busy CPU;")
    print(" writer = share of the time the database writers were running write batches, mean")
    print(" over the writer connections)")
    base = next((r for r in results if r.name.endswith("SQLite")), None)
    if base is not None and base.turns_per_s > 0:
        for r in results[1:]:
            need = 0.8 if "PostgreSQL" in r.name and "workers" not in r.name else 1.6
            ratio = r.turns_per_s / base.turns_per_s
            verdict = "PASS" if ratio >= need else "FAIL"
            print(f"{verdict}  {r.name}: {ratio:.2f}x one SQLite process (target >= {need})")
        cores = os.cpu_count() or 1
        if base.cpu_ms_per_turn > 0:
            ceiling = cores / (base.cpu_ms_per_turn / 1000)
            print(
                f"ceiling: at SQLite's own {base.cpu_ms_per_turn:.1f} ms of machine CPU per turn,"
                f" {cores} cores serve at most {ceiling:.0f} turns/s"
                f" = {ceiling / base.turns_per_s:.2f}x one SQLite process, whatever the"
                " number of processes"
            )


if __name__ == "__main__":
    asyncio.run(main())
