"""Sessions and turns as the API sees them: every call is scoped to the caller's tenant.

What a request writes for a session names the session's `SessionWriter` (its lane, no lease:
the session's worker holds that): app/storage/session_writer.py."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, replace
from typing import Any

from app.conversation import interruptions
from app.conversation.budgets import TurnBudgets
from app.conversation.bus import EventBus, Follower
from app.conversation.cancels import CANCELLED, RemoteCancels
from app.conversation.handoff import HandoffDesk
from app.conversation.manager import TurnManager
from app.errors import (
    BudgetExceeded,
    Forbidden,
    NoRunningTurn,
    RateLimited,
    SessionNotFound,
    TurnFailed,
    TurnNotFound,
)
from app.principal import Principal
from app.settings import Settings
from app.storage.event_log import EventStore
from app.storage.messages import MessageStore
from app.storage.outage import when_reachable
from app.storage.records import Event, Message, Session, Turn
from app.storage.session_writer import SessionWriter
from app.storage.sessions import Page, SessionStore
from app.storage.turns import Accepted, BusyPolicy, TurnStore
from app.text.tokens import estimate_tokens
from app.tools.shaping import Redactor


@dataclass(frozen=True)
class ForAgent:
    """A customer's message stored for the human agent who holds the session: no turn."""

    message: Message


@dataclass(frozen=True)
class TurnLimits:
    busy_policy: BusyPolicy
    max_queued: int
    keepalive_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> TurnLimits:
        return cls(
            busy_policy=settings.turns.busy_policy,
            max_queued=settings.turns.max_queued,
            keepalive_s=settings.http.sse_keepalive_s,
        )


