"""Handoffs to a human agent: requested, claimed, released, expired or closed with the session.

A session has at most one open handoff (`waiting` or `claimed`; a unique index holds it across
processes). Each transition is one transaction with the events that announce it and, where the
customer is told something (their place in the queue, the fallback), the message that says it.
The words are the caller's (`app.conversation.handoff`): this module stores, it does not speak.

While a handoff is claimed no bot turn runs for the session: a customer's message is stored
here for the agent (`store_for_agent`), and a turn queued before the claim is failed when a
worker would start it (`claimed_by_agent`, read by `app.conversation.claims`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from app import events
from app.errors import HandoffConflict, HandoffNotFound, NotHandoffAgent, SessionNotFound
from app.storage import audit
from app.storage.messages import insert_message
from app.storage.records import Message, new_id
from app.storage.session_writer import SessionWriter
from app.storage.sessions import find_session
from app.storage.tx import Refused, Store, Tx

HandoffStatus = Literal["waiting", "claimed", "released", "expired", "closed"]
OPEN = ("waiting", "claimed")

# What the customer is told, in their language: (position, expected wait in s) -> text.
PositionNotice = Callable[[int, float], str]


@dataclass(frozen=True)
class Handoff:
    id: str
    session_id: str
    tenant_id: str
    status: HandoffStatus
    reason: str
    language: str
    requested_by: str
    requested_at: float
    claimed_by: str | None
    claimed_at: float | None
    released_at: float | None
    ticket_id: str | None

    @classmethod
    def from_row(cls, row: Any) -> Handoff:
        return cls(**{name: row[name] for name in _FIELDS})


_FIELDS = (
    "id",
    "session_id",
    "tenant_id",
    "status",
    "reason",
    "language",
    "requested_by",
    "requested_at",
    "claimed_by",
    "claimed_at",
    "released_at",
    "ticket_id",
)
_COLUMNS = ", ".join(_FIELDS)


@dataclass(frozen=True)
class Requested:
    handoff: Handoff
    created: bool  # False: the session was already waiting or held
    position: int  # 1 = next to be claimed (0 once claimed)


def open_handoff(tx: Tx, session_id: str) -> Handoff | None:
    row = tx.one(
        f"SELECT {_COLUMNS} FROM handoffs WHERE session_id = ?"
        " AND status IN ('waiting', 'claimed')" + tx.for_update,
        (session_id,),
    )
    return None if row is None else Handoff.from_row(row)


def position(tx: Tx, handoff: Handoff) -> int:
    """Where a waiting handoff stands in its tenant's queue (1 = next)."""
    (ahead,) = tx.one(
        "SELECT COUNT(*) FROM handoffs WHERE tenant_id = ? AND status = 'waiting'"
        " AND (requested_at < ? OR (requested_at = ? AND id < ?))",
        (handoff.tenant_id, handoff.requested_at, handoff.requested_at, handoff.id),
    ) or (0,)
    return int(ahead) + 1


def claimed_by_agent(tx: Tx, session_id: str) -> bool:
    """A human agent holds the session now (its handoff is claimed)."""
    row = tx.one(
        "SELECT 1 FROM handoffs WHERE session_id = ? AND status = 'claimed'", (session_id,)
    )
    return row is not None


def _last_turn(tx: Tx, session_id: str) -> tuple[str | None, int]:
    """The turn a message outside any turn joins: the session's last (conversation order is
    (turn number, insertion), so it comes after everything said so far)."""
    row = tx.one(
        "SELECT id, number FROM turns WHERE session_id = ? ORDER BY number DESC LIMIT 1",
        (session_id,),
    )
    return (None, 0) if row is None else (str(row[0]), int(row[1]))


