"""One worker per busy session runs its turns in order; nothing is held for idle sessions.

A turn runs as a task of its own, not as part of the HTTP request that brought it: a client
that disconnects does not cancel it, and anyone may follow it through the event stream.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from app.conversation.runner import TurnRunner
from app.errors import Fault, HermesError
from app.observability import metrics
from app.resilience import deadline
from app.storage.records import Turn
from app.storage.sessions import SessionStore
from app.storage.steps import StepStore
from app.storage.turns import TurnStore

log = logging.getLogger(__name__)


@dataclass
class _Worker:
    task: asyncio.Task[None] | None = None
    dirty: bool = False
    current: Turn | None = None
    turn_task: asyncio.Task[None] | None = field(default=None, repr=False)
    abort: tuple[str, str] | None = None  # (code, message) when a turn is ended from outside


class TurnManager:
    def __init__(
        self,
        *,
        turns: TurnStore,
        sessions: SessionStore,
        runner: TurnRunner,
        turn_timeout_s: float,
        steps: StepStore | None = None,
    ) -> None:
        self.steps = steps
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

    def forget(self, session_id: str) -> None:
        """The session's cached history is stale or no longer needed."""
        self.runner.forget(session_id)

    def active_sessions(self) -> int:
        return len(self._workers)

    async def _work(self, session_id: str, worker: _Worker) -> None:
        try:
            while not self._closing:
                worker.dirty = False
                claimed = await self.turns.claim_next(
                    session_id, answer_waits=self.steps is not None
                )
                if claimed is None:
                    if worker.dirty:
                        continue
                    return
                turn = claimed.turn
                worker.current = turn
                worker.abort = None
                worker.turn_task = asyncio.create_task(
                    self._run(turn, claimed.user_id, worker), name=turn.id
                )
                try:
                    await asyncio.shield(worker.turn_task)
                except asyncio.CancelledError:
                    worker.turn_task.cancel()  # the worker itself is being stopped
                    await asyncio.gather(worker.turn_task, return_exceptions=True)
                    raise
                finally:
                    worker.current = None
                    worker.turn_task = None
                # Nothing was queued behind this turn and nothing has been accepted since
                # (`wake` would have said so): no need to ask the database again.
                if not claimed.more and not worker.dirty:
                    return
        finally:
            if self._workers.get(session_id) is worker:
                del self._workers[session_id]

    async def abort(self, turn_id: str, code: str, message: str) -> bool:
        """End a running turn from outside (e.g. the watchdog); the session carries on."""
        for worker in self._workers.values():
            if worker.current is not None and worker.current.id == turn_id and worker.turn_task:
                worker.abort = (code, message)
                worker.turn_task.cancel()
                await asyncio.gather(worker.turn_task, return_exceptions=True)
                return True
        return False

    async def _run(self, turn: Turn, user_id: str, worker: _Worker) -> None:
        started = asyncio.get_running_loop().time()
        status = "failed"
        try:
            async with asyncio.timeout(self.turn_timeout_s) as limit:
                token = deadline.bind(limit)
                try:
                    await self.runner.run(turn, user_id)
                finally:
                    deadline.unbind(token)
            status = "completed"
        except TimeoutError:
            await self.turns.fail(
                turn, "turn_timeout", f"the turn did not finish within {self.turn_timeout_s:g}s"
            )
        except Fault:
            log.exception("turn %s failed unexpectedly", turn.id)
            await self.turns.fail(turn, "internal_error", "the turn failed; see the service logs")
        except HermesError as exc:  # the model failed, a limit was hit...: the caller's words
            await self.turns.fail(turn, exc.code, exc.message)
        except asyncio.CancelledError:
            if worker.abort is not None:
                await self.turns.fail(turn, *worker.abort)
                return  # this turn is over; the worker goes on with the next one
            if self._closing:
                await self.turns.fail(
                    turn, "interrupted", "the service shut down before this turn finished"
                )
            else:
                await self.turns.fail(turn, "cancelled", "the turn was cancelled")
            raise
        except Exception:
            log.exception("turn %s failed unexpectedly", turn.id)
            await self.turns.fail(turn, "internal_error", "the turn failed; see the service logs")
        finally:
            if status != "completed" and self.steps is not None:
                await self.steps.close_open(turn.id)
            metrics.TURNS.labels(status=status).inc()
            metrics.TURN_SECONDS.observe(asyncio.get_running_loop().time() - started)

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
        """At start-up: turns accepted but never started run now."""
        for session_id in await self.turns.queued_sessions():
            self.wake(session_id)
