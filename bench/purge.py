"""A retention purge of a million old events while turns run: does a turn's write wait on it?

Seeds a SQLite database with `--events` events (default 1,000,000) of `--sessions` sessions
archived 40 days ago (a fast bulk insert beside the service, before it starts), then runs the
real service in this process against the fake model server, posting turns at a steady
`--rate` (open loop: one every 1/rate s, whatever the answers do). First `--baseline-s`
seconds of turns alone, then the same load while the purge (`Purger.purge`, the settings'
batches and pauses) deletes the old events, gives the pages back and checkpoints.

Every write job is timed from its submission to its commit (the wait a turn's write sees),
and every purge job (a batch, a vacuum step) by when it ran on the writer; a turn's write
waited on the purge for the part of its wait a purge job was running (the rest is other
turns' writes, commits and, on a shared machine, everything else). Printed: the purge's
duration, rows, batches and longest batch; the turns' write waits (p50 / p99 / max) and
turn latencies without and with the purge, and how long each turn write waited behind purge
jobs; the file before and after. Target (issue 16): no turn's write waits more than 50 ms
on the purge.

    python bench/purge.py [--events 1000000] [--sessions 10000] [--rate 20]
        [--baseline-s 20] [--batch-rows 250] [--pause-ms 10]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextvars
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import httpx  # noqa: E402

from bench._procs import pct  # noqa: E402

DAY = 86400.0
WAIT_TARGET_MS = 50.0
_in_purge: contextvars.ContextVar[bool] = contextvars.ContextVar("in_purge", default=False)


def seed(path: Path, events: int, sessions: int) -> float:
    """`events` events over `sessions` sessions archived 40 days ago; returns seconds taken."""
    started = time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    at = time.time() - 40 * DAY
    per = events // sessions
    payload = json.dumps({"text": "Your order 202405201234 has shipped and arrives tomorrow."})
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO sessions (id, session_key, tenant_id, user_id, status, metadata, created_at,"
        " updated_at, last_activity_at, archived_at, last_event_seq) VALUES"
        " (?, ?, 'acme', 'u', 'archived', '{}', ?, ?, ?, ?, ?)",
        ((f"ses_old{i:07d}", i + 1, at, at, at, at, per) for i in range(sessions)),
    )
    conn.executemany(
        "INSERT INTO events (session_key, seq, turn_number, type, data, created_at)"
        " VALUES (?, ?, NULL, 'message.delta', ?, ?)",
        ((i + 1, seq, payload, at) for i in range(sessions) for seq in range(1, per + 1)),
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - started


def _file(path: Path) -> str:
    wal = path.with_name(path.name + "-wal")
    conn = sqlite3.connect(path)
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    conn.close()
    size = path.stat().st_size / 2**20
    wal_size = wal.stat().st_size / 2**20 if wal.exists() else 0.0
    return f"database {size:.1f} MiB, WAL {wal_size:.1f} MiB, {free} free pages"


def _ms(values: list[float]) -> str:
    return (
        f"p50 {pct(values, 50) * 1000:.1f} / p99 {pct(values, 99) * 1000:.1f}"
        f" / max {max(values, default=0) * 1000:.1f} ms ({len(values)})"
    )


async def run(args: argparse.Namespace) -> None:
    from app.demo.generator import regenerate
    from app.llm.testing import FakeLLMServer, Reply
    from app.settings import Settings
    from app.storage import purge as purge_module
    from app.storage.sqlite import SqliteDatabase
    from app.testing import serve

    tmp = Path(tempfile.mkdtemp(prefix="hermes-purge-"))
    regenerate(tmp / "demo.db")
    db_path = tmp / "hermes.db"
    from app.settings import PROJECT_ROOT

    async with SqliteDatabase(db_path, migrations_dir=PROJECT_ROOT / "migrations"):
        pass  # the schema, as the service makes it
    seeded_s = seed(db_path, args.events, args.sessions)
    print(f"seeded {args.events:,} events of {args.sessions:,} sessions in {seeded_s:.1f} s")
    print(f"before: {_file(db_path)}")

    with FakeLLMServer(default=Reply("Your order has shipped.")) as llm:
        settings = Settings(
            db_path=db_path,
            demo_db_path=tmp / "demo.db",
            model="openai/bench",
            model_api_base=llm.url,
            model_api_key="sk-bench",
            local_fallback=False,
            log_level="WARNING",
            retention_interval_s=1e9,  # the bench runs the purge itself
            retention_batch_rows=args.batch_rows,
            retention_pause_ms=args.pause_ms,
            db_checkpoint_interval_s=args.checkpoint_s,
        )
        async with serve(settings) as svc:
            db = svc.runtime.db
            waits: dict[str, list[float]] = {"turns": [], "purge": []}
            turn_jobs: list[tuple[float, float]] = []  # (submitted, committed) of turns' writes
            held: list[tuple[float, float]] = []  # when each purge job ran on the writer
            kinds: dict[str, list[float]] = {"batches": [], "vacuum steps": []}
            submit = db.submit

            def timed_submit(fn: Any, on_commit: Any = None) -> Any:
                purging = _in_purge.get()
                if purging:
                    inner = fn

                    def fn(conn: Any) -> Any:
                        t = time.perf_counter()
                        try:
                            return inner(conn)
                        finally:
                            end = time.perf_counter()
                            held.append((t, end))
                            kind = "vacuum steps" if inner.__name__ == "<lambda>" else "batches"
                            kinds[kind].append(end - t)

                started = time.perf_counter()
                future = submit(fn, on_commit)
                bucket = waits["purge" if purging else "turns"]

                def done(_f: Any) -> None:
                    now = time.perf_counter()
                    bucket.append(now - started)
                    if not purging:
                        turn_jobs.append((started, now))

                future.add_done_callback(done)
                return future

            db.submit = timed_submit  # type: ignore[method-assign]

            sessions = []
            for i in range(args.users):
                r = await svc.client.post("/v1/sessions", json={"user_id": f"cust_{i:04d}"})
                r.raise_for_status()
                sessions.append(r.json()["id"])
            latencies: list[float] = []
            failures = 0
            busy = set[int]()

            async def one_turn(n: int) -> None:
                nonlocal failures
                who = n % len(sessions)
                if who in busy:  # that customer is still waiting: skip, as a person would
                    return
                busy.add(who)
                t = time.perf_counter()
                try:
                    r = await svc.client.post(
                        f"/v1/sessions/{sessions[who]}/messages",
                        json={"content": f"where is my order {n}"},
                    )
                    if r.status_code != 200:
                        failures += 1
                    latencies.append(time.perf_counter() - t)
                except httpx.HTTPError:  # e.g. a kept-alive connection the server just closed
                    failures += 1
                finally:
                    busy.discard(who)

            stop = asyncio.Event()

            async def load() -> None:
                tasks: set[asyncio.Task[None]] = set()
                n = 0
                start = time.perf_counter()
                while not stop.is_set():
                    task = asyncio.create_task(one_turn(n))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    n += 1
                    await asyncio.sleep(max(0.0, start + n / args.rate - time.perf_counter()))
                await asyncio.gather(*tasks)

            load_task = asyncio.create_task(load())
            await asyncio.sleep(args.baseline_s)
            base_waits, base_latencies = list(waits["turns"]), list(latencies)
            waits["turns"].clear()
            latencies.clear()
            turn_jobs.clear()

            async def purging() -> purge_module.PurgeReport:
                _in_purge.set(True)
                return await svc.runtime.purger.purge()

            t = time.perf_counter()
            report = await asyncio.create_task(purging())
            purge_s = time.perf_counter() - t
            stop.set()
            await load_task
            purge_waits, purge_latencies = list(waits["turns"]), list(latencies)
            on_purge = [overlap(job, held) for job in turn_jobs]

    print(
        f"load: {args.rate:g} turns/s open loop over {args.users} sessions, fake model,"
        f" JSON POSTs; machine shared with other work"
    )
    print(
        f"purge: {report.rows:,} rows ({report.by_table()}) in {purge_s:.1f} s,"
        f" {report.batches} batches of at most {args.batch_rows} rows"
        f" (largest {report.max_batch_rows}), {report.reclaimed_pages:,} pages reclaimed"
    )
    for kind, times in kinds.items():
        print(f"purge {kind} on the writer: {_ms(times)}")
    over = sum(1 for w in on_purge if w * 1000 > WAIT_TARGET_MS)
    print(
        f"turn writes, time spent behind purge jobs: {_ms(on_purge)};"
        f" {over} of {len(on_purge)} over {WAIT_TARGET_MS:.0f} ms"
    )
    print(f"turn writes, submit to commit, without purge: {_ms(base_waits)}")
    print(f"turn writes, submit to commit, during purge:  {_ms(purge_waits)}")
    print(f"turns, POST to answer, without purge: {_ms(base_latencies)}")
    print(f"turns, POST to answer, during purge:  {_ms(purge_latencies)}")
    print(f"failures: {failures}")
    print(f"after: {_file(db_path)}")
    worst = max(on_purge, default=0) * 1000
    verdict = "PASS" if worst <= WAIT_TARGET_MS else "FAIL"
    print(
        f"{verdict}: the longest a turn's write waited behind the purge: {worst:.1f} ms"
        f" (target <= {WAIT_TARGET_MS:.0f} ms)"
    )


def overlap(job: tuple[float, float], held: list[tuple[float, float]]) -> float:
    """How much of a write's wait (submitted, committed) purge jobs held the writer."""
    start, end = job
    i = max(0, bisect.bisect_left(held, (start, start)) - 1)  # the one running at submission
    total = 0.0
    while i < len(held) and held[i][0] < end:
        total += max(0.0, min(end, held[i][1]) - max(start, held[i][0]))
        i += 1
    return total


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=20.0, help="turns per second")
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--baseline-s", type=float, default=20.0)
    parser.add_argument("--batch-rows", type=int, default=250)
    parser.add_argument("--pause-ms", type=float, default=10.0)
    parser.add_argument("--checkpoint-s", type=float, default=60.0)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(run(parse_args()))
