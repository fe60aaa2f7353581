"""PostgreSQL behind the storage port: the same writer thread and group commit as SQLite, over
psycopg 3, so every store runs unchanged on either engine.

Writes: one synchronous connection per process on the shared writer thread
(`app.storage.writer`). Several processes write at once here, so a write transaction that
reads a row it is about to change locks it (`Tx.for_update`), and a batch that deadlocks with
another process, or fails to serialise, is run again from the start.

Reads: an asyncio pool of autocommit, read-only connections. A read on a pooled connection that
turns out broken (the server ended it: a restart, a failover, `pg_terminate_backend`) is run
again on another at once: reads change nothing, so trying one again is always safe.

What counts as "the database cannot be reached" is decided here, once (`connection_broke`):
errors of the connection itself (no SQLSTATE, class 08), the server shutting the session down
(57P01-57P03), a pool that got no connection in time. Stores see them as
`DatabaseUnavailable`; a constraint violation or a bad statement stays what it is.

Rows come back as `Row`s that answer by position and by column name, like `sqlite3.Row`; JSON
columns come back as text, like SQLite's, so records parse them the same way; Python booleans go
in as 0/1 (the schema keeps SQLite's integer flags).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import psycopg.errors
from psycopg.adapt import Dumper
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.types.string import TextLoader
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from app.errors import DatabaseClosed, DatabaseUnavailable
from app.settings import StorageSettings
from app.storage.port import DbCounts, Dialect
from app.storage.postgres.sql import to_postgres
from app.storage.writer import BatchWriter

# The knobs a caller leaves out, as HERMES_DB_* defines them (the service passes its settings).
DEFAULTS = StorageSettings()

log = logging.getLogger(__name__)

_INT8_OID = 20
# The server is ending the session: an operator (57P01, `pg_terminate_backend`), a crash
# (57P02), a start-up or shutdown in progress (57P03).
_SERVER_GOING_AWAY = frozenset({"57P01", "57P02", "57P03"})


def connection_broke(exc: BaseException) -> bool:
    """True when `exc` says the connection (or the server behind it) is gone, not that a
    statement was wrong: what a caller may wait out."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _SERVER_GOING_AWAY


def _went_away(conn: PgConnection) -> bool:
    """The idle writer connection was ended by the server meanwhile: its goodbye (a FATAL
    error, which libpq hands to an idle connection's notice handler) or the end of the stream
    waits unread. Reading what is there costs no round trip."""
    raw = conn.raw
    if raw.closed or conn.ended_by_server:
        return True
    try:
        raw.pgconn.consume_input()  # what the server sent unasked, if anything
        raw.pgconn.is_busy()  # parsed: a goodbye reaches the notice handler
    except psycopg.OperationalError:
        return True
    return bool(raw.closed or conn.ended_by_server)


class Row(tuple[Any, ...]):
    """A result row: by position, by column name, `keys()` — what `sqlite3.Row` offers."""

    __slots__ = ()
    _names: tuple[str, ...] = ()
    _index: dict[str, int] = {}  # noqa: RUF012 - set per column list by `_row_class`

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


_row_classes: dict[tuple[bytes | None, ...], type[Row]] = {}


def _row_class(names: tuple[bytes | None, ...]) -> type[Row]:
    cls = _row_classes.get(names)
    if cls is None:
        decoded = tuple((name or b"?column?").decode() for name in names)
        index = {name: i for i, name in reversed(list(enumerate(decoded)))}  # first one wins
        cls = type("Row", (Row,), {"__slots__": (), "_names": decoded, "_index": index})
        if len(_row_classes) < 4096:
            _row_classes[names] = cls
    return cls


def rows(cursor: Any) -> Any:
    """psycopg row factory making `Row`s. It runs for every result, so it reads the column
    names straight off the result: `cursor.description` builds a Column object per column."""
    result = cursor.pgresult
    if result is None or not result.nfields:
        return tuple
    return _row_class(tuple(result.fname(i) for i in range(result.nfields)))


class _BoolAsInt(Dumper):
    oid = _INT8_OID

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


def _configure(adapters: Any) -> None:
    adapters.register_loader("jsonb", TextLoader)
    adapters.register_loader("json", TextLoader)
    adapters.register_dumper(bool, _BoolAsInt)


class _Piped:
    """A statement's cursor in pipeline mode: rows are fetched when asked for (psycopg does
    that), and `rowcount`, which psycopg leaves unset until results arrive, syncs first."""

    __slots__ = ("_cursor", "_pipeline")

    def __init__(self, cursor: psycopg.Cursor[Any], pipeline: psycopg.Pipeline) -> None:
        self._cursor, self._pipeline = cursor, pipeline

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor.fetchall())

    @property
    def rowcount(self) -> int:
        self._pipeline.sync()
        return self._cursor.rowcount


