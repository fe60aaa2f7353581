"""The storage port: what the stores need from a database, whichever engine is behind it.

Two implementations: `app.storage.sqlite.SqliteDatabase` (the embedded default: one file, one
writer thread with group commit) and `app.storage.postgres.database.PostgresDatabase` (several
processes or machines on one PostgreSQL). Both run write jobs — plain functions of a
`Connection` — on one writer thread per process, group them into transactions, and call each
job's `on_commit` on the event loop after its commit; both read through a small pool.

Application SQL is written once, in SQLite's spelling with `?` placeholders; the PostgreSQL
connection translates placeholders and `LIKE` (case-insensitive in SQLite). The few statements
that differ by engine branch on `dialect` (`Tx.dialect`, `Database.dialect`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from app.storage.session_writer import SessionWriter

T = TypeVar("T")
Dialect = Literal["sqlite", "postgres"]


@dataclass(frozen=True)
class DbCounts:
    """Work done by one database since it opened (see `Database.counts`)."""

    commits: int = 0  # write batches committed (group commit: one per batch)
    jobs: int = 0  # write jobs run (several share a batch's transaction)
    writes: int = 0  # statements the write jobs ran
    control: int = 0  # transaction control around them: BEGIN, SAVEPOINT, RELEASE, COMMIT...
    reads: int = 0  # read queries through the reader pool
    events: int = 0  # session events appended
    event_bytes: int = 0  # their JSON payloads, in bytes
    retries: int = 0  # batches run again after a deadlock or serialisation failure
    busy_s: float = 0.0  # seconds the writer thread spent running batches (saturation)

    def __sub__(self, other: DbCounts) -> DbCounts:
        return DbCounts(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(DbCounts)))

    def __add__(self, other: DbCounts) -> DbCounts:
        return DbCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(DbCounts)))


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What a write job may use: statements with `?` placeholders."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor: ...


def dialect_of(conn: Connection) -> Dialect:
    dialect: Dialect = getattr(conn, "dialect", "sqlite")
    return dialect


def note_event(conn: Connection, payload_bytes: int) -> None:
    """Count a session event appended on `conn` (a connection that doesn't count is skipped)."""
    count = getattr(conn, "count_event", None)
    if count is not None:
        count(payload_bytes)


class Database(Protocol):
    dialect: Dialect
    applied_migrations: list[str]

    @property
    def commits(self) -> int: ...

    @property
    def lanes(self) -> int:
        """Writer connections, a thread each (app.storage.writer)."""
        ...

    def lane_of(self, session_id: str | None) -> int:
        """The writer connection the writes of `session_id` go to (None: of no one session)."""
        ...

    async def open(self) -> Database: ...

    async def close(self) -> None: ...

    def submit(
        self,
        writer: SessionWriter | None,
        fn: Callable[[Connection], T],
        on_commit: Callable[[T], None] | None = None,
    ) -> asyncio.Future[T]:
        """Queue a write job on `writer`'s lane, under its fence (app/storage/session_writer.py);
        the returned future resolves after its batch commits."""
        ...

    async def write(
        self,
        writer: SessionWriter | None,
        fn: Callable[[Connection], T],
        on_commit: Callable[[T], None] | None = None,
    ) -> T: ...

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any | None: ...

    async def ping(self) -> None: ...

    async def scrub(self, tables: Sequence[str] = ()) -> None:
        """Make what was just erased from `tables` gone from the files now, not at some later
        checkpoint or vacuum (SQLite: the WAL checkpointed and truncated; PostgreSQL: VACUUM)."""
        ...

    async def vacuum(self, table: str) -> None:
        """Drop what deleted rows left in the table's indexes, now (PostgreSQL's VACUUM;
        SQLite's FTS index is merged by the memory store's own statements)."""
        ...

    async def reclaim(self, pages: int) -> int:
        """Give the space of deleted rows back to the file system, `pages` at a time, each
        step a short write of its own; returns the pages freed (SQLite's incremental vacuum;
        PostgreSQL: 0, autovacuum makes the space reusable by itself)."""
        ...

    async def checkpoint(self) -> int:
        """Keep the write-ahead log bounded; returns its size in bytes afterwards (SQLite: a
        passive checkpoint, truncating when the WAL is over its cap; PostgreSQL: 0, the
        server's checkpoints are its own)."""
        ...

    def counts(self) -> DbCounts: ...
