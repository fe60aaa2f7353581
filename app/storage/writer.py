"""Writer threads with group commit — the part both engines share.

All writes go through `write(fn)`: `fn(conn)` runs on a writer thread inside a transaction, and
whatever jobs queued up on that thread meanwhile commit together (one commit, one thread hop).
A job that fails fails alone: the batch is then run again with each job in a savepoint. A
job's `on_commit` callback runs on the event loop after the commit, in commit order, before its
awaiting caller resumes: publishing an event there means nobody ever sees an event that a
crash could take back.

A batch may run more than once (a failing job, a conflict, a connection lost before COMMIT),
so a job is a function of the connection: it returns what it produced and changes nothing
outside the database. What it produced reaches its owner only after the commit, on the event
loop (its future, its `on_commit`), never from the writer thread, where an attempt that is
rolled back would leave it behind. A job that turns a request down returns its refusal
(`app.storage.tx.Refused`) instead of raising it: raised, it would run the batch again.

An engine may run several writer threads, each with its connection (*lanes*: PostgreSQL's
round trips leave one thread waiting most of the time). Every write names its `SessionWriter`
(app/storage/session_writer.py): the job goes to the lane of the session it writes for, so one
session's writes keep their submission order and commit order; writes of no one session
(`NO_SESSION`) go to the first lane, in order too. A handle with a lease's fence gets the fence
checked first inside the job's transaction (`app.storage.fence.check`). Nothing orders the
writes of different sessions against each other, and nothing needs to: a caller that needs one
write before another awaits it. SQLite runs one lane (it admits one writer at a time anyway).

An engine that reports conflicts between writers (PostgreSQL: a deadlock with another process,
a serialisation failure) gets the whole batch run again from the start, a few times; jobs are
functions of the connection (above), so running one again is safe.

A connection that breaks (the engine says which errors mean that: `_unavailable`) is told apart
by *when* it broke. Before the batch's COMMIT was sent, nothing of the batch can have been
applied: the batch runs again on a new connection, a few times within about a second, and only
if the database still cannot be reached does every job fail with `DatabaseUnavailable`
(`stored=False`). During the COMMIT, the batch may or may not have been applied (the
acknowledgement is what was lost): it is never run again blindly; every job fails with
`DatabaseUnavailable(stored=None)`, and whoever wrote it reads the database to learn what is
there (a turn resumes from what its rows say: app/conversation/manager.py).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.errors import DatabaseClosed, DatabaseUnavailable, InternalError
from app.storage import fence as fences
from app.storage.session_writer import SessionWriter

log = logging.getLogger(__name__)

T = TypeVar("T")
C = TypeVar("C")  # the engine's writer connection
_MAX_BATCH = 512
_MAX_ATTEMPTS = 5
# Pauses before running a batch again on a new connection, after its connection broke before
# the commit: a connection killed under an idle writer costs the first, immediate one.
_RECONNECT_PAUSES_S = (0.0, 0.1, 0.25, 0.6)


@dataclass
class _Job(Generic[T]):
    fn: Callable[[Any], T]
    future: asyncio.Future[T]
    on_commit: Callable[[T], None] | None


Outcome = tuple[_Job[Any], Any, BaseException | None]


class _Lost(InternalError):
    """The connection broke before the batch's COMMIT was sent: nothing of it was applied."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def unavailable_error(cause: BaseException, *, stored: bool | None) -> DatabaseUnavailable:
    """The `DatabaseUnavailable` a job fails with, the driver's error as its cause."""
    error = DatabaseUnavailable(stored=stored)
    error.__cause__ = cause
    return error