class PgConnection:
    """The writer connection as the stores see it: `?` placeholders, counting like SQLite's.

    A batch's optimistic pass runs in pipeline mode: a statement whose result nobody reads
    (most writes) costs no round trip of its own, and the writer thread waits — and gives up
    the GIL, and waits again for it behind a busy event loop — only where a job reads."""

    dialect: Dialect = "postgres"

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        self.ended_by_server = False  # a FATAL came while idle: the server ended the session
        raw.add_notice_handler(self._notice)
        self._pipeline_scope: contextlib.AbstractContextManager[psycopg.Pipeline] | None = None
        self.pipeline: psycopg.Pipeline | None = None
        self.statements = 0
        self.control = 0  # transaction control, counted apart from the jobs' statements
        # Lease fences checked (and their rows locked) in the current transaction; None inside
        # savepoints, whose rollback would release the lock (app.storage.fence).
        self.fences_checked: set[Any] | None = None
        self.events = 0
        self.event_bytes = 0

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        self.statements += 1
        cursor = self.raw.execute(to_postgres(sql, bool(parameters)), parameters or None)
        return cursor if self.pipeline is None else _Piped(cursor, self.pipeline)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Any:
        batch = list(parameters)
        self.statements += len(batch)
        cursor = self.raw.cursor()
        if batch:
            cursor.executemany(to_postgres(sql), batch)
        return cursor if self.pipeline is None else _Piped(cursor, self.pipeline)

    def enter_pipeline(self) -> None:
        scope = self.raw.pipeline()
        self.pipeline = scope.__enter__()
        self._pipeline_scope = scope

    def leave_pipeline(self, failed: BaseException | None = None) -> None:
        """Send what is queued and wait for it; raises the first error a statement met,
        unless the batch already `failed` (then the error is the one being handled)."""
        scope, self._pipeline_scope, self.pipeline = self._pipeline_scope, None, None
        if scope is None:
            return
        if failed is None:
            scope.__exit__(None, None, None)
            return
        with contextlib.suppress(Exception):
            scope.__exit__(type(failed), failed, failed.__traceback__)

    def _notice(self, diagnostic: psycopg.errors.Diagnostic) -> None:
        if diagnostic.severity_nonlocalized in ("FATAL", "PANIC"):
            self.ended_by_server = True

    def count_event(self, payload_bytes: int) -> None:
        self.events += 1
        self.event_bytes += payload_bytes

    def close(self) -> None:
        self.raw.close()


def connect(url: str, *, timeout_s: float) -> psycopg.Connection[Any]:
    """A configured autocommit connection (the writer's, the migrations', the tools')."""
    raw: psycopg.Connection[Any] = psycopg.connect(
        url, autocommit=True, row_factory=rows, connect_timeout=max(1, int(timeout_s))
    )
    _configure(raw.adapters)
    return raw


