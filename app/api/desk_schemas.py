"""Wire schemas of the desk: handoffs, the messages around them, contact summaries."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.api.schemas import Label, MessageOut, Strict, iso
from app.conversation.handoff import QueueItem


class RequestHandoff(Strict):
    reason: Label = Field("", max_length=500)


class CloseSession(Strict):
    disposition: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")


class LastMessage(BaseModel):
    author: str  # customer, bot or agent
    content: str
    created_at: str


class HandoffOut(BaseModel):
    id: str
    session_id: str
    status: Literal["waiting", "claimed", "released", "expired", "closed"]
    reason: str
    language: str
    requested_at: str
    requested_by: str
    claimed_by: str | None
    claimed_at: str | None
    released_at: str | None
    ticket_id: str | None
    position: int  # in the tenant's queue while waiting (1 = next), else 0
    expected_wait_s: float
    last_messages: list[LastMessage]
    summary: str

    @classmethod
    def of(cls, item: QueueItem) -> HandoffOut:
        h = item.handoff
        return cls(
            id=h.id,
            session_id=h.session_id,
            status=h.status,
            reason=h.reason,
            language=h.language,
            requested_at=iso(h.requested_at) or "",
            requested_by=h.requested_by,
            claimed_by=h.claimed_by,
            claimed_at=iso(h.claimed_at),
            released_at=iso(h.released_at),
            ticket_id=h.ticket_id,
            position=item.position,
            expected_wait_s=item.expected_wait_s,
            last_messages=[
                LastMessage(
                    author=str(
                        m.metadata.get("author") or ("customer" if m.role == "user" else "bot")
                    ),
                    content=m.content or "",
                    created_at=iso(m.created_at) or "",
                )
                for m in item.last_messages
            ],
            summary=item.summary,
        )


class HandoffList(BaseModel):
    data: list[HandoffOut]


class HeldMessage(BaseModel):
    """A customer's message while a human agent holds the session: stored, no bot turn."""

    status: Literal["held"] = "held"
    message: MessageOut


class SuggestionOut(BaseModel):
    suggestion_id: str
    text: str
    for_message_id: str | None


class ActionOut(BaseModel):
    tool: str
    status: str
    result: str


class SummaryOut(BaseModel):
    session_id: str
    intents: list[str]
    actions: list[ActionOut]
    open_items: list[str]
    disposition: str
    text: str
    ended_by: Literal["customer", "agent", "idle"]
    created_at: float

    @classmethod
    def of(cls, body: dict[str, Any]) -> SummaryOut:
        return cls.model_validate(body)