class Lane:
    """One writer thread, its connection, its queue and what went through it. Its counters
    are only ever bumped by its own thread, so counting costs no lock."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.conn: Any = None
        self.commits = 0
        self.jobs_run = 0
        self.retries = 0
        self.reconnects = 0  # batches run again on a new connection after theirs broke
        self.busy_s = 0.0


class BatchWriter(Generic[C]):
    """The writer threads and their job queues; engines say how to connect and begin."""

    begin_sql = "BEGIN"
    thread_name = "hermes-db-writer"

    def __init__(self, lanes: int = 1) -> None:
        self._lanes = [Lane(i) for i in range(max(1, lanes))]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = True

    # -- what went through, summed over the lanes ------------------------------------------------

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    @property
    def commits(self) -> int:
        """Batches committed, for metrics and tests."""
        return sum(lane.commits for lane in self._lanes)

    @property
    def _jobs_run(self) -> int:
        return sum(lane.jobs_run for lane in self._lanes)

    @property
    def _retries(self) -> int:
        return sum(lane.retries for lane in self._lanes)

    @property
    def reconnects(self) -> int:
        """Batches run again on a new connection because theirs broke before the commit."""
        return sum(lane.reconnects for lane in self._lanes)

    @property
    def busy_s(self) -> float:
        """Time the writer threads spent running batches, summed: near lanes x wall time
        means writes queue up."""
        return sum(lane.busy_s for lane in self._lanes)

    def _connections(self) -> list[Any]:
        return [lane.conn for lane in self._lanes if lane.conn is not None]

    # -- what an engine provides ---------------------------------------------------------------

    def _connect(self) -> Any:
        """Open a writer connection (runs on its writer thread)."""
        raise NotImplementedError

    def _close_connection(self, conn: Any) -> None:
        conn.close()

    def _in_transaction(self, conn: Any) -> bool:
        raise NotImplementedError

    def _usable(self, conn: Any) -> Any:
        """The connection to run the next batch on (an engine may reconnect a lost one)."""
        return conn

    def _reconnect(self, conn: Any) -> Any:
        """A new connection in place of `conn`, which broke (an engine that can't reconnect
        gives `conn` back: the batch is tried on it again)."""
        return conn

    def _retryable(self, exc: BaseException) -> bool:
        """True for errors that mean "another writer got in the way: run the batch again"."""
        return False

    def _unavailable(self, exc: BaseException) -> bool:
        """True for errors that mean "the database cannot be reached": the connection broke,
        the server is going away (not a constraint, not a bug in a job)."""
        return False

    def _begin(self, conn: Any, *, isolated: bool) -> None:
        """Start a batch's transaction; `isolated`: its jobs will run in savepoints."""
        self._control(conn, self.begin_sql)

    # -- lifecycle -------------------------------------------------------------------------------

    async def _start_writer(self) -> None:
        self._loop = asyncio.get_running_loop()
        readies: list[asyncio.Future[None]] = []
        self._closed = False
        for one in self._lanes:
            ready: asyncio.Future[None] = self._loop.create_future()
            name = self.thread_name if one.index == 0 else f"{self.thread_name}-{one.index}"
            one.thread = threading.Thread(
                target=self._writer_main, args=(one, ready), name=name, daemon=True
            )
            one.thread.start()
            readies.append(ready)
        try:
            await asyncio.gather(*readies)
        except BaseException:
            await self._stop_writer()
            raise

    async def _stop_writer(self) -> None:
        self._closed = True
        for one in self._lanes:
            one.jobs.put(None)
        for one in self._lanes:
            if one.thread is not None:
                await asyncio.to_thread(one.thread.join)

    # -- writes ----------------------------------------------------------------------------------

    def submit(
        self,
        writer: SessionWriter | None,
        fn: Callable[[C], T],
        on_commit: Callable[[T], None] | None = None,
    ) -> asyncio.Future[T]:
        """Queue a write job on `writer`'s lane, its fence checked first in the transaction
        (`NO_SESSION`: the first lane, no fence); the returned future resolves after its batch
        commits."""
        if self._closed or self._loop is None:
            raise DatabaseClosed("database is closed")
        future: asyncio.Future[T] = self._loop.create_future()
        if writer is None:
            self._lanes[0].jobs.put(_Job(fn, future, on_commit))
            return future
        job = fn if writer.fence is None else _fenced(writer.fence, fn)
        self._lanes[self.lane_of(writer.session_id)].jobs.put(_Job(job, future, on_commit))
        return future

    def lane_of(self, session_id: str | None) -> int:
        """The lane the writes of `session_id` go to (None: of no one session, the first)."""
        if session_id is None or len(self._lanes) == 1:
            return 0
        return zlib.crc32(session_id.encode()) % len(self._lanes)

    async def write(
        self,
        writer: SessionWriter | None,
        fn: Callable[[C], T],
        on_commit: Callable[[T], None] | None = None,
    ) -> T:
        return await shielded(self.submit(writer, fn, on_commit))

    def _writer_main(self, one: Lane, ready: asyncio.Future[None]) -> None:
        loop = self._loop
        assert loop is not None
        try:
            one.conn = self._connect()
        except Exception as exc:
            loop.call_soon_threadsafe(_fail, ready, exc)
            return
        loop.call_soon_threadsafe(_succeed, ready)
        try:
            while True:
                job = one.jobs.get()
                if job is None:
                    break
                batch = [job]
                stop = False
                while len(batch) < _MAX_BATCH:
                    try:
                        more = one.jobs.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    batch.append(more)
                started = time.perf_counter()
                outcomes = self._run_batch(one, batch)
                one.busy_s += time.perf_counter() - started
                loop.call_soon_threadsafe(_deliver, outcomes)
                if stop:
                    break
        finally:
            self._close_connection(one.conn)

    def _run_batch(self, one: Lane, batch: list[_Job[Any]]) -> list[Outcome]:
        attempt = 0
        pauses = iter(_RECONNECT_PAUSES_S)
        while True:
            attempt += 1
            try:
                one.conn = self._usable(one.conn)
                outcomes = self._attempt(one, batch, last=attempt >= _MAX_ATTEMPTS)
            except Exception as exc:
                lost = self._lost(exc)
                if lost is None:  # transaction control itself failed: nothing committed
                    log.exception("write batch of %d jobs failed outside its jobs", len(batch))
                    try:
                        if self._in_transaction(one.conn):
                            self._control(one.conn, "ROLLBACK")
                    except Exception:
                        log.exception("rollback after a failed batch failed too")
                    return [(job, None, exc) for job in batch]
                pause = next(pauses, None)
                if pause is None:
                    log.error("the database cannot be reached: %s", lost.cause)
                    unreachable = unavailable_error(lost.cause, stored=False)
                    return [(job, None, unreachable) for job in batch]
                log.warning(
                    "the database connection broke before a batch of %d jobs committed;"
                    " running it again on a new connection: %s",
                    len(batch),
                    lost.cause,
                )
                self._fresh_connection(one, pause)
                continue
            if outcomes is not None:
                return outcomes
            one.retries += 1
            log.info("write batch of %d jobs met a conflict; attempt %d", len(batch), attempt)

    def _fresh_connection(self, one: Lane, pause_s: float) -> None:
        """After `pause_s`, a new connection for the lane (its old one broke); one that can't be
        had leaves the old one, and the batch's next try fails on it (it is lost again)."""
        try:
            if self._in_transaction(one.conn):
                self._control(one.conn, "ROLLBACK")
        except Exception:
            log.debug("rollback on a broken connection failed", exc_info=True)
        if pause_s:
            time.sleep(pause_s)
        try:
            one.conn = self._reconnect(one.conn)
        except Exception as exc:
            log.warning("could not reconnect to the database: %s", exc)
        one.reconnects += 1

    def _lost(self, exc: BaseException) -> _Lost | None:
        """`exc`, met before the COMMIT was sent, as a broken connection (None: it isn't one)."""
        if isinstance(exc, _Lost):
            return exc
        return _Lost(exc) if self._unavailable(exc) else None

    def _attempt(self, one: Lane, batch: list[_Job[Any]], *, last: bool) -> list[Outcome] | None:
        """The batch's outcomes, or None: it met a conflict, nothing committed, run it again.

        The jobs run first one after the other in the batch's transaction, with no savepoints
        (each savepoint is two more statements, a round trip each on a server). Only if one
        of them fails is the transaction rolled back and the batch run again with a savepoint
        around every job, so the failure stays the failing job's own."""
        conn = one.conn
        try:
            self._begin(conn, isolated=False)
        except Exception as exc:
            if (lost := self._lost(exc)) is not None:
                raise lost from exc
            return [(job, None, exc) for job in batch]
        one.jobs_run += len(batch)
        outcomes: list[Outcome] = []
        for job in batch:
            try:
                result = job.fn(conn)
            except BaseException as exc:
                if (lost := self._lost(exc)) is not None:
                    raise lost from exc
                self._control(conn, "ROLLBACK")
                if not last and self._retryable(exc):
                    return None
                if len(batch) == 1:
                    return [(job, None, exc)]
                return self._isolated(one, batch, last=last)
            outcomes.append((job, result, None))
        return self._commit(one, batch, outcomes, last=last, isolate=len(batch) > 1)

    def _isolated(self, one: Lane, batch: list[_Job[Any]], *, last: bool) -> list[Outcome] | None:
        """The batch again, each job in a savepoint: the failing ones roll back alone."""
        conn = one.conn
        try:
            self._begin(conn, isolated=True)
        except Exception as exc:
            if (lost := self._lost(exc)) is not None:
                raise lost from exc
            return [(job, None, exc) for job in batch]
        outcomes: list[Outcome] = []
        for job in batch:
            self._control(conn, "SAVEPOINT job")
            try:
                result = job.fn(conn)
            except BaseException as exc:
                if (lost := self._lost(exc)) is not None:
                    raise lost from exc
                if not last and self._retryable(exc):
                    self._control(conn, "ROLLBACK")
                    return None
                self._control(conn, "ROLLBACK TO job")
                self._control(conn, "RELEASE job")
                outcomes.append((job, None, exc))
            else:
                self._control(conn, "RELEASE job")
                outcomes.append((job, result, None))
        return self._commit(one, batch, outcomes, last=last)

    def _commit(
        self,
        one: Lane,
        batch: list[_Job[Any]],
        outcomes: list[Outcome],
        *,
        last: bool,
        isolate: bool = False,
    ) -> list[Outcome] | None:
        """Commit; if that fails and `isolate`, the batch again in savepoints: an engine that
        reports a statement's error only at the commit (PostgreSQL's pipeline) still fails
        only the job that ran it."""
        conn = one.conn
        try:
            self._control(conn, "COMMIT")
            one.commits += 1
        except Exception as exc:
            if self._unavailable(exc):
                # The acknowledgement is what broke: the batch may be stored. Never run it
                # again blind; its writers read the database to know (module docstring).
                log.error(
                    "the database connection broke while a batch of %d jobs committed;"
                    " it may or may not be stored: %s",
                    len(batch),
                    exc,
                )
                unknown = unavailable_error(exc, stored=None)
                return [(job, None, unknown) for job in batch]
            if self._in_transaction(conn):
                self._control(conn, "ROLLBACK")
            if not last and self._retryable(exc):
                return None
            if isolate:
                return self._isolated(one, batch, last=last)
            log.exception("commit failed; rolling back a batch of %d jobs", len(batch))
            return [(job, None, exc) for job in batch]
        return outcomes

    def _control(self, conn: Any, sql: str) -> None:
        conn.control += 1  # transaction control, counted apart from the jobs' statements
        conn.execute(sql)


def _fenced(fence: fences.Fence, fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """`fn`, run only while `fence` still holds its session's lease (else `LeaseLost`)."""

    def job(conn: Any) -> T:
        fences.check(conn, fence)
        return fn(conn)

    return job


async def shielded(write: asyncio.Future[T]) -> T:
    """Wait for a submitted write; a cancelled caller must not make the job look failed (it
    still commits). If it fails after its caller left, the failure is logged, not left for
    garbage collection to complain of."""
    try:
        return await asyncio.shield(write)
    except asyncio.CancelledError:
        write.add_done_callback(_left_behind)
        raise


def _left_behind(write: asyncio.Future[Any]) -> None:
    if not write.cancelled() and write.exception() is not None:
        log.warning("a write whose caller was cancelled failed: %s", write.exception())


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
