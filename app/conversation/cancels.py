"""Cancelling a turn that runs in another Hermes process.

Behind a load balancer a cancel lands on any process, and a session's turn runs only in the one
that holds its lease. The process that answers the cancel and does not run the turn:
1. records the request on the turn, in the database (`app.storage.cancels`);
2. tells the owner at once when Redis is there (a message on the owner's control channel,
   `app.conversation.fanout`); without Redis, or if the message is lost, the owner finds the
   request itself within `check_s` (one probe of a partial index, only while it runs turns);
3. waits, up to `wait_s`, for the turn to end: its terminal event (live through Redis) or, every
   `poll_s`, the turn's row.
The owner ends the turn through the same path as a local cancel (`TurnManager.abort`): the
stream gets `turn.failed` (`cancelled`), open steps close, queued turns run.

The message only says "look now": the owner acts on what the database holds, so only an
authorised API request (the one that recorded it) can cancel a turn. A request belongs to its
turn: an owner that died leaves it to the process that takes the session over, which ends the
turn as `interrupted`, and nothing of the request reaches a later turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from app.conversation.bus import EventBus, Subscription
from app.conversation.manager import TurnManager
from app.errors import CancelTimeout, SessionNotFound
from app.storage.cancels import CancelRequest, CancelStore
from app.storage.records import Event, Turn
from app.storage.session_writer import SessionWriter
from app.storage.turns import TurnStore

log = logging.getLogger(__name__)

CANCELLED = ("cancelled", "the turn was cancelled")


class CancelSignal(Protocol):
    """Tells another process, at once, that a turn it runs has a cancel request."""

    async def cancel_requested(self, owner: str, session_id: str, turn_id: str) -> None: ...


class RemoteCancels:
    def __init__(
        self,
        *,
        store: CancelStore,
        turns: TurnStore,
        manager: TurnManager,
        bus: EventBus,
        owner: str,
        wait_s: float,
        check_s: float,
        signal: CancelSignal | None,  # None: no Redis; the owner finds a request within `check_s`
        poll_s: float = 0.2,
    ) -> None:
        self.store = store
        self.turns = turns
        self.manager = manager
        self.bus = bus
        self.owner = owner
        self.wait_s = wait_s
        self.check_s = check_s
        self.poll_s = poll_s
        self.signal = signal
        self._nudged = asyncio.Event()

    # -- the process that answers the cancel ----------------------------------------------------

    async def cancel(self, session_id: str) -> Turn | None:
        """Record a cancel for the session's running turn, tell its owner, and wait for the
        turn's end; the turn as it ended, or None when no turn of the session runs."""
        # A request's write: on the session's lane, under no lease (the owner's worker holds it).
        request = await self.store.request(SessionWriter(session_id), session_id)
        if request is None:
            return None
        turn = request.turn
        if request.owner == self.owner:
            self.nudge()  # it runs here after all (claimed just now)
        elif request.owner is not None and self.signal is not None:
            try:
                await self.signal.cancel_requested(request.owner, session_id, turn.id)
            except Exception:  # the owner finds the request on its own, a moment later
                log.warning("could not signal the cancel of turn %s", turn.id, exc_info=True)
        return await self._ended(request)

    async def _ended(self, request: CancelRequest) -> Turn:
        turn = request.turn
        with self.bus.subscribe(turn.session_id) as sub:
            try:
                async with asyncio.timeout(self.wait_s):
                    while True:
                        now = await self.turns.get(turn.session_id, turn.id)
                        if now is None:
                            raise SessionNotFound("no such session", session_id=turn.session_id)
                        if now.finished:
                            return now
                        await self._heard_end(sub, turn.id)
            except TimeoutError:
                raise CancelTimeout(
                    f"the turn runs in another Hermes process, which did not end it within"
                    f" {self.wait_s:g}s; the cancel stays requested until the turn ends",
                    session_id=turn.session_id,
                    turn_id=turn.id,
                    waited_s=self.wait_s,
                ) from None

    async def _heard_end(self, sub: Subscription, turn_id: str) -> None:
        """Until the turn's terminal event arrives, something else asks for a look at the log
        (a recheck, the session closed), or `poll_s` pass."""
        while True:
            item = await sub.get(self.poll_s)
            if not isinstance(item, Event) or (item.turn_id == turn_id and item.terminal):
                return

    # -- the process that runs the turn ---------------------------------------------------------

    def nudge(self) -> None:
        """Look for cancel requests now (a message from another process said there is one)."""
        self._nudged.set()

    async def check(self) -> list[str]:
        """End the turns this process runs that have a cancel request; the turns ended."""
        if not self.manager.running_turns():
            return []
        ended = []
        for _session_id, turn_id in await self.store.pending(self.owner):
            if await self.manager.abort(turn_id, *CANCELLED):
                log.info("turn %s cancelled at the request of another process", turn_id)
                ended.append(turn_id)
        return ended

    async def run(self) -> None:
        """For the process's life: check when nudged, and every `check_s` anyway."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nudged.wait(), self.check_s)
            self._nudged.clear()
            try:
                await self.check()
            except Exception:
                log.exception("looking for cancel requests failed")
