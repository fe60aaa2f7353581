"""One writer thread per database with group commit — the part both engines share.

All writes go through `write(fn)`: `fn(conn)` runs on the single writer thread inside a
transaction, and whatever jobs queued up meanwhile commit together (one commit, one thread hop).
A job that fails fails alone: the batch is then run again with each job in a savepoint. A
job's `on_commit` callback runs on the event loop after the commit, in commit order, before its
awaiting caller resumes: publishing an event there means nobody ever sees an event that a
crash could take back.

An engine that reports conflicts between writers (PostgreSQL: a deadlock with another process,
a serialisation failure) gets the whole batch run again from the start, a few times; jobs are
functions of the connection only, so running one again is safe.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.errors import DatabaseClosed

log = logging.getLogger(__name__)

T = TypeVar("T")
C = TypeVar("C")  # the engine's writer connection
_MAX_BATCH = 512
_MAX_ATTEMPTS = 5


@dataclass
class _Job(Generic[T]):
    fn: Callable[[Any], T]
    future: asyncio.Future[T]
    on_commit: Callable[[T], None] | None


Outcome = tuple[_Job[Any], Any, BaseException | None]


class BatchWriter(Generic[C]):
    """The writer thread and its job queue; engines say how to connect and begin."""

    begin_sql = "BEGIN"
    thread_name = "hermes-db-writer"

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = True
        self.commits = 0  # batches committed, for metrics and tests
        self._jobs_run = 0
        self._control_statements = 0
        self._retries = 0
        self.busy_s = 0.0  # time spent running batches: near all of it = writes queue up

    # -- what an engine provides ---------------------------------------------------------------

    def _connect(self) -> Any:
        """Open the writer connection (runs on the writer thread)."""
        raise NotImplementedError

    def _close_connection(self, conn: Any) -> None:
        conn.close()

    def _in_transaction(self, conn: Any) -> bool:
        raise NotImplementedError

    def _usable(self, conn: Any) -> Any:
        """The connection to run the next batch on (an engine may reconnect a lost one)."""
        return conn

    def _retryable(self, exc: BaseException) -> bool:
        """True for errors that mean "another writer got in the way: run the batch again"."""
        return False

    def _begin(self, conn: Any, *, isolated: bool) -> None:
        """Start a batch's transaction; `isolated`: its jobs will run in savepoints."""
        self._control(conn, self.begin_sql)

    # -- lifecycle -------------------------------------------------------------------------------

    async def _start_writer(self) -> None:
        self._loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(
            target=self._writer_main, args=(ready,), name=self.thread_name, daemon=True
        )
        self._closed = False
        self._thread.start()
        try:
            await ready
        except BaseException:
            self._closed = True
            raise

    async def _stop_writer(self) -> None:
        self._closed = True
        self._jobs.put(None)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    # -- writes ----------------------------------------------------------------------------------

    def submit(
        self,
        fn: Callable[[C], T],
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
        fn: Callable[[C], T],
        on_commit: Callable[[T], None] | None = None,
    ) -> T:
        # shield: a cancelled caller must not make the job look failed; it still commits.
        return await asyncio.shield(self.submit(fn, on_commit))

    def _writer_main(self, ready: asyncio.Future[None]) -> None:
        loop = self._loop
        assert loop is not None
        try:
            conn = self._connect()
        except Exception as exc:
            loop.call_soon_threadsafe(_fail, ready, exc)
            return
        loop.call_soon_threadsafe(_succeed, ready)
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
                started = time.perf_counter()
                try:
                    conn = self._usable(conn)
                except Exception as exc:
                    log.error("the database cannot be reached: %s", exc)
                    outcomes: list[Outcome] = [(j, None, exc) for j in batch]
                else:
                    outcomes = self._run_batch(conn, batch)
                self.busy_s += time.perf_counter() - started
                loop.call_soon_threadsafe(_deliver, outcomes)
                if stop:
                    break
        finally:
            self._close_connection(conn)

    def _run_batch(self, conn: Any, batch: list[_Job[Any]]) -> list[Outcome]:
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            try:
                outcomes = self._attempt(conn, batch, last=attempt == _MAX_ATTEMPTS)
            except Exception as exc:  # transaction control itself failed: nothing committed
                log.exception("write batch of %d jobs failed outside its jobs", len(batch))
                try:
                    if self._in_transaction(conn):
                        self._control(conn, "ROLLBACK")
                except Exception:
                    log.exception("rollback after a failed batch failed too")
                return [(job, None, exc) for job in batch]
            if outcomes is not None:
                return outcomes
            self._retries += 1
            log.info("write batch of %d jobs met a conflict; attempt %d", len(batch), attempt)
        raise AssertionError("unreachable: the last attempt never retries")

    def _attempt(self, conn: Any, batch: list[_Job[Any]], *, last: bool) -> list[Outcome] | None:
        """The batch's outcomes, or None: it met a conflict, nothing committed, run it again.

        The jobs run first one after the other in the batch's transaction, with no savepoints
        (each savepoint is two more statements, a round trip each on a server). Only if one
        of them fails is the transaction rolled back and the batch run again with a savepoint
        around every job, so the failure stays the failing job's own."""
        try:
            self._begin(conn, isolated=False)
        except Exception as exc:
            return [(job, None, exc) for job in batch]
        self._jobs_run += len(batch)
        outcomes: list[Outcome] = []
        for job in batch:
            try:
                result = job.fn(conn)
            except BaseException as exc:
                self._control(conn, "ROLLBACK")
                if not last and self._retryable(exc):
                    return None
                if len(batch) == 1:
                    return [(job, None, exc)]
                return self._isolated(conn, batch, last=last)
            outcomes.append((job, result, None))
        return self._commit(conn, batch, outcomes, last=last, isolate=len(batch) > 1)

    def _isolated(self, conn: Any, batch: list[_Job[Any]], *, last: bool) -> list[Outcome] | None:
        """The batch again, each job in a savepoint: the failing ones roll back alone."""
        try:
            self._begin(conn, isolated=True)
        except Exception as exc:
            return [(job, None, exc) for job in batch]
        outcomes: list[Outcome] = []
        for job in batch:
            self._control(conn, "SAVEPOINT job")
            try:
                result = job.fn(conn)
            except BaseException as exc:
                if not last and self._retryable(exc):
                    self._control(conn, "ROLLBACK")
                    return None
                self._control(conn, "ROLLBACK TO job")
                self._control(conn, "RELEASE job")
                outcomes.append((job, None, exc))
            else:
                self._control(conn, "RELEASE job")
                outcomes.append((job, result, None))
        return self._commit(conn, batch, outcomes, last=last)

    def _commit(
        self,
        conn: Any,
        batch: list[_Job[Any]],
        outcomes: list[Outcome],
        *,
        last: bool,
        isolate: bool = False,
    ) -> list[Outcome] | None:
        """Commit; if that fails and `isolate`, the batch again in savepoints: an engine that
        reports a statement's error only at the commit (PostgreSQL's pipeline) still fails
        only the job that ran it."""
        try:
            self._control(conn, "COMMIT")
            self.commits += 1
        except Exception as exc:
            if self._in_transaction(conn):
                self._control(conn, "ROLLBACK")
            if not last and self._retryable(exc):
                return None
            if isolate:
                return self._isolated(conn, batch, last=last)
            log.exception("commit failed; rolling back a batch of %d jobs", len(batch))
            return [(job, None, exc) for job in batch]
        return outcomes

    def _control(self, conn: Any, sql: str) -> None:
        self._control_statements += 1
        conn.execute(sql)


def _succeed(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def _fail(ready: asyncio.Future[None], exc: BaseException) -> None:
    if not ready.done():
        ready.set_exception(exc)


def _deliver(outcomes: list[Outcome]) -> None:
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
