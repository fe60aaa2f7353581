"""One worker per busy session runs its turns in order; nothing is held for idle sessions.

A turn runs as a task of its own, not as part of the HTTP request that brought it: a client
that disconnects does not cancel it, and anyone may follow it through the event stream.

Each worker holds its session's `SessionWriter` (app/storage/session_writer.py) and hands it to
everything it and its turn write with: the claims, the turn's pipeline, the turn's end. It names
the session's writer lane, so the session's writes keep their order; with `leases` (several
processes on one database) it also carries the lease's fence while this process holds the
session's lease (a new handle each time the worker takes the lease or lets it go). A worker
runs a session's turns only while it holds the lease: a message accepted here for a session
another live process owns stays queued for that owner. Every write of the worker and its turn
is fenced by the lease (`app.storage.fence`); a worker whose lease was taken over stops without
writing.

A turn whose database goes away (`DatabaseUnavailable`: a broken connection the writer could
not hide) is finished, not failed: the worker waits for the database to answer again and
resumes the turn in this process from what the database holds of it (the stored tool rounds;
tool calls keep their idempotency keys, so none runs twice), within the turn's own time. A
write whose acknowledgement was lost is read back, not redone: the turn may turn out to have
ended already (its followers are then told again). A database that does not come back within
the turn's time leaves the turn `interrupted` with a failed step, resumable by
`POST .../steps/{id}/retry` or a replay of its message (`client_message_id`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from app.conversation.claims import Claims
from app.conversation.interruptions import Interruptions
from app.conversation.ownership import SessionLeases
from app.conversation.turn.pipeline import TurnPipeline
from app.errors import DatabaseUnavailable, Fault, HermesError
from app.observability import metrics
from app.resilience import deadline
from app.storage.fence import Fence, LeaseLost
from app.storage.outage import when_reachable
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.steps import StepStore
from app.storage.turns import Claimed, TurnStore
from app.storage.usage import Usage

log = logging.getLogger(__name__)


@dataclass
class _Worker:
    # What the worker and its turns write with: the session's lane, and the lease's fence while
    # the worker holds it (replaced when it takes the lease or lets it go: `_own`, `_let_go`).
    writer: SessionWriter
    task: asyncio.Task[None] | None = None
    dirty: bool = False
    current: Turn | None = None
    turn_task: asyncio.Task[None] | None = field(default=None, repr=False)
    abort: tuple[str, str] | None = None  # (code, message) when a turn is ended from outside
    ended: bool = False  # the current turn's end is written: nothing left to abort
    lost: bool = False  # another process took the session over: write nothing more
    # A claim's commit lost its acknowledgement: the turn it claimed may be running already.
    unsure: bool = False
    waiting: bool = False  # the current turn waits for its database to answer again


class TurnManager:
    def __init__(
        self,
        *,
        turns: TurnStore,
        sessions: SessionStore,
        pipeline: TurnPipeline,
        turn_timeout_s: float,
        steps: StepStore,
        leases: SessionLeases | None,  # None: one process, no leases (module docstring)
    ) -> None:
        self.steps = steps
        self.leases = leases
        self.turns = turns
        self.sessions = sessions
        self.pipeline = pipeline
        self.turn_timeout_s = turn_timeout_s
        self.claims = Claims(turns, None if leases is None else leases.store)
        self.interruptions = Interruptions(turns)
        self._workers: dict[str, _Worker] = {}
        self._closing = False

    def wake(self, session_id: str) -> None:
        """Make sure a worker will look for queued turns of this session."""
        if self._closing:
            return
        worker = self._workers.get(session_id)
        if worker is not None:
            worker.dirty = True
            return
        worker = _Worker(SessionWriter(session_id))
        self._workers[session_id] = worker
        worker.task = asyncio.create_task(
            self._work(session_id, worker), name=f"turns:{session_id}"
        )

    def running(self, session_id: str) -> Turn | None:
        worker = self._workers.get(session_id)
        return worker.current if worker else None

    def running_turns(self) -> list[str]:
        return [w.current.id for w in self._workers.values() if w.current is not None]

    def forget(self, session_id: str) -> None:
        """The session's cached history is stale or no longer needed."""
        self.pipeline.forget(session_id)

    def active_sessions(self) -> int:
        return len(self._workers)

    async def _work(self, session_id: str, worker: _Worker) -> None:
        try:
            while not self._closing:
                worker.dirty = False
                claimed = await when_reachable(
                    lambda: self._claim(session_id, worker), f"session {session_id}"
                )
                if claimed is None:
                    if worker.dirty:
                        continue
                    return
                turn = claimed.turn
                worker.current = turn
                worker.abort = None
                worker.ended = False
                worker.turn_task = asyncio.create_task(
                    self._run(worker.writer, turn, claimed.user_id, worker), name=turn.id
                )
                try:
                    await asyncio.shield(worker.turn_task)
                except asyncio.CancelledError:
                    me = asyncio.current_task()
                    if me is None or me.cancelling():  # the worker itself is being stopped
                        worker.turn_task.cancel()
                        await asyncio.gather(worker.turn_task, return_exceptions=True)
                        raise
                    # Only the turn's task was cancelled: an abort that came as the turn was
                    # ending. Its end is written; the worker goes on.
                finally:
                    worker.current = None
                    worker.turn_task = None
                if worker.lost:
                    return
                # Nothing was queued behind this turn and nothing has been accepted since
                # (`wake` would have said so): no need to ask the database again (without
                # leases; with them, the claim that finds nothing is the one that lets go).
                if not claimed.more and not worker.dirty and worker.writer.fence is None:
                    return
        except LeaseLost:
            worker.lost = True
            log.warning("session %s was taken over by another process", session_id)
        finally:
            if self._workers.get(session_id) is worker:
                del self._workers[session_id]
            await self._let_go(worker)

    async def _claim(self, session_id: str, worker: _Worker) -> Claimed | None:
        if worker.unsure:  # the last claim may have been stored: its turn is this worker's
            adopted = await self.claims.adopt(
                session_id, None if self.leases is None else self.leases.owner
            )
            worker.unsure = False
            if adopted is not None:
                claimed, token = adopted
                if token is not None:
                    assert self.leases is not None
                    self._own(worker, session_id, Fence(session_id, self.leases.owner, token))
                log.warning("turn %s: its claim was stored, its answer lost", claimed.turn.id)
                return claimed
        try:
            return await self._claim_next(session_id, worker)
        except DatabaseUnavailable as exc:
            worker.unsure = exc.stored is None
            raise

    async def _claim_next(self, session_id: str, worker: _Worker) -> Claimed | None:
        if self.leases is None:
            return await self.claims.next(worker.writer)
        owned = await self.claims.owned(
            worker.writer, owner=self.leases.owner, ttl_s=self.leases.config.ttl_s
        )
        for turn_id in owned.interrupted:
            log.warning("turn %s was interrupted: the process running it stopped", turn_id)
        self._own(worker, session_id, owned.fence)
        return owned.claimed

    def _own(self, worker: _Worker, session_id: str, fence: Fence | None) -> None:
        """The worker holds the session's lease under `fence` (None: it let go)."""
        assert self.leases is not None
        # Its writes, and its turns', carry the lease from now on (or none once it let go;
        # then it ends, or takes the lease again for a message accepted meanwhile).
        worker.writer = SessionWriter(session_id, fence)
        if fence is None:
            self.leases.owned.pop(session_id, None)
        else:
            self.leases.owned[session_id] = fence.token

    async def _let_go(self, worker: _Worker) -> None:
        """The worker ends still holding its lease (shut down, cancelled): release it, so that
        another process takes over what is left at once rather than when it expires."""
        held = worker.writer.fence
        worker.writer = SessionWriter(worker.writer.session_id)
        if held is None or self.leases is None:
            return
        if self.leases.owned.get(held.session_id) == held.token:
            del self.leases.owned[held.session_id]
        if worker.lost:
            return
        try:
            await self.leases.store.release(held)
        except Exception:  # the database is closing, or the lease is gone: it will expire
            log.debug("could not release the lease of session %s", held.session_id, exc_info=True)

    async def lose(self, session_id: str, token: int) -> None:
        """The lease of the session (under `token`) was lost: stop its worker, writing nothing
        (the turn belongs to the new owner now)."""
        worker = self._workers.get(session_id)
        fence = None if worker is None else worker.writer.fence
        if worker is None or fence is None or fence.token != token:
            return
        worker.lost = True
        log.warning("session %s was taken over by another process; stopping here", session_id)
        if worker.task is not None:
            worker.task.cancel()
            await asyncio.gather(worker.task, return_exceptions=True)

    async def abort(self, turn_id: str, code: str, message: str) -> bool:
        """End a running turn from outside (e.g. the watchdog); the session carries on. False
        when the turn is not running here, or its end is already written (it is only tidying
        up: cancelling that would cut its steps' closing short, and the worker with it)."""
        running = self._running(turn_id)
        if running is None:
            return False
        # Ended already (its end committed, the worker not yet told)? Then there is nothing to
        # abort: the caller saw that end, or will.
        stored = await self.turns.get(running[1].session_id, turn_id)
        if stored is None or stored.finished or (running := self._running(turn_id)) is None:
            return False
        worker, task = running[0], running[2]
        if worker.abort is None:  # (a second abort waits for the first: one end, once)
            worker.abort = (code, message)
            task.cancel()
        await asyncio.wait({task})  # (the caller's own cancel does not reach the turn)
        return True

    def _running(self, turn_id: str) -> tuple[_Worker, Turn, asyncio.Task[None]] | None:
        """The worker running `turn_id` (with the turn and its task), until its end is written."""
        for worker in self._workers.values():
            current, task = worker.current, worker.turn_task
            if current is not None and current.id == turn_id and task is not None:
                return None if worker.ended else (worker, current, task)
        return None

    async def _run(self, writer: SessionWriter, turn: Turn, user_id: str, worker: _Worker) -> None:
        """Run the claimed turn, writing with `writer` (the worker's when it claimed it)."""
        started = asyncio.get_running_loop().time()
        status = "failed"
        used = Usage()  # what the turn's model calls used: stored however the turn ends
        stopping = False  # cancelled: end writes get one try (a shutdown must not hang on them)
        try:
            async with asyncio.timeout(self.turn_timeout_s) as limit:
                token = deadline.bind(limit)
                try:
                    status = await self._run_through_outages(writer, turn, user_id, used, worker)
                finally:
                    deadline.unbind(token)
        except TimeoutError:
            if not worker.waiting:
                why = f"the turn did not finish within {self.turn_timeout_s:g}s"
                try:
                    await self.turns.fail(writer, turn, "turn_timeout", why, usage=used)
                except DatabaseUnavailable:  # away too: what held the turn up, most likely
                    worker.waiting = True
            if worker.waiting:  # for a database that did not come back in time
                await self._store_end(
                    turn, lambda: self.interruptions.unreachable(writer, turn, used)
                )
        except LeaseLost:  # (a Fault: caught before them)
            worker.lost = True  # the new owner ends this turn; this process writes nothing more
            log.warning("turn %s stopped: its session was taken over", turn.id)
        except Fault:
            log.exception("turn %s failed unexpectedly", turn.id)
            await self._store_end(turn, lambda: self._failed_unexpectedly(writer, turn, used))
        except HermesError as exc:  # the model failed, a limit was hit...: the caller's words
            code, message = exc.code, exc.message
            await self._store_end(
                turn, lambda: self.turns.fail(writer, turn, code, message, usage=used)
            )
        except asyncio.CancelledError:
            stopping = True
            if worker.lost:
                raise
            if worker.abort is not None:
                await self._store_end_once(
                    turn, self.turns.fail(writer, turn, *worker.abort, usage=used)
                )
                return  # this turn is over; the worker goes on with the next one
            if self._closing:  # resumable: a retry, or a replay of its message, goes on
                await self._store_end_once(turn, self.interruptions.shut_down(writer, turn, used))
            else:
                await self._store_end_once(
                    turn,
                    self.turns.fail(
                        writer, turn, "cancelled", "the turn was cancelled", usage=used
                    ),
                )
            raise
        except Exception:
            log.exception("turn %s failed unexpectedly", turn.id)
            await self._store_end(turn, lambda: self._failed_unexpectedly(writer, turn, used))
        finally:
            worker.ended = True
            worker.waiting = False
            if status != "completed" and not worker.lost:
                if stopping:
                    await self._store_end_once(turn, self.steps.close_open(writer, turn.id))
                else:
                    await self._store_end(turn, lambda: self.steps.close_open(writer, turn.id))
            seconds = asyncio.get_running_loop().time() - started
            metrics.turn_finished(turn.tenant_id, status, seconds)

    async def _run_through_outages(
        self, writer: SessionWriter, turn: Turn, user_id: str, used: Usage, worker: _Worker
    ) -> str:
        """Run the turn; each time its database goes away, wait for it to answer again and
        resume the turn from what the database holds of it (module docstring). The status the
        turn ended with."""
        while True:
            try:
                await self.pipeline.run(writer, turn, user_id, used)
                return "completed"
            except DatabaseUnavailable as exc:
                log.warning("turn %s lost its database (%s); it resumes when back", turn.id, exc)
            worker.waiting = True
            # The session's cached view may hold rows that were never stored: read it anew.
            self.pipeline.forget(turn.session_id)
            found = await when_reachable(
                functools.partial(self.interruptions.resume_after_outage, writer, turn),
                f"turn {turn.id}",
            )
            worker.waiting = False
            if found is None:  # its session was deleted meanwhile
                return "failed"
            if found.status != "running":
                # Its end was stored after all (a lost acknowledgement), or another hand ended
                # it: the events of that commit were never published; followers are told now.
                log.warning("turn %s had ended (%s) by the time it was back", turn.id, found.status)
                await when_reachable(
                    functools.partial(self.turns.announce_latest, turn.session_id),
                    f"turn {turn.id}",
                )
                return found.status
            log.warning("turn %s resumes from step %s", turn.id, found.resume_from_step)
            turn = worker.current = found

    async def _failed_unexpectedly(self, writer: SessionWriter, turn: Turn, used: Usage) -> None:
        await self.turns.fail(
            writer, turn, "internal_error", "the turn failed; see the service logs", usage=used
        )

    @staticmethod
    async def _store_end(turn: Turn, write: Callable[[], Awaitable[object]]) -> None:
        """Store how the turn ended, waiting for the database if it is away (the turn's end is
        what its waiting client and followers need; nothing else of the worker goes on before
        it). A lease lost meanwhile still stops the worker (it raises)."""
        await when_reachable(write, f"the end of turn {turn.id}")

    @staticmethod
    async def _store_end_once(turn: Turn, write: Awaitable[object]) -> None:
        """Store how a cancelled turn ended, trying once: with the database away, the turn stays
        running in the database, and the next start (or another process's sweep, once this
        one's lease expires) ends it `interrupted`, resumable."""
        try:
            await write
        except DatabaseUnavailable:
            log.warning("the end of turn %s could not be stored: the database is away", turn.id)

    async def cancel(self, session_id: str, code: str = "cancelled", message: str = "") -> None:
        """Stop the session's worker; a running turn fails with `code` (e.g. before the
        session is deleted)."""
        worker = self._workers.get(session_id)
        if worker is None or worker.task is None:
            return
        worker.abort = (code, message or "the turn was cancelled")
        worker.task.cancel()
        await asyncio.gather(worker.task, return_exceptions=True)

    async def shutdown(self, grace_s: float = 10.0) -> None:
        """Let running turns finish for up to `grace_s`, then cancel what is left."""
        self._closing = True
        tasks = [w.task for w in self._workers.values() if w.task is not None]
        if not tasks:
            return
        _done, pending = await asyncio.wait(tasks, timeout=grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def resume_queued(self) -> None:
        """At start-up: turns accepted but never started run now. With leases, so do the
        sessions no live process owns (their turns left running end as `interrupted`)."""
        if self.leases is None:
            for session_id in await self.turns.queued_sessions():
                self.wake(session_id)
            return
        await self.sweep()

    async def sweep(self) -> list[str]:
        """Take over the sessions with queued or running turns that no live process owns; the
        sessions woken."""
        assert self.leases is not None
        woken = [s for s in await self.leases.unowned() if s not in self._workers]
        for session_id in woken:
            self.wake(session_id)
        return woken

    async def renew(self) -> None:
        """Keep this process's leases; stop the workers of those it lost."""
        assert self.leases is not None
        for session_id, token in (await self.leases.renew()).items():
            await self.lose(session_id, token)
