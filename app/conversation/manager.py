"""One worker per busy session runs its turns in order; nothing is held for idle sessions.

A turn runs as a task of its own, not as part of the HTTP request that brought it: a client
that disconnects does not cancel it, and anyone may follow it through the event stream.

With `leases` (several processes on one database), a worker runs a session's turns only while
this process holds the session's lease: a message accepted here for a session another live
process owns stays queued for that owner. Every write of the worker and its turn is fenced by
the lease (`app.storage.fence`); a worker whose lease was taken over stops without writing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from app.conversation.ownership import SessionLeases
from app.conversation.runner import TurnRunner
from app.errors import Fault, HermesError
from app.observability import metrics
from app.resilience import deadline
from app.storage import fence as fences
from app.storage import writer
from app.storage.fence import Fence, LeaseLost
from app.storage.records import Turn
from app.storage.sessions import SessionStore
from app.storage.steps import StepStore
from app.storage.turns import Claimed, TurnStore
from app.storage.usage import Usage

log = logging.getLogger(__name__)


@dataclass
class _Worker:
    task: asyncio.Task[None] | None = None
    dirty: bool = False
    current: Turn | None = None
    turn_task: asyncio.Task[None] | None = field(default=None, repr=False)
    abort: tuple[str, str] | None = None  # (code, message) when a turn is ended from outside
    ended: bool = False  # the current turn's end is written: nothing left to abort
    fence: Fence | None = None  # the session's lease while this worker holds it
    lost: bool = False  # another process took the session over: write nothing more


class TurnManager:
    def __init__(
        self,
        *,
        turns: TurnStore,
        sessions: SessionStore,
        runner: TurnRunner,
        turn_timeout_s: float,
        steps: StepStore | None = None,
        leases: SessionLeases | None = None,
    ) -> None:
        self.steps = steps
        self.leases = leases
        self.turns = turns
        self.sessions = sessions
        self.runner = runner
        self.turn_timeout_s = turn_timeout_s
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
        worker = _Worker()
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
        self.runner.forget(session_id)

    def active_sessions(self) -> int:
        return len(self._workers)

    async def _work(self, session_id: str, worker: _Worker) -> None:
        writer.lane.set(session_id)  # this task's writes, and its turns', keep one order
        try:
            while not self._closing:
                worker.dirty = False
                claimed = await self._claim(session_id, worker)
                if claimed is None:
                    if worker.dirty:
                        continue
                    return
                turn = claimed.turn
                worker.current = turn
                worker.abort = None
                worker.ended = False
                worker.turn_task = asyncio.create_task(
                    self._run(turn, claimed.user_id, worker), name=turn.id
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
                if not claimed.more and not worker.dirty and worker.fence is None:
                    return
        except LeaseLost:
            worker.lost = True
            log.warning("session %s was taken over by another process", session_id)
        finally:
            if self._workers.get(session_id) is worker:
                del self._workers[session_id]
            await self._let_go(worker)

    async def _claim(self, session_id: str, worker: _Worker) -> Claimed | None:
        answer_waits = self.steps is not None
        if self.leases is None:
            return await self.turns.claim_next(session_id, answer_waits=answer_waits)
        owned = await self.turns.claim_owned(
            session_id,
            owner=self.leases.owner,
            ttl_s=self.leases.config.ttl_s,
            fence=worker.fence,
            answer_waits=answer_waits,
        )
        for turn_id in owned.interrupted:
            log.warning("turn %s was interrupted: the process running it stopped", turn_id)
        worker.fence = owned.fence
        # This task's writes, and its turns', carry the lease from now on (or none once it
        # let go; then it ends, or takes the lease again for a message accepted meanwhile).
        fences.current.set(owned.fence)
        if owned.fence is None:
            self.leases.held.pop(session_id, None)
        else:
            self.leases.held[session_id] = owned.fence.token
        return owned.claimed

    async def _let_go(self, worker: _Worker) -> None:
        """The worker ends still holding its lease (shut down, cancelled): release it, so that
        another process takes over what is left at once rather than when it expires."""
        held, worker.fence = worker.fence, None
        if held is None or self.leases is None:
            return
        if self.leases.held.get(held.session_id) == held.token:
            del self.leases.held[held.session_id]
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
        if worker is None or worker.fence is None or worker.fence.token != token:
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

    async def _run(self, turn: Turn, user_id: str, worker: _Worker) -> None:
        started = asyncio.get_running_loop().time()
        status = "failed"
        used = Usage()  # what the turn's model calls used: stored however the turn ends
        try:
            async with asyncio.timeout(self.turn_timeout_s) as limit:
                token = deadline.bind(limit)
                try:
                    await self.runner.run(turn, user_id, used)
                finally:
                    deadline.unbind(token)
            status = "completed"
        except TimeoutError:
            await self.turns.fail(
                turn,
                "turn_timeout",
                f"the turn did not finish within {self.turn_timeout_s:g}s",
                usage=used,
            )
        except Fault:
            log.exception("turn %s failed unexpectedly", turn.id)
            await self.turns.fail(
                turn, "internal_error", "the turn failed; see the service logs", usage=used
            )
        except HermesError as exc:  # the model failed, a limit was hit...: the caller's words
            await self.turns.fail(turn, exc.code, exc.message, usage=used)
        except LeaseLost:
            worker.lost = True  # the new owner ends this turn; this process writes nothing more
            log.warning("turn %s stopped: its session was taken over", turn.id)
        except asyncio.CancelledError:
            if worker.lost:
                raise
            if worker.abort is not None:
                await self.turns.fail(turn, *worker.abort, usage=used)
                return  # this turn is over; the worker goes on with the next one
            if self._closing:
                await self.turns.fail(
                    turn,
                    "interrupted",
                    "the service shut down before this turn finished",
                    usage=used,
                )
            else:
                await self.turns.fail(turn, "cancelled", "the turn was cancelled", usage=used)
            raise
        except Exception:
            log.exception("turn %s failed unexpectedly", turn.id)
            await self.turns.fail(
                turn, "internal_error", "the turn failed; see the service logs", usage=used
            )
        finally:
            worker.ended = True
            if status != "completed" and self.steps is not None and not worker.lost:
                await self.steps.close_open(turn.id)
            seconds = asyncio.get_running_loop().time() - started
            metrics.turn_finished(turn.tenant_id, status, seconds)

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
