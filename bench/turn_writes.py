"""What one turn costs the database: statements, write jobs, commits, events and bytes.

Runs the real service in this process (SQLite files, the demo data, the fake model server on
a socket) and talks to it over HTTP one turn at a time, waiting after each turn until its
session's worker is gone, so every count belongs to exactly one turn. Two kinds of turn:

- plain: one model call that streams a short answer;
- order status: the model calls `query_order_status`, then answers.

    python bench/turn_writes.py [--turns 20] [--session-turns 20] [--profile out.pstats]

For a before/after comparison run it against another checkout with that checkout's `app`
first on the path (`cd /tmp/old && PYTHONPATH=$PWD python /path/to/bench/turn_writes.py`).
Code without `Database.counts()` is counted from outside: every SQLite connection is opened
with a counting subclass (a bench may do that; tests never do). In both, the writer connection
runs with `wal_autocheckpoint = 0`, so the WAL's growth is the bytes each turn wrote.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Run as a script, this folder comes first on sys.path and its `mcp.py` would hide the SDK.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

sys.path.append(str(_HERE.parent))  # after PYTHONPATH: another checkout's `app` may come first
from bench._pg import PG_ADMIN_URL, create_database, drop_database  # noqa: E402

REPLY = "Your order 202405201234 has shipped and arrives tomorrow."
ORDER = "202405201234"  # the demo's shipped order of cust_0001
CUSTOMER = "cust_0001"


_CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT", "ROLLBACK", "PRAGMA")


class _Counted(sqlite3.Connection):
    """Fallback counting for code without `Database.counts()`."""

    statements = 0
    control = 0
    commits = 0
    jobs = 0
    writer = False

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        head = sql.lstrip()[:9].upper()
        if head.startswith(_CONTROL):
            self.control += 1
            self.commits += head.startswith("COMMIT")
            self.jobs += head.startswith("SAVEPOINT")  # that code ran every job in a savepoint
        else:
            self.statements += 1
        return super().execute(sql, parameters)


_OUTSIDE: list[tuple[str, _Counted]] = []


def _open_connections_for_the_bench(count: bool) -> None:
    """The writer connection (the one opened for another thread) never checkpoints, so the
    WAL's growth is what the turns wrote; with `count`, every connection counts statements."""
    real = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        writer = kwargs.get("check_same_thread") is False
        if not count or "factory" in kwargs:
            conn = real(database, *args, **kwargs)
        else:
            conn = real(database, *args, factory=_Counted, **kwargs)
            assert isinstance(conn, _Counted)
            conn.writer = writer
            _OUTSIDE.append((str(database), conn))
        if writer:
            conn.execute("PRAGMA wal_autocheckpoint = 0")
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]


@dataclass
class Counts:
    writes: int = 0
    control: int = 0
    reads: int = 0
    jobs: int = 0
    commits: int = 0
    events: int = 0
    event_bytes: int = 0
    wal_bytes: int = 0

    def minus(self, other: Counts) -> Counts:
        return Counts(*(a - b for a, b in zip(self.row(), other.row(), strict=True)))

    def row(self) -> tuple[int, ...]:
        return (
            self.writes,
            self.control,
            self.reads,
            self.jobs,
            self.commits,
            self.events,
            self.event_bytes,
            self.wal_bytes,
        )


def _events_in(db_path: Path) -> tuple[int, int]:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, factory=sqlite3.Connection) as c:
        n, size = c.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(data AS BLOB))), 0) FROM events"
        ).fetchone()
    return int(n), int(size)


def counts(runtime: Any, db_path: Path | None) -> Counts:
    db = runtime.db
    if db_path is None:  # PostgreSQL: the port's own counts (events counted as written)
        c = db.counts()
        return Counts(c.writes, c.control, c.reads, c.jobs, c.commits, c.events, c.event_bytes)
    events, event_bytes = _events_in(db_path)
    wal = db_path.with_name(db_path.name + "-wal")
    wal_bytes = wal.stat().st_size if wal.exists() else 0
    if hasattr(db, "counts"):
        c = db.counts()
        return Counts(
            c.writes, c.control, c.reads, c.jobs, c.commits, events, event_bytes, wal_bytes
        )
    mine = [conn for path, conn in _OUTSIDE if Path(path) == db_path]
    writer = [c for c in mine if c.writer]
    return Counts(
        writes=sum(c.statements for c in writer),
        control=sum(c.control for c in writer),
        # Reader connections also ran their PRAGMAs once at start-up: diffs cancel them out.
        reads=sum(c.statements for c in mine if not c.writer),
        jobs=sum(c.jobs for c in writer),
        commits=sum(c.commits for c in writer),
        events=events,
        event_bytes=event_bytes,
        wal_bytes=wal_bytes,
    )


@dataclass
class Kind:
    name: str
    per_turn: list[Counts] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def bench_settings(tmp: Path, model_url: str, **extra: Any) -> Any:
    """Hermes on `tmp`'s SQLite file and demo data, talking to the fake model at `model_url`
    (no `hermes/local` fallback: a model failure is a failed turn)."""
    from app.settings import Settings

    return Settings(
        db_path=tmp / "hermes.db",
        demo_db_path=tmp / "demo.db",
        model="openai/bench",
        model_api_base=model_url,
        model_api_key="sk-bench",
        local_fallback=False,
        log_level="WARNING",
        **extra,
    )


