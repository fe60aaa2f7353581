"""SQLite in WAL mode: one writer thread with group commit, separate read connections.

Writes go through the shared writer (`app.storage.writer`): jobs run on one thread inside
`BEGIN IMMEDIATE`, a savepoint each when they share the transaction, and commit together.
Reads go through `aiosqlite` connections opened `query_only`.

`counts()` says how much work went through: statements the write jobs ran (and the transaction
control around them), write jobs, commits, read queries and session events. Each counter is
only ever bumped by one thread, so counting costs no lock; benches and tests diff two
snapshots, and `app.observability.metrics` exports them at scrape time.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from app.errors import DatabaseClosed, DatabaseUnavailable
from app.settings import StorageSettings
from app.storage.migrations import apply_migrations
from app.storage.port import DbCounts, Dialect
from app.storage.session_writer import NO_SESSION
from app.storage.writer import BatchWriter

# The knobs a caller leaves out, as HERMES_DB_* defines them (the service passes its settings).
DEFAULTS = StorageSettings()

__all__ = ["DbCounts", "SqliteDatabase"]

log = logging.getLogger(__name__)


class _CountingConnection(sqlite3.Connection):
    """The writer connection: counts the statements it runs and the events appended on it."""

    dialect: Dialect = "sqlite"
    statements = 0
    control = 0  # of the statements: transaction control and set-up, not a job's work
    events = 0
    event_bytes = 0

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.statements += 1
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        rows = list(parameters)
        self.statements += len(rows)
        return super().executemany(sql, rows)

    def count_event(self, payload_bytes: int) -> None:
        self.events += 1
        self.event_bytes += payload_bytes


_AUTO_VACUUM_INCREMENTAL = 2
# Primary result codes that say the file itself can't be used now (an I/O error, a file that
# can't be opened: a disk or mount gone away), not that a statement was wrong.
_SQLITE_IOERR, _SQLITE_CANTOPEN = 10, 14


def file_unusable(exc: BaseException) -> bool:
    """SQLite's "the database cannot be reached": what a caller may wait out."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.Error)
        and code is not None
        and code & 0xFF
        in (
            _SQLITE_IOERR,
            _SQLITE_CANTOPEN,
        )
    )


_TRUNCATE_BUSY_MS = 20  # how long a truncating checkpoint may hold new writers back


