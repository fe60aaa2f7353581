"""Human takeover: the queue of sessions waiting for a person, the agent who holds one, agent
assist, the fallback when nobody comes, and the wrap-up when a session ends.

The runtime enforces the pause, not the desk page: while an agent holds a session its
customer's messages are stored for the agent (`post_message` asks
`HandoffStore.store_for_agent` first) and a worker never starts a bot turn for it
(`app.conversation.claims`, in the claiming transaction). The bot still drafts: an agent may ask
for a suggestion (`suggestion.ready`), which is never sent unless the agent sends it as their
own message.

Each write names the session's `SessionWriter` (app/storage/session_writer.py): what an agent or
operator asks for is written on the session's lane under no lease (`SessionWriter(session_id)`);
what a turn's end asks for (`turn_ended`) goes with the turn's writer, under its worker's lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from app.conversation.wrapup import (
    EndedBy,
    actions_of,
    contact_summary,
    describe,
    intents_of,
    open_items,
)
from app.errors import HandoffConflict, HandoffNotFound, SessionNotFound, SummaryNotFound
from app.knowledge.gaps import KnowledgeGaps, record_gap
from app.llm.gateway import ChatModel, ModelRequest, collect
from app.llm.messages import ChatMessage
from app.observability import metrics
from app.principal import Principal
from app.settings import HandoffSettings
from app.storage.handoffs import Handoff, HandoffStore, Requested
from app.storage.messages import MessageStore
from app.storage.records import Message, Turn, new_id
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.summaries import SummaryStore
from app.text.language import latest_language

log = logging.getLogger(__name__)

_POSITION = {
    "en": "I'm transferring you to a human agent. You are number {position} in the queue; the"
    " expected wait is about {minutes} minute(s).",
    "zh": "正在为您转接人工客服，您目前排在第 {position} 位，预计等待约 {minutes} 分钟。",
}
_FALLBACK = {
    "en": "Sorry, all our agents are busy right now. We have opened ticket {ticket} for you and"
    " an agent will call you back as soon as possible.",
    "zh": "非常抱歉，目前人工客服都在忙。我们已为您创建工单 {ticket}，客服会尽快给您回电。",
}
_DRAFT = (
    "You are drafting a reply for a human call-centre agent who has taken over this"
    " conversation. Write only the reply the agent could send to the customer next: brief,"
    " polite, in the customer's language. The agent reviews it before anything is sent."
)


@dataclass(frozen=True)
class HandoffConfig:
    fallback_s: float  # unclaimed this long: ticket + call-back
    wait_per_position_s: float  # expected wait = position x this
    sweep_s: float
    last_messages: int = 6  # shown with a queued handoff (not a setting)

    @classmethod
    def from_settings(cls, settings: HandoffSettings) -> HandoffConfig:
        return cls(settings.fallback_s, settings.wait_per_position_s, settings.sweep_interval_s)


@dataclass(frozen=True)
class QueueItem:
    handoff: Handoff
    position: int
    expected_wait_s: float
    last_messages: list[Message]
    summary: str


class HandoffDesk:
    def __init__(
        self,
        *,
        handoffs: HandoffStore,
        summaries: SummaryStore,
        sessions: SessionStore,
        messages: MessageStore,
        gaps: KnowledgeGaps,
        model: ChatModel,
        config: HandoffConfig,
        system_prompt: str,
        max_tokens: int = 500,
    ) -> None:
        self.handoffs = handoffs
        self.summaries = summaries
        self.sessions = sessions
        self.messages = messages
        self.gaps = gaps
        self.model = model
        self.config = config
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens

    # -- the queue ------------------------------------------------------------------------------

    async def request(
        self,
        writer: SessionWriter,
        tenant_id: str,
        session_id: str,
        reason: str,
        *,
        requested_by: str,
        language: str | None = None,
    ) -> Requested:
        if language is None:
            recent = await self.handoffs.recent_messages(session_id, self.config.last_messages)
            language = latest_language(
                m.content or "" for m in reversed(recent) if m.role == "user"
            )
        lang = language if language in _POSITION else "en"

        def notice(position: int, wait_s: float) -> str:
            minutes = max(1, round(wait_s / 60))
            return _POSITION[lang].format(position=position, minutes=minutes)

        requested = await self.handoffs.request(
            writer,
            tenant_id,
            session_id,
            reason=reason,
            language=lang,
            requested_by=requested_by,
            wait_per_position_s=self.config.wait_per_position_s,
            notice=notice,
        )
        if requested.created:
            await self._count_queue()
        return requested

    async def ask_for_person(self, principal: Principal, session_id: str, reason: str) -> Requested:
        """A person asked for through the API (by the customer's key, or by staff for them): a
        request's write, on the session's lane under no lease (its worker holds that)."""
        by = "customer" if principal.role == "customer" else principal.subject
        return await self.request(
            SessionWriter(session_id), principal.tenant_id, session_id, reason, requested_by=by
        )

    async def queue(self, principal: Principal, status: str, limit: int) -> list[QueueItem]:
        statuses = {
            "waiting": ("waiting",),
            "claimed": ("claimed",),
            "all": ("waiting", "claimed", "released", "expired", "closed"),
        }[status]
        items = await self.handoffs.queue(principal.tenant_id, statuses, limit)
        return [await self.describe(h, place) for place, h in _places(items)]

    async def get(self, principal: Principal, session_id: str) -> QueueItem:
        handoff = await self.handoffs.latest(principal.tenant_id, session_id)
        if handoff is None:
            raise HandoffNotFound("this session never asked for an agent", session_id=session_id)
        place = 0
        if handoff.status == "waiting":
            waiting = await self.handoffs.queue(principal.tenant_id, ("waiting",), 10_000)
            place = next((i for i, h in _places(waiting) if h.id == handoff.id), 0)
        return await self.describe(handoff, place)

    async def describe(self, handoff: Handoff, place: int) -> QueueItem:
        """The queue's view of a handoff: the last messages and an automatic summary."""
        messages = await self.summaries.conversation(handoff.session_id, 200)
        approvals = await self.summaries.pending_approvals(handoff.session_id)
        items = [i for i in open_items(messages, approvals, []) if "question" not in i]
        summary = describe(intents_of(messages), actions_of(messages), items)
        if handoff.reason:
            summary = f"{summary} Reason for the handoff: {handoff.reason}."
        texts = [m for m in messages if m.role in ("user", "assistant") and m.content]
        return QueueItem(
            handoff,
            place,
            place * self.config.wait_per_position_s,
            texts[-self.config.last_messages :],
            summary,
        )

    # -- the agent ------------------------------------------------------------------------------

    async def claim(self, principal: Principal, session_id: str) -> Handoff:
        handoff, changed = await self.handoffs.claim(
            SessionWriter(session_id),
            principal.tenant_id,
            session_id,
            principal.subject,
            principal.role,
        )
        if changed and handoff.claimed_at is not None:
            metrics.HANDOFF_WAIT_SECONDS.labels(outcome="claimed").observe(
                handoff.claimed_at - handoff.requested_at
            )
            await self._count_queue()
        return handoff

    async def release(self, principal: Principal, session_id: str) -> Handoff:
        return await self.handoffs.release(
            SessionWriter(session_id),
            principal.tenant_id,
            session_id,
            principal.subject,
            principal.role,
            override=principal.at_least("operator"),
        )

    async def agent_says(
        self, principal: Principal, session_id: str, text: str, suggestion_id: str | None
    ) -> Message:
        extra: dict[str, Any] = {"suggestion_id": suggestion_id} if suggestion_id else {}
        said = await self.handoffs.agent_says(
            SessionWriter(session_id),
            principal.tenant_id,
            session_id,
            principal.subject,
            text,
            extra,
        )
        await self._answered_by_a_human(said)
        return said

    async def _answered_by_a_human(self, said: Message) -> None:
        """The customer's message the agent's reply answers is a knowledge gap (`human`): the
        documents did not spare a person the work. Only the first reply to it counts."""
        asked = None
        for earlier in await self.messages.recent_before(said):
            if earlier.metadata.get("author") == "agent":
                return  # an agent already answered since the customer last wrote
            if earlier.role == "user":
                asked = earlier
                break
        if asked is None or not asked.content:
            return
        question = asked.content  # stored masked, like every message
        await self.gaps.transact(
            SessionWriter(said.session_id),
            lambda tx: record_gap(tx, said.tenant_id, question, "human"),
        )

    async def store_for_agent(
        self, principal: Principal, session_id: str, text: str
    ) -> Message | None:
        """The customer's message, stored for the agent when one holds the session."""
        return await self.handoffs.store_for_agent(
            SessionWriter(session_id), principal.tenant_id, session_id, text
        )

    async def suggest(self, principal: Principal, session_id: str) -> dict[str, Any]:
        """Draft a reply for the holding agent: announced as `suggestion.ready`, never sent."""
        handoff = await self.handoffs.latest(principal.tenant_id, session_id)
        if handoff is None or handoff.status != "claimed":
            raise HandoffConflict("suggestions are for a session an agent holds")
        if handoff.claimed_by != principal.subject:
            raise HandoffConflict("another agent holds this session", session_id=session_id)
        recent = await self.handoffs.recent_messages(session_id, 20)
        messages: list[ChatMessage] = [
            {"role": "system", "content": f"{self.system_prompt}\n\n{_DRAFT}"}
        ]
        for m in recent:
            if m.role == "user":
                messages.append({"role": "user", "content": m.content or ""})
            else:
                messages.append({"role": "assistant", "content": m.content or ""})
        reply = await collect(
            self.model.stream(
                ModelRequest(
                    messages=messages,
                    phase="text",
                    max_tokens=self.max_tokens,
                    metadata={"tenant_id": principal.tenant_id, "session_id": session_id},
                )
            )
        )
        last_customer = next((m.id for m in reversed(recent) if m.role == "user"), None)
        suggestion = {
            "suggestion_id": new_id("sug"),
            "text": reply.text.strip(),
            "for_message_id": last_customer,
        }
        await self.handoffs.announce_suggestion(SessionWriter(session_id), handoff, suggestion)
        return suggestion

    # -- the end of a session -------------------------------------------------------------------

    async def close(
        self, principal: Principal, session_id: str, disposition: str | None
    ) -> dict[str, Any]:
        """An agent ends the session: its open handoff closes, the session is archived and
        its contact summary written."""
        session = await self.sessions.find(principal.tenant_id, session_id)
        if session is None:
            raise SessionNotFound("no such session", session_id=session_id)
        writer = SessionWriter(session_id)
        await self.handoffs.close_open(writer, principal.tenant_id, session_id, principal.subject)
        body = await self._summary(session_id, "agent", disposition)
        if not await self.summaries.close_session(writer, session_id, principal.tenant_id, body):
            raise SessionNotFound("no such session", session_id=session_id)
        await self._count_queue()
        return body

    async def wrap_up(
        self, writer: SessionWriter, session_id: str, tenant_id: str, ended_by: EndedBy
    ) -> dict[str, Any]:
        """Write the contact summary of a session that ended on its own (goodbye, idle)."""
        body = await self._summary(session_id, ended_by, None)
        await self.summaries.save(writer, session_id, tenant_id, body)
        return body

    async def wrap_up_idle(self, session_id: str) -> None:
        try:
            tenant_id = await self.summaries.tenant_of(session_id)
            if tenant_id is not None:
                await self.wrap_up(SessionWriter(session_id), session_id, tenant_id, "idle")
        except Exception:  # one session's summary must not stop the sweep
            log.exception("wrap-up of idle session %s failed", session_id)

    async def summary(self, principal: Principal, session_id: str) -> dict[str, Any]:
        body = await self.summaries.get(principal.tenant_id, session_id)
        if body is None:
            if await self.sessions.find(principal.tenant_id, session_id) is None:
                raise SessionNotFound("no such session", session_id=session_id)
            raise SummaryNotFound("the session has not ended yet", session_id=session_id)
        return body

    async def _summary(
        self, session_id: str, ended_by: EndedBy, disposition: str | None
    ) -> dict[str, Any]:
        return contact_summary(
            session_id,
            messages=await self.summaries.conversation(session_id),
            pending_approvals=await self.summaries.pending_approvals(session_id),
            handoffs=await self.handoffs.of_session(session_id),
            ended_by=ended_by,
            disposition=disposition,
            ended_at=time.time(),
        )

    # -- after a turn, and in the background ----------------------------------------------------

    async def turn_ended(
        self, writer: SessionWriter, turn: Turn, intent: str | None, language: str | None
    ) -> None:
        """What the customer's words ask of the desk once the bot has answered: a person
        (`human_handoff`: queued), or the end (`goodbye`: the contact summary). Written with
        the turn's `writer`."""
        try:
            if intent == "human_handoff":
                await self.request(
                    writer,
                    turn.tenant_id,
                    turn.session_id,
                    "the customer asked for a person",
                    requested_by="customer",
                    language=language,
                )
            elif intent == "goodbye":
                await self.wrap_up(writer, turn.session_id, turn.tenant_id, "customer")
        except Exception:  # the turn is answered; the desk must not fail it
            log.exception("handoff desk: after turn %s", turn.id)

    async def expire_due(self, now: float | None = None) -> list[Handoff]:
        """Handoffs nobody claimed within `fallback_s`: ticket + call-back, customer told."""
        cutoff = (time.time() if now is None else now) - self.config.fallback_s

        def fallback(handoff: Handoff, ticket: str) -> str:
            return _FALLBACK.get(handoff.language, _FALLBACK["en"]).format(ticket=ticket)

        expired = await self.handoffs.expire_waiting(cutoff, fallback)
        for handoff in expired:
            metrics.HANDOFF_WAIT_SECONDS.labels(outcome="expired").observe(
                (handoff.released_at or cutoff) - handoff.requested_at
            )
        await self._count_queue()
        return expired

    async def run(self) -> None:
        """The background sweep: expire what waited too long, keep the queue gauge current."""
        while True:
            await asyncio.sleep(self.config.sweep_s)
            try:
                await self.expire_due()
            except Exception:
                log.exception("handoff sweep failed")

    async def _count_queue(self) -> None:
        metrics.HANDOFF_QUEUE.set(await self.handoffs.waiting_count())


def _places(items: list[Handoff]) -> list[tuple[int, Handoff]]:
    """Queue positions: waiting handoffs count from 1 in order; others have none (0)."""
    out, place = [], 0
    for handoff in items:
        if handoff.status == "waiting":
            place += 1
            out.append((place, handoff))
        else:
            out.append((0, handoff))
    return out