class PostgresDatabase(BatchWriter[PgConnection]):
    dialect: Dialect = "postgres"
    begin_sql = "BEGIN"

    def __init__(
        self,
        url: str,
        *,
        migrations_dir: Path | None = None,
        read_connections: int = DEFAULTS.pool_size,
        write_connections: int = 1,  # one lane unless told (a service: HERMES_DB_WRITE_CONNECTIONS)
        connect_timeout_s: float = DEFAULTS.connect_timeout_s,
    ) -> None:
        super().__init__(lanes=write_connections)
        self.url = url
        self.migrations_dir = migrations_dir
        self.connect_timeout_s = connect_timeout_s
        self._n_readers = max(1, read_connections)
        self._pool: AsyncConnectionPool[Any] | None = None
        self.applied_migrations: list[str] = []
        self._reads = 0

    # -- lifecycle ----------------------------------------------------------------------------

    async def open(self) -> PostgresDatabase:
        if self.migrations_dir is not None:
            self.applied_migrations = await asyncio.to_thread(self._migrate, self.migrations_dir)
        await self._start_writer()
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.url,
            min_size=self._n_readers,
            max_size=self._n_readers,
            open=False,
            kwargs={"autocommit": True, "row_factory": rows},
            configure=_configure_async,
            timeout=max(self.connect_timeout_s, 5.0),
            name="hermes-readers",
        )
        try:
            await pool.open(wait=True, timeout=self.connect_timeout_s)
        except BaseException:
            await pool.close()
            await self._stop_writer()
            raise
        self._pool = pool
        return self

    def _migrate(self, migrations_dir: Path) -> list[str]:
        from app.storage.postgres.migrations import apply_migrations

        with connect(self.url, timeout_s=self.connect_timeout_s) as conn:
            return apply_migrations(conn, migrations_dir)

    async def close(self) -> None:
        if self._closed:
            return
        await self._stop_writer()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> PostgresDatabase:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the writer connection ----------------------------------------------------------------

    def _connect(self) -> PgConnection:
        return PgConnection(connect(self.url, timeout_s=self.connect_timeout_s))

    def _usable(self, conn: Any) -> Any:
        if not _went_away(conn):
            return conn
        log.warning("the PostgreSQL writer connection was lost; reconnecting")
        return self._reconnect(conn)

    def _reconnect(self, conn: Any) -> Any:
        with contextlib.suppress(Exception):
            conn.raw.close()
        fresh = self._connect()
        fresh.statements, fresh.control, fresh.events, fresh.event_bytes = (
            conn.statements,
            conn.control,
            conn.events,
            conn.event_bytes,
        )
        return fresh

    def _in_transaction(self, conn: Any) -> bool:
        if conn.raw.closed:
            return False
        return bool(conn.raw.info.transaction_status != TransactionStatus.IDLE)

    def _retryable(self, exc: BaseException) -> bool:
        return isinstance(
            exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure
        )

    def _unavailable(self, exc: BaseException) -> bool:
        return connection_broke(exc)

    def counts(self) -> DbCounts:
        conns = self._connections()
        return DbCounts(
            commits=self.commits,
            jobs=self._jobs_run,
            writes=sum(c.statements for c in conns),
            control=sum(c.control for c in conns),
            reads=self._reads,
            events=sum(c.events for c in conns),
            event_bytes=sum(c.event_bytes for c in conns),
            retries=self._retries,
            busy_s=self.busy_s,
        )

    def _begin(self, conn: Any, *, isolated: bool) -> None:
        # Lease checks are remembered for the transaction only outside savepoints, whose
        # rollback would free the lock (app.storage.fence).
        conn.fences_checked = None if isolated else set()
        if isolated:  # savepoints, one job at a time: no pipeline
            self._control(conn, self.begin_sql)
            return
        conn.control += 1
        conn.enter_pipeline()
        conn.raw.execute(self.begin_sql)

    def _control(self, conn: Any, sql: str) -> None:
        conn.control += 1
        if conn.pipeline is not None:
            if sql == "COMMIT":
                conn.raw.execute(sql)
                conn.leave_pipeline()  # the batch's first error, if a statement met one
                return
            # ROLLBACK after a failed job: leave pipeline mode, then roll back what ran.
            conn.leave_pipeline(failed=RuntimeError("rolling back"))
            if conn.raw.closed or conn.raw.info.transaction_status == TransactionStatus.IDLE:
                return
        # Straight to libpq: no cursor, no row factory, no parameters to adapt — a third of
        # the client CPU of `execute`, and control is a quarter of the writer's statements.
        raw = conn.raw
        if raw.closed:
            raise psycopg.OperationalError("the connection is closed")
        result = raw.pgconn.exec_(sql.encode())
        if result.status != ExecStatus.COMMAND_OK:
            raise psycopg.errors.error_from_result(result, encoding=raw.info.encoding)

    # -- reads --------------------------------------------------------------------------------

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self._closed or self._pool is None:
            raise DatabaseClosed("database is closed")
        self._reads += 1
        statement = to_postgres(sql, bool(params))
        # Every pooled connection may be a broken one (the server ended them all): each is
        # discarded as it fails, and the read goes on to the next, then to a new one. A pool
        # that gets no connection within its timeout has waited long enough.
        for tries_left in range(self._n_readers, -1, -1):
            try:
                async with self._pool.connection() as conn:
                    cursor = await conn.execute(statement, params or None)
                    found: list[Any] = await cursor.fetchall()
                    return found
            except psycopg.Error as exc:
                if not connection_broke(exc):
                    raise
                if isinstance(exc, PoolTimeout) or not tries_left:
                    raise DatabaseUnavailable() from exc
                log.info("a pooled PostgreSQL connection was broken; reading on another")
        raise AssertionError("unreachable: the last try raises")

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any | None:
        found = await self.fetchall(sql, params)
        return found[0] if found else None

    async def ping(self) -> None:
        await self.fetchone("SELECT 1")

    async def scrub(self, tables: Sequence[str] = ()) -> None:
        """Erased rows out of the tables now: VACUUM each (dead tuples stay readable in the
        files until then). The server's WAL and any archive keep them until recycled; their
        retention is the operator's (docs/operations.md)."""
        await self._vacuum_all(tables)

    async def vacuum(self, table: str) -> None:
        """VACUUM the table on a connection of its own (it can't run in a transaction): the
        index entries of deleted rows — a forgotten memory's trigrams among them — go now, not
        whenever autovacuum comes by."""
        await self._vacuum_all([table])

    async def reclaim(self, pages: int) -> int:
        """Nothing to do: autovacuum marks deleted rows' space reusable (docs/operations.md)."""
        return 0

    async def checkpoint(self) -> int:
        """Nothing to do: the server checkpoints and recycles its WAL itself."""
        return 0

    async def _vacuum_all(self, tables: Sequence[str]) -> None:
        for table in tables:
            if not table.isidentifier():
                raise ValueError(f"not a table name: {table!r}")
        if not tables:
            return

        def run() -> None:
            with connect(self.url, timeout_s=self.connect_timeout_s) as conn:
                for table in tables:
                    conn.execute(f"VACUUM {table}")

        await asyncio.to_thread(run)


async def _configure_async(conn: psycopg.AsyncConnection[Any]) -> None:
    _configure(conn.adapters)
    await conn.execute("SET default_transaction_read_only = on")  # readers only read
    # A reader's statements are a turn's or a page's: milliseconds each. A parallel plan's
    # workers cost more to start than they save on them; with them the knowledge search's p95
    # at 10,000 chunks was 12.3 ms, without 4.6 ms (the planner took a term's thousands of
    # chunks for a handful and gathered them in parallel).
    await conn.execute("SET max_parallel_workers_per_gather = 0")