def ensure_incremental_vacuum(path: Path, max_bytes: int, busy_timeout_ms: int) -> str:
    """Put the database in `auto_vacuum = INCREMENTAL`, so purged pages can be given back to
    the file system in small steps (`reclaim`). A new file takes it at once; an existing one
    needs a VACUUM (a rewrite of the whole file), done here only when the file is at most
    `max_bytes` — otherwise it is logged, and left to the operator (docs/operations.md).
    Returns what was done: "incremental" (already), "converted" or "too large"."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == _AUTO_VACUUM_INCREMENTAL:
            return "incremental"
        size = path.stat().st_size if path.exists() else 0
        if size > max_bytes:
            log.warning(
                "%s is %.0f MiB, over HERMES_DB_AUTO_VACUUM_CONVERT_MAX_MB: purged space is"
                " reused but not given back to the file system until it is converted (stop"
                " Hermes, then: sqlite3 %s 'PRAGMA auto_vacuum = INCREMENTAL; VACUUM;')",
                path,
                size / 2**20,
                path,
            )
            return "too large"
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")  # a new file: writes the header; an old one: the conversion
        return "converted"
    finally:
        conn.close()


def _configure(conn: sqlite3.Connection, synchronous: str, busy_timeout_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    # What is deleted is overwritten with zeros (in its page and in freed pages), so erased
    # data does not linger in the file; `scrub` then takes it out of the WAL too.
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")


class SqliteDatabase(BatchWriter[sqlite3.Connection]):
    dialect: Dialect = "sqlite"
    begin_sql = "BEGIN IMMEDIATE"

    def __init__(
        self,
        path: Path | str,
        *,
        migrations_dir: Path | None = None,
        synchronous: str = DEFAULTS.synchronous,
        busy_timeout_ms: int = DEFAULTS.busy_timeout_ms,
        read_connections: int = DEFAULTS.read_connections,
        wal_autocheckpoint_pages: int = DEFAULTS.wal_autocheckpoint_pages,
        wal_max_bytes: int = DEFAULTS.wal_max_mb * 2**20,
        auto_vacuum_convert_max_bytes: int = DEFAULTS.auto_vacuum_convert_max_mb * 2**20,
    ) -> None:
        super().__init__()
        self.wal_autocheckpoint_pages = wal_autocheckpoint_pages
        self.wal_max_bytes = wal_max_bytes
        self.auto_vacuum_convert_max_bytes = auto_vacuum_convert_max_bytes
        self.path = Path(path)
        self.migrations_dir = migrations_dir
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self._n_readers = read_connections
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = itertools.cycle([0])
        self.applied_migrations: list[str] = []
        self._reads = 0

    # -- lifecycle ----------------------------------------------------------------------------

    async def open(self) -> SqliteDatabase:
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.migrations_dir is not None and str(self.path) != ":memory:":
            await asyncio.to_thread(
                ensure_incremental_vacuum,
                self.path,
                self.auto_vacuum_convert_max_bytes,
                self.busy_timeout_ms,
            )
        if self.migrations_dir is not None:
            self.applied_migrations = await asyncio.to_thread(
                apply_migrations, self.path, self.migrations_dir, self.busy_timeout_ms
            )
        await self._start_writer()
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
        await self._stop_writer()
        for conn in self._readers:
            await conn.close()
        self._readers.clear()

    async def __aenter__(self) -> SqliteDatabase:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the writer connection ----------------------------------------------------------------

    def _connect(self) -> _CountingConnection:
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            factory=_CountingConnection,
        )
        conn.row_factory = sqlite3.Row
        _configure(conn, self.synchronous, self.busy_timeout_ms)
        # The WAL policy: a passive checkpoint after a commit leaves more than this many pages
        # in the WAL, and a WAL that restarts from its beginning is cut back to the cap
        # (`checkpoint` truncates one that grew past it while readers held it open).
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(self.wal_autocheckpoint_pages)}")
        conn.execute(f"PRAGMA journal_size_limit = {int(self.wal_max_bytes)}")
        conn.control = conn.statements  # the PRAGMAs: not a job's work
        return conn

    def _in_transaction(self, conn: Any) -> bool:
        return bool(conn.in_transaction)

    def _unavailable(self, exc: BaseException) -> bool:
        return file_unusable(exc)

    def counts(self) -> DbCounts:
        conns = self._connections()
        return DbCounts(
            commits=self.commits,
            jobs=self._jobs_run,
            writes=sum(c.statements - c.control for c in conns),
            control=sum(c.control for c in conns),
            reads=self._reads,
            events=sum(c.events for c in conns),
            event_bytes=sum(c.event_bytes for c in conns),
            retries=self._retries,
            busy_s=self.busy_s,
        )

    # -- reads --------------------------------------------------------------------------------

    def _reader(self) -> aiosqlite.Connection:
        if self._closed:
            raise DatabaseClosed("database is closed")
        return self._readers[next(self._next_reader)]

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        self._reads += 1
        try:
            rows: Iterable[sqlite3.Row] = await self._reader().execute_fetchall(sql, params)
        except sqlite3.Error as exc:
            if file_unusable(exc):
                raise DatabaseUnavailable() from exc
            raise
        return list(rows)

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def ping(self) -> None:
        """A trivial read through the pool: raises if the database cannot answer."""
        await self.fetchone("SELECT 1")

    async def scrub(self, tables: Sequence[str] = ()) -> None:
        """Erased data out of the WAL: its pages are checkpointed into the database (where
        `secure_delete` zeroed what was deleted) and the WAL file truncated, so no frame of
        the old pages is left. Retries while readers hold old snapshots, a few seconds at most."""
        await asyncio.to_thread(self._checkpoint_truncate)

    def _side_connection(self, busy_timeout_ms: int) -> sqlite3.Connection:
        """A connection of its own for maintenance the writer's transactions can't hold."""
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA secure_delete = ON")
        return conn

    async def reclaim(self, pages: int) -> int:
        """Free pages back to the file system, at most `pages` per write job on the writer
        (a few milliseconds each, like any turn's write), with a pause after each for the
        turns' writes. Returns the pages freed (0 for a file not in INCREMENTAL mode)."""
        if str(self.path) == ":memory:":
            return 0
        row = await self.fetchone("PRAGMA auto_vacuum")
        if row is None or row[0] != _AUTO_VACUUM_INCREMENTAL:
            return 0
        freed = 0
        while True:
            step = await self.write(NO_SESSION, lambda conn: _vacuum_step(conn, max(1, pages)))
            freed += step
            if step < pages:
                return freed
            await asyncio.sleep(0.005)

    async def checkpoint(self) -> int:
        """A passive checkpoint (it never waits, never blocks a writer); a WAL still over
        its cap is then truncated, waiting at most a few milliseconds for readers. Returns
        the WAL's size in bytes."""
        if str(self.path) == ":memory:":
            return 0
        return await asyncio.to_thread(self._checkpoint)

    def _checkpoint(self) -> int:
        wal = self.path.with_name(self.path.name + "-wal")
        conn = self._side_connection(_TRUNCATE_BUSY_MS)
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if _size(wal) > self.wal_max_bytes:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
        return _size(wal)

    def _checkpoint_truncate(self, attempts: int = 50) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            for _ in range(attempts):
                busy, _frames, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if not busy:
                    return
                time.sleep(0.05)
            log.warning("the WAL could not be truncated: readers kept old snapshots open")
        finally:
            conn.close()

    async def vacuum(self, table: str) -> None:
        """Nothing to do: deleted rows leave no index entries behind in SQLite's B-trees, and
        the FTS index is merged by the memory store's own statements."""


def _vacuum_step(conn: sqlite3.Connection, pages: int) -> int:
    """Up to `pages` free pages cut off the end of the file, in the writer's transaction.
    Python steps a statement that returns no columns only once, and one step of
    `incremental_vacuum` frees one page: so one statement per page, each reset."""
    (before,) = conn.execute("PRAGMA freelist_count").fetchone()
    for _ in range(min(pages, before)):
        conn.execute("PRAGMA incremental_vacuum(1)").close()
    (after,) = conn.execute("PRAGMA freelist_count").fetchone()
    return int(before - after)


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0
