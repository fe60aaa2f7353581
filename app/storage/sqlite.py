"""SQLite in WAL mode: one writer thread with group commit, separate read connections.

All writes go through `Database.write(fn)`: `fn(conn)` runs on the single writer thread inside
`BEGIN IMMEDIATE`, in a savepoint of its own when others share the transaction, and whatever
jobs queued up meanwhile commit together (one fsync at most, one thread hop). A job's
`on_commit` callback runs on the event loop after the commit, in commit order, before its
awaiting caller resumes: publishing an event there means nobody ever sees an event that a crash
could take back.

Reads go through `aiosqlite` connections opened `query_only`.

`Database.counts()` says how much work went through: statements the write jobs ran (and the
transaction control around them), write jobs, commits, read queries and session events. Each
counter is only ever bumped by one thread, so counting costs no lock; benches and tests diff
two snapshots, and `app.observability.metrics` exports them at scrape time.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

import aiosqlite

from app.errors import DatabaseClosed
from app.storage.migrations import apply_migrations

log = logging.getLogger(__name__)

T = TypeVar("T")
_MAX_BATCH = 512


@dataclass(frozen=True)
class DbCounts:
    """Work done by one database since it opened (see `Database.counts`)."""

    commits: int = 0  # write batches committed (group commit: one per batch)
    jobs: int = 0  # write jobs run (each its own transaction or savepoint)
    writes: int = 0  # statements the write jobs ran
    control: int = 0  # transaction control around them: BEGIN, SAVEPOINT, RELEASE, COMMIT...
    reads: int = 0  # read queries through the reader pool
    events: int = 0  # session events appended
    event_bytes: int = 0  # their JSON payloads, in bytes

    def __sub__(self, other: DbCounts) -> DbCounts:
        return DbCounts(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(DbCounts)))

    def __add__(self, other: DbCounts) -> DbCounts:
        return DbCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(DbCounts)))


class _CountingConnection(sqlite3.Connection):
    """The writer connection: counts the statements it runs and the events appended on it."""

    statements = 0
    events = 0
    event_bytes = 0

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.statements += 1
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        rows = list(parameters)
        self.statements += len(rows)
        return super().executemany(sql, rows)


def note_event(conn: sqlite3.Connection, payload_bytes: int) -> None:
    """Count a session event appended on `conn` (a plain connection is not counted)."""
    if isinstance(conn, _CountingConnection):
        conn.events += 1
        conn.event_bytes += payload_bytes


@dataclass
class _Job(Generic[T]):
    fn: Callable[[sqlite3.Connection], T]
    future: asyncio.Future[T]
    on_commit: Callable[[T], None] | None


def _configure(conn: sqlite3.Connection, synchronous: str, busy_timeout_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")


class Database:
    def __init__(
        self,
        path: Path | str,
        *,
        migrations_dir: Path | None = None,
        synchronous: str = "NORMAL",
        busy_timeout_ms: int = 5000,
        read_connections: int = 2,
    ) -> None:
        self.path = Path(path)
        self.migrations_dir = migrations_dir
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self._n_readers = read_connections
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = itertools.cycle([0])
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = True
        self.applied_migrations: list[str] = []
        self.commits = 0  # batches committed, for metrics and tests
        self._jobs_run = 0
        self._reads = 0
        self._control_statements = 0
        self._writer: _CountingConnection | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def open(self) -> Database:
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.migrations_dir is not None:
            self.applied_migrations = await asyncio.to_thread(
                apply_migrations, self.path, self.migrations_dir, self.busy_timeout_ms
            )
        self._loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(
            target=self._writer_main, args=(ready,), name="hermes-db-writer", daemon=True
        )
        self._closed = False
        self._thread.start()
        await ready
        for _ in range(self._n_readers):
            conn = await aiosqlite.connect(self.path, isolation_level=None)
            conn.row_factory = sqlite3.Row
            await conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            await conn.execute("PRAGMA query_only = ON")
            self._readers.append(conn)
        self._next_reader = itertools.cycle(range(len(self._readers)))
        return self

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        for conn in self._readers:
            await conn.close()
        self._readers.clear()

    async def __aenter__(self) -> Database:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- writes -------------------------------------------------------------------------------

    def submit(
        self,
        fn: Callable[[sqlite3.Connection], T],
        on_commit: Callable[[T], None] | None = None,
    ) -> asyncio.Future[T]:
        """Queue a write job; the returned future resolves after its batch commits."""
        if self._closed or self._loop is None:
            raise DatabaseClosed("database is closed")
        future: asyncio.Future[T] = self._loop.create_future()
        self._jobs.put(_Job(fn, future, on_commit))
        return future

    async def write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        on_commit: Callable[[T], None] | None = None,
    ) -> T:
        # shield: a cancelled caller must not make the job look failed; it still commits.
        return await asyncio.shield(self.submit(fn, on_commit))

    def _writer_main(self, ready: asyncio.Future[None]) -> None:
        loop = self._loop
        assert loop is not None
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                factory=_CountingConnection,
            )
            self._writer = conn
            conn.row_factory = sqlite3.Row
            _configure(conn, self.synchronous, self.busy_timeout_ms)
            self._control_statements = conn.statements  # the PRAGMAs: not a job's work
        except Exception as exc:  # pragma: no cover - reported to open()
            loop.call_soon_threadsafe(ready.set_exception, exc)
            return
        loop.call_soon_threadsafe(ready.set_result, None)
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    break
                batch = [job]
                stop = False
                while len(batch) < _MAX_BATCH:
                    try:
                        more = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    batch.append(more)
                outcomes = self._run_batch(conn, batch)
                loop.call_soon_threadsafe(_deliver, outcomes)
                if stop:
                    break
        finally:
            conn.close()

    def _run_batch(
        self, conn: sqlite3.Connection, batch: list[_Job[Any]]
    ) -> list[tuple[_Job[Any], Any, BaseException | None]]:
        outcomes: list[tuple[_Job[Any], Any, BaseException | None]] = []
        try:
            self._control(conn, "BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            return [(job, None, exc) for job in batch]
        self._jobs_run += len(batch)
        isolated = batch
        if len(batch) == 1:  # alone in its transaction: no savepoint needed to isolate it
            job = batch[0]
            try:
                result = job.fn(conn)
            except BaseException as exc:
                self._control(conn, "ROLLBACK")
                return [(job, None, exc)]
            outcomes.append((job, result, None))
            isolated = []
        for job in isolated:
            self._control(conn, "SAVEPOINT job")
            try:
                result = job.fn(conn)
            except BaseException as exc:
                self._control(conn, "ROLLBACK TO job")
                self._control(conn, "RELEASE job")
                outcomes.append((job, None, exc))
            else:
                self._control(conn, "RELEASE job")
                outcomes.append((job, result, None))
        try:
            self._control(conn, "COMMIT")
            self.commits += 1
        except sqlite3.Error as exc:
            log.exception("commit failed; rolling back a batch of %d jobs", len(batch))
            if conn.in_transaction:
                self._control(conn, "ROLLBACK")
            return [(job, None, exc) for job in batch]
        return outcomes

    def _control(self, conn: sqlite3.Connection, sql: str) -> None:
        self._control_statements += 1
        conn.execute(sql)

    def counts(self) -> DbCounts:
        writer = self._writer
        return DbCounts(
            commits=self.commits,
            jobs=self._jobs_run,
            writes=writer.statements - self._control_statements if writer else 0,
            control=self._control_statements,
            reads=self._reads,
            events=writer.events if writer else 0,
            event_bytes=writer.event_bytes if writer else 0,
        )

    # -- reads --------------------------------------------------------------------------------

    def _reader(self) -> aiosqlite.Connection:
        if self._closed:
            raise DatabaseClosed("database is closed")
        return self._readers[next(self._next_reader)]

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        self._reads += 1
        rows: Iterable[sqlite3.Row] = await self._reader().execute_fetchall(sql, params)
        return list(rows)

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def ping(self) -> None:
        """A trivial read through the pool: raises if the database cannot answer."""
        await self.fetchone("SELECT 1")


def _deliver(outcomes: list[tuple[_Job[Any], Any, BaseException | None]]) -> None:
    for job, result, exc in outcomes:
        if exc is not None:
            if not job.future.done():
                job.future.set_exception(exc)
            continue
        if job.on_commit is not None:
            try:
                job.on_commit(result)
            except Exception:
                log.exception("on_commit callback failed")
        if not job.future.done():
            job.future.set_result(result)