async def wait_idle(runtime: Any) -> None:
    deadline = time.monotonic() + 30
    while runtime.manager.active_sessions():
        if time.monotonic() > deadline:
            raise RuntimeError("a session worker did not finish")
        await asyncio.sleep(0.001)


def _db_size(path: Path) -> int:
    with sqlite3.connect(path, factory=sqlite3.Connection) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, size = (
            c.execute("PRAGMA page_count").fetchone()[0],
            c.execute("PRAGMA page_size").fetchone()[0],
        )
    return int(pages) * int(size)


async def run(args: argparse.Namespace) -> None:
    from app.demo.generator import regenerate
    from app.llm.testing import FakeLLMServer, Reply, ScriptedLLM, ToolCall, ToolCalls
    from app.testing import serve

    tmp = Path(tempfile.mkdtemp(prefix="hermes-writes-"))
    regenerate(tmp / "demo.db")
    db_path = tmp / "hermes.db"
    pg_url = create_database() if args.postgres else None
    profiler = cProfile.Profile() if args.profile else None
    with FakeLLMServer(default=Reply(REPLY)) as llm:
        settings = bench_settings(tmp, llm.url, **({"database_url": pg_url} if pg_url else {}))
        kinds = [Kind("plain"), Kind("order status")]
        scripted = ScriptedLLM(default=Reply(REPLY)) if args.scripted else None
        script = scripted or llm
        async with serve(settings, model=scripted) as svc:
            client, runtime = svc.client, svc.runtime

            async def session() -> str:
                r = await client.post("/v1/sessions", json={"user_id": CUSTOMER})
                r.raise_for_status()
                return str(r.json()["id"])

            async def turn(kind: Kind, session_id: str, i: int, record: bool) -> None:
                if kind.name == "order status":
                    script.enqueue(
                        ToolCalls(ToolCall("query_order_status", {"order_id": ORDER})),
                        Reply(REPLY),
                    )
                    content = f"where is my order {ORDER}?"
                else:
                    content = f"where is my order {i}"
                await wait_idle(runtime)
                before, t = counts(runtime, None if pg_url else db_path), time.perf_counter()
                if profiler is not None and record:
                    profiler.enable()
                r = await client.post(
                    f"/v1/sessions/{session_id}/messages", json={"content": content}
                )
                r.raise_for_status()
                await wait_idle(runtime)
                if profiler is not None and record:
                    profiler.disable()
                if record:
                    kind.seconds.append(time.perf_counter() - t)
                    kind.per_turn.append(counts(runtime, None if pg_url else db_path).minus(before))

            for kind in kinds:  # warm-up: first calls import and connect
                await turn(kind, await session(), 0, record=False)
            size_before = 0 if pg_url else _db_size(db_path)
            for kind in kinds:
                left = args.turns
                while left > 0:
                    sid = await session()
                    for i in range(min(left, args.session_turns)):
                        await turn(kind, sid, i, record=True)
                    left -= args.session_turns
            grown = 0 if pg_url else _db_size(db_path) - size_before
    if pg_url:
        drop_database(pg_url)
    total_turns = sum(len(k.per_turn) for k in kinds)
    code = "Database.counts()" if _OUTSIDE == [] else "counted from outside (no Database.counts)"
    print(f"code under test: {Path(sys.modules['app'].__file__ or '').parent.parent} [{code}]")
    model = "in-process scripted model" if args.scripted else "fake model server over HTTP"
    print(
        f"{args.turns} turns of each kind, sessions of {args.session_turns} turns,"
        f" JSON POSTs, {model}"
    )
    print(
        "per turn (mean)   writes control  reads  jobs  commits  events  event_bytes"
        "  wal_bytes  ms (median)"
    )
    for kind in kinds:
        n = len(kind.per_turn)
        m = [sum(c.row()[j] for c in kind.per_turn) / n for j in range(8)]
        print(
            f"{kind.name:<16} {m[0]:7.1f} {m[1]:7.1f} {m[2]:6.1f} {m[3]:5.1f} {m[4]:8.1f}"
            f" {m[5]:7.1f} {m[6]:12.0f} {m[7]:10.0f}"
            f" {statistics.median(kind.seconds) * 1000:12.1f}"
        )
    if not pg_url:
        print(f"database growth    {grown / total_turns:8.0f} bytes per turn (checkpointed pages)")
    if profiler is not None:
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20, help="turns of each kind")
    parser.add_argument("--session-turns", type=int, default=20, help="turns per session")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help=f"run on a fresh PostgreSQL database (server: {PG_ADMIN_URL})",
    )
    parser.add_argument("--profile", help="write a cProfile of the measured turns here")
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="the model is an in-process script (no HTTP, no LiteLLM): Hermes' own work only",
    )
    args = parser.parse_args()
    from app.storage.port import Database

    _open_connections_for_the_bench(count=not hasattr(Database, "counts"))
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