def say(
    tx: Tx,
    handoff: Handoff,
    text: str,
    *,
    author: str,
    role: Literal["user", "assistant"] = "assistant",
    **extra: Any,
) -> Message:
    """Store a message outside any turn (the agent's, the customer's while held, the
    service's about the handoff) after everything said so far, and announce it."""
    turn_id, number = _last_turn(tx, handoff.session_id)
    metadata = {"author": author, "handoff_id": handoff.id, **extra}
    message = insert_message(
        tx,
        session_id=handoff.session_id,
        tenant_id=handoff.tenant_id,
        turn_id=turn_id,
        turn_number=number,
        role=role,
        content=text,
        token_estimate=max(1, len(text) // 3),
        metadata=metadata,
    )
    tx.execute(
        "UPDATE sessions SET last_activity_at = ?, updated_at = ? WHERE id = ?",
        (tx.now, tx.now, handoff.session_id),
    )
    if role == "user":
        event = events.message_received(message.id, text, author)
    else:
        event = events.desk_message(turn_id, message.id, text, author, extra)
    tx.emit(handoff.session_id, handoff.tenant_id, *event)
    return message


class HandoffStore(Store):
    async def request(
        self,
        writer: SessionWriter,
        tenant_id: str,
        session_id: str,
        *,
        reason: str,
        language: str,
        requested_by: str,
        wait_per_position_s: float,
        notice: PositionNotice | None,
    ) -> Requested:
        """Queue the session for a human agent (once: an open handoff is returned as it is),
        announce it and, with `notice`, tell the customer where they stand."""

        def request(tx: Tx) -> Requested | Refused:
            if find_session(tx, tenant_id, session_id) is None:
                return Refused(SessionNotFound("no such session", session_id=session_id))
            current = open_handoff(tx, session_id)
            if current is not None:
                place = position(tx, current) if current.status == "waiting" else 0
                return Requested(current, created=False, position=place)
            row = tx.one(
                f"INSERT INTO handoffs (id, session_id, tenant_id, status, reason, language,"
                f" requested_by, requested_at) VALUES (?, ?, ?, 'waiting', ?, ?, ?, ?)"
                f" RETURNING {_COLUMNS}",
                (new_id("hof"), session_id, tenant_id, reason, language, requested_by, tx.now),
            )
            handoff = Handoff.from_row(row)
            place = position(tx, handoff)
            wait = place * wait_per_position_s
            tx.emit(
                session_id,
                tenant_id,
                *events.handoff_requested(
                    handoff.id,
                    reason=reason,
                    requested_by=requested_by,
                    position=place,
                    expected_wait_s=wait,
                ),
            )
            if notice is not None:
                say(
                    tx,
                    handoff,
                    notice(place, wait),
                    author="bot",
                    kind="handoff_position",
                    position=place,
                    expected_wait_s=wait,
                )
            return Requested(handoff, created=True, position=place)

        return await self.transact(writer, request)

    async def claim(
        self, writer: SessionWriter, tenant_id: str, session_id: str, agent: str, role: str
    ) -> tuple[Handoff, bool]:
        """The agent takes the session: the bot is paused. Claiming one's own claim again is
        harmless (False: nothing changed); another agent's is a conflict. Audited."""

        def claim(tx: Tx) -> tuple[Handoff, bool] | Refused:
            handoff = _open_of(tx, tenant_id, session_id)
            if isinstance(handoff, Refused):
                return handoff
            if handoff.status == "claimed":
                if handoff.claimed_by == agent:
                    return handoff, False
                return Refused(
                    HandoffConflict("another agent holds this session", session_id=session_id)
                )
            row = tx.one(
                f"UPDATE handoffs SET status = 'claimed', claimed_by = ?, claimed_at = ?"
                f" WHERE id = ? RETURNING {_COLUMNS}",
                (agent, tx.now, handoff.id),
            )
            claimed = Handoff.from_row(row)
            waited = tx.now - handoff.requested_at
            tx.emit(session_id, tenant_id, *events.handoff_claimed(handoff.id, agent, waited))
            _audit(tx, handoff, agent, role, "handoff.claim", {"waited_s": round(waited, 3)})
            return claimed, True

        return await self.transact(writer, claim)

    async def release(
        self,
        writer: SessionWriter,
        tenant_id: str,
        session_id: str,
        agent: str,
        role: str,
        *,
        override: bool,
    ) -> Handoff:
        """Hand the session back to the bot (the claiming agent, or anyone with `override`)."""

        def release(tx: Tx) -> Handoff | Refused:
            handoff = _open_of(tx, tenant_id, session_id)
            if isinstance(handoff, Refused):
                return handoff
            if handoff.status != "claimed":
                return Refused(
                    HandoffConflict("nobody holds this session yet", session_id=session_id)
                )
            if handoff.claimed_by != agent and not override:
                return Refused(NotHandoffAgent(_NOT_YOURS, session_id=session_id))
            released = _end(tx, handoff, "released", agent)
            _audit(tx, handoff, agent, role, "handoff.release")
            return released

        return await self.transact(writer, release)

    async def agent_says(
        self,
        writer: SessionWriter,
        tenant_id: str,
        session_id: str,
        agent: str,
        text: str,
        extra: dict[str, Any],
    ) -> Message:
        """The holding agent's message to the customer (`message.completed`, author agent)."""

        def agent_says(tx: Tx) -> Message | Refused:
            handoff = _open_of(tx, tenant_id, session_id)
            if isinstance(handoff, Refused):
                return handoff
            if handoff.status != "claimed" or handoff.claimed_by != agent:
                return Refused(
                    HandoffConflict(
                        "claim the session before writing to its customer", session_id=session_id
                    )
                )
            return say(tx, handoff, text, author="agent", agent=agent, **extra)

        return await self.transact(writer, agent_says)

    async def store_for_agent(
        self, writer: SessionWriter, tenant_id: str, session_id: str, text: str
    ) -> Message | None:
        """While an agent holds the session: store the customer's message for them (no bot
        turn) and return it; otherwise None (the message becomes a turn).

        One read decides in the common case (no agent holds it); a claim that commits between
        this read and the turn's acceptance fails that turn before it starts
        (`app.conversation.claims`)."""
        claimed = await self.db.fetchone(
            "SELECT 1 FROM handoffs WHERE session_id = ? AND tenant_id = ? AND status = 'claimed'",
            (session_id, tenant_id),
        )
        if claimed is None:
            return None

        def for_agent(tx: Tx) -> Message | None:
            if find_session(tx, tenant_id, session_id) is None:
                return None
            handoff = open_handoff(tx, session_id)
            if handoff is None or handoff.status != "claimed":
                return None
            return say(tx, handoff, text, author="customer", role="user")

        return await self.transact(writer, for_agent)

    async def expire_waiting(
        self, cutoff: float, fallback: Callable[[Handoff, str], str]
    ) -> list[Handoff]:
        """Handoffs waiting since before `cutoff`: expired, a call-back ticket opened, the
        customer told (`fallback(handoff, ticket_id)`: the words). One transaction per
        session, on the session's lane (no lease: like a request, this task owns none of them);
        a handoff claimed meanwhile stays claimed."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM handoffs WHERE status = 'waiting' AND requested_at < ?"
            " ORDER BY requested_at LIMIT 100",
            (cutoff,),
        )
        done = []
        for row in rows:
            handoff = Handoff.from_row(row)
            expire = functools.partial(_expire, handoff=handoff, fallback=fallback)
            expired = await self.transact(SessionWriter(handoff.session_id), expire)
            if expired is not None:
                done.append(expired)
        return done

    async def close_open(
        self, writer: SessionWriter, tenant_id: str, session_id: str, actor: str
    ) -> Handoff | None:
        """The session ends: its open handoff (if any) closes with it."""

        def close(tx: Tx) -> Handoff | None:
            handoff = open_handoff(tx, session_id)
            if handoff is None or handoff.tenant_id != tenant_id:
                return None
            return _end(tx, handoff, "closed", actor)

        return await self.transact(writer, close)

    async def announce_suggestion(
        self, writer: SessionWriter, handoff: Handoff, suggestion: dict[str, Any]
    ) -> None:
        """A draft for the agent: an event only (the agent sends it, or not, as their own)."""
        event = events.suggestion_ready(
            suggestion["suggestion_id"], suggestion["text"], suggestion["for_message_id"]
        )
        await self.transact(
            writer, lambda tx: tx.emit(handoff.session_id, handoff.tenant_id, *event)
        )

    # -- reads ----------------------------------------------------------------------------------

    async def latest(self, tenant_id: str, session_id: str) -> Handoff | None:
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM handoffs WHERE session_id = ? AND tenant_id = ?"
            " ORDER BY requested_at DESC, id DESC LIMIT 1",
            (session_id, tenant_id),
        )
        return None if row is None else Handoff.from_row(row)

    async def of_session(self, session_id: str) -> list[Handoff]:
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM handoffs WHERE session_id = ? ORDER BY requested_at",
            (session_id,),
        )
        return [Handoff.from_row(r) for r in rows]

    async def queue(self, tenant_id: str, statuses: tuple[str, ...], limit: int) -> list[Handoff]:
        """A tenant's handoffs in these states, oldest request first."""
        marks = ", ".join("?" for _ in statuses)
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM handoffs WHERE tenant_id = ? AND status IN ({marks})"
            " ORDER BY requested_at, id LIMIT ?",
            (tenant_id, *statuses, limit),
        )
        return [Handoff.from_row(r) for r in rows]

    async def waiting_count(self) -> int:
        row = await self.db.fetchone("SELECT COUNT(*) FROM handoffs WHERE status = 'waiting'")
        return int(row[0]) if row else 0

    async def recent_messages(self, session_id: str, limit: int) -> list[Message]:
        """The last `limit` texts of the conversation (customer's, bot's, agent's), in order."""
        rows = await self.db.fetchall(
            "SELECT * FROM (SELECT pk, id, session_id, tenant_id, turn_id, turn_number, role,"
            " content, tool_calls, tool_call_id, name, token_estimate, metadata, created_at"
            " FROM messages WHERE session_id = ? AND role IN ('user', 'assistant')"
            " AND content IS NOT NULL AND content <> ''"
            " ORDER BY turn_number DESC, pk DESC LIMIT ?) AS recent ORDER BY turn_number, pk",
            (session_id, limit),
        )
        return [Message.from_row(r) for r in rows]