class ConversationService:
    """What the API asks of sessions and turns. `remote` cancels the turns other processes
    run: None exactly when turns run without leases (one process, as the in-process tests run
    them), where there is no other process to ask."""

    def __init__(
        self,
        *,
        sessions: SessionStore,
        turns: TurnStore,
        messages: MessageStore,
        events: EventStore,
        manager: TurnManager,
        bus: EventBus,
        limits: TurnLimits,
        desk: HandoffDesk,
        budgets: TurnBudgets,
        redactor: Redactor,
        remote: RemoteCancels | None,
    ) -> None:
        self.remote = remote
        self.redactor = redactor
        self.desk = desk
        self.budgets = budgets
        self.sessions = sessions
        self.turns = turns
        self.messages = messages
        self.events = events
        self.manager = manager
        self.bus = bus
        self.limits = limits

    # -- sessions -----------------------------------------------------------------------------

    async def create_session(
        self, principal: Principal, user_id: str, metadata: dict[str, Any]
    ) -> Session:
        if not principal.may_see_user(user_id):
            raise Forbidden("this key is bound to another user", user_id=principal.user_id)
        # A client's metadata is stored and shown as sent, but masked: it is no place for a
        # customer's phone or card number.
        return await self.sessions.create(
            principal.tenant_id, user_id, self.redactor.data(metadata)
        )

    async def get_session(self, principal: Principal, session_id: str) -> Session:
        """The tenant's session; a key bound to a user sees only that user's (else 404)."""
        session = await self.sessions.find(principal.tenant_id, session_id)
        if session is None or not principal.may_see_user(session.user_id):
            raise SessionNotFound("no such session", session_id=session_id)
        return session

    async def list_sessions(
        self,
        principal: Principal,
        *,
        user_id: str | None,
        status: str | None,
        limit: int,
        cursor: str | None,
    ) -> Page:
        if principal.user_id is not None:
            if user_id not in (None, principal.user_id):
                raise Forbidden("this key is bound to another user", user_id=principal.user_id)
            user_id = principal.user_id
        return await self.sessions.list_page(
            principal.tenant_id, user_id=user_id, status=status, limit=limit, cursor=cursor
        )

    async def delete_session(self, principal: Principal, session_id: str) -> None:
        await self.get_session(principal, session_id)
        await self.manager.cancel(session_id, "session_deleted", "the session was deleted")
        if not await self.sessions.delete(
            SessionWriter(session_id), principal.tenant_id, session_id
        ):
            raise SessionNotFound("no such session", session_id=session_id)
        self.manager.forget(session_id)
        self.bus.close_session(session_id)

    async def archive_idle(self, cutoff: float) -> list[str]:
        """Archive sessions idle since before `cutoff`; their histories leave memory."""
        archived = await self.sessions.archive_idle(cutoff)
        for session_id in archived:
            self.manager.forget(session_id)
            await self.desk.wrap_up_idle(session_id)  # the contact ended by itself: its summary
        return archived

    async def list_messages(
        self, principal: Principal, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[Message], str | None]:
        await self.get_session(principal, session_id)
        return await self.messages.page(principal.tenant_id, session_id, cursor=cursor, limit=limit)

    # -- turns --------------------------------------------------------------------------------

    async def post_message(
        self, principal: Principal, session_id: str, content: str, client_message_id: str | None
    ) -> Accepted | ForAgent:
        """A turn for the bot, or (while a human agent holds the session) the customer's
        message stored for the agent, with no turn."""
        if principal.user_id is not None:  # a key bound to a user: that user's sessions only
            await self.get_session(principal, session_id)
        kept = await self.desk.store_for_agent(principal, session_id, content)
        if kept is not None:
            return ForAgent(kept)
        await self._admit(principal, session_id, client_message_id)
        accepted = await self.turns.accept(
            SessionWriter(session_id),
            tenant_id=principal.tenant_id,
            session_id=session_id,
            content=content,
            token_estimate=estimate_tokens(content),
            client_message_id=client_message_id,
            policy=self.limits.busy_policy,
            max_queued=self.limits.max_queued,
        )
        if accepted is None:
            raise SessionNotFound("no such session", session_id=session_id)
        if accepted.resumed:
            self.manager.forget(session_id)
        if not accepted.created:
            return await self._replayed(accepted)
        self.manager.wake(session_id)
        return accepted

    async def _replayed(self, accepted: Accepted) -> Accepted:
        """A retried message (its `client_message_id` has a turn) is answered with that turn.
        One still queued may have been accepted by a commit whose answer was lost, so no
        worker was told: it is woken. One `interrupted` (the process running it stopped, or its
        database was away longer than the turn's time) is resumed from its first failed step,
        as a retry of that step would, when it is still the session's last turn: the client
        retrying its message gets the reply; tool calls keep their idempotency keys, so
        nothing done already is done again."""
        turn = accepted.turn
        if turn.status == "failed" and turn.error_code == "interrupted":
            found = await self.turns.transact(
                SessionWriter(turn.session_id), lambda tx: interruptions.reopen(tx, turn)
            )
            if found is None:
                return accepted
            turn = found
            accepted = replace(accepted, turn=turn)
        if turn.status == "queued":
            self.manager.wake(turn.session_id)
        return accepted

    async def _admit(
        self, principal: Principal, session_id: str, client_message_id: str | None
    ) -> None:
        """The principal's turn rate and the budgets allow a new turn; a retried message (its
        `client_message_id` already has a turn) is answered with that turn, never refused."""
        try:
            await self.budgets.admit(principal, session_id)
        except (BudgetExceeded, RateLimited):
            if client_message_id is None or (
                await self.turns.by_client_message_id(
                    principal.tenant_id, session_id, client_message_id
                )
                is None
            ):
                raise

    async def cancel_turn(self, principal: Principal, session_id: str) -> Turn:
        """End the session's running turn as `cancelled` (`turn.failed`, open steps closed, the
        session carries on with any queued turn), wherever it runs; the turn as it ended.
        A turn another process runs is ended there (`RemoteCancels`): `CancelTimeout` when
        that process does not end it in time."""
        await self.get_session(principal, session_id)
        running = self.manager.running(session_id)
        if running is not None and await self.manager.abort(running.id, *CANCELLED):
            ended = await self.turns.get(session_id, running.id)
            assert ended is not None
            return ended
        # Not running here: another process may run it (several processes, one database).
        if self.remote is not None:
            ended = await self.remote.cancel(session_id)
            if ended is not None:
                return ended
        raise NoRunningTurn("no turn of this session is running", session_id=session_id)

    def follow_turn(self, turn: Turn, after: int | None = None) -> AsyncGenerator[Event | None]:
        """The turn's events from its acceptance (or from after `after`, when that is later)
        to its end (None = keep-alive tick)."""
        start = turn.accepted_seq if after is None else max(turn.accepted_seq, after)
        if after is not None and turn.finished:
            # Everything is in the log already; a follower would wait forever for a terminal
            # event that lies before `after`.
            return self._logged_turn(turn, start)
        follower = Follower(
            self.bus,
            self.events,
            turn.session_id,
            after=start,
            keepalive_s=self.limits.keepalive_s,
            until=lambda e: e.turn_id == turn.id and e.terminal,
        )

        async def events() -> AsyncGenerator[Event | None]:
            try:
                async for event in follower:
                    if event is None or event.turn_id == turn.id:
                        yield event
            finally:
                await follower.aclose()

        return events()

    async def _logged_turn(self, turn: Turn, after: int) -> AsyncGenerator[Event | None]:
        while True:
            page = await self.events.after(turn.session_id, after)
            for event in page:
                if event.turn_id == turn.id:
                    yield event
                    if event.terminal:
                        return
            if not page:
                return
            after = page[-1].seq

    async def wait_for_turn(self, turn: Turn) -> tuple[Turn, Message]:
        """Block until the turn ends; its final message, or `TurnFailed`."""
        if not turn.finished:
            events = self.follow_turn(turn)
            try:
                async for _event in events:
                    pass
            finally:
                await events.aclose()
        final = await when_reachable(
            lambda: self.turns.get(turn.session_id, turn.id), f"waiting on turn {turn.id}"
        )
        if final is None:
            raise TurnNotFound("the turn no longer exists", turn_id=turn.id)
        if final.status != "completed" or final.assistant_message_id is None:
            raise TurnFailed.of(
                final.error_code or "turn_failed",
                final.error_message or "the turn failed",
                turn_id=final.id,
                session_id=final.session_id,
            )
        message_id = final.assistant_message_id
        message = await when_reachable(
            lambda: self.messages.get(message_id), f"waiting on turn {turn.id}"
        )
        assert message is not None
        return final, message

    async def follow_session(
        self, principal: Principal, session_id: str, after: int | None
    ) -> Follower:
        """Events after `after`, then live ones; with no `after`, only what happens from now."""
        session = await self.get_session(principal, session_id)
        if after is None:
            after = session.last_event_seq
        return Follower(
            self.bus,
            self.events,
            session_id,
            after=after,
            keepalive_s=self.limits.keepalive_s,
        )