_NOT_YOURS = "another agent holds this session; only they or an operator may release it"


def _open_of(tx: Tx, tenant_id: str, session_id: str) -> Handoff | Refused:
    """The session's open handoff, or the refusal to act on it (returned: app/storage/tx.py)."""
    if find_session(tx, tenant_id, session_id) is None:
        return Refused(SessionNotFound("no such session", session_id=session_id))
    handoff = open_handoff(tx, session_id)
    if handoff is None:
        return Refused(
            HandoffNotFound("this session is not waiting for an agent", session_id=session_id)
        )
    return handoff


def _expire(tx: Tx, *, handoff: Handoff, fallback: Callable[[Handoff, str], str]) -> Handoff | None:
    ticket = "CB-" + handoff.id.removeprefix("hof_")[:10].upper()
    row = tx.one(
        f"UPDATE handoffs SET status = 'expired', released_at = ?, ticket_id = ?"
        f" WHERE id = ? AND status = 'waiting' RETURNING {_COLUMNS}",
        (tx.now, ticket, handoff.id),
    )
    if row is None:
        return None  # claimed (or closed) since it was read
    tx.emit(handoff.session_id, handoff.tenant_id, *events.handoff_expired(handoff.id, ticket))
    text = fallback(handoff, ticket)
    say(tx, handoff, text, author="bot", kind="handoff_fallback", ticket_id=ticket)
    return Handoff.from_row(row)


def _audit(
    tx: Tx,
    handoff: Handoff,
    actor: str,
    role: str,
    action: str,
    details: dict[str, Any] | None = None,
) -> None:
    audit.record(
        tx,
        tenant_id=handoff.tenant_id,
        actor=actor,
        role=role,
        action=action,
        target_id=handoff.id,
        session_id=handoff.session_id,
        details=details,
    )


def _end(tx: Tx, handoff: Handoff, status: HandoffStatus, actor: str) -> Handoff:
    row = tx.one(
        f"UPDATE handoffs SET status = ?, released_at = ? WHERE id = ? RETURNING {_COLUMNS}",
        (status, tx.now, handoff.id),
    )
    tx.emit(
        handoff.session_id,
        handoff.tenant_id,
        *events.handoff_released(handoff.id, actor, status),
    )
    return Handoff.from_row(row)
