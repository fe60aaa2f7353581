"""Wire schemas of the REST API. Times are ISO 8601 in UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.storage.records import Message, Session, Turn, dumps

_ID = r"^[A-Za-z0-9_.:@+-]+$"
MAX_METADATA_BYTES = 16 * 1024


def _metadata_size(value: dict[str, Any]) -> dict[str, Any]:
    # Measured as stored (compact JSON, UTF-8): metadata is copied into every session read.
    size = len(dumps(value).encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"metadata is {size} bytes as JSON; at most {MAX_METADATA_BYTES} bytes (16 KiB) "
            "are allowed"
        )
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_metadata_size)]


def iso(ts: float | None) -> str | None:
    return (
        None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")
    )


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    error: ErrorBody


class CreateSession(Strict):
    user_id: str = Field(min_length=1, max_length=128, pattern=_ID)
    metadata: Metadata = Field(default_factory=dict)


class SessionOut(BaseModel):
    id: str
    user_id: str
    status: Literal["active", "archived"]
    metadata: dict[str, Any]
    turn_count: int
    last_event_seq: int
    created_at: str
    updated_at: str
    last_activity_at: str
    archived_at: str | None

    @classmethod
    def of(cls, s: Session) -> SessionOut:
        return cls(
            id=s.id,
            user_id=s.user_id,
            status=s.status,
            metadata=s.metadata,
            turn_count=s.turn_count,
            last_event_seq=s.last_event_seq,
            created_at=iso(s.created_at) or "",
            updated_at=iso(s.updated_at) or "",
            last_activity_at=iso(s.last_activity_at) or "",
            archived_at=iso(s.archived_at),
        )


class SessionList(BaseModel):
    items: list[SessionOut]
    next_cursor: str | None


class PostMessage(Strict):
    content: str = Field(min_length=1, max_length=32_000)
    client_message_id: str | None = Field(None, min_length=1, max_length=128, pattern=_ID)


class MessageOut(BaseModel):
    id: str
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    turn_id: str | None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str

    @classmethod
    def of(cls, m: Message) -> MessageOut:
        return cls(
            id=m.id,
            role=m.role,
            content=m.content,
            turn_id=m.turn_id,
            tool_calls=m.tool_calls,
            tool_call_id=m.tool_call_id,
            name=m.name,
            metadata=m.metadata,
            created_at=iso(m.created_at) or "",
        )


class MessageList(BaseModel):
    items: list[MessageOut]
    next_cursor: str | None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int


class TurnOut(BaseModel):
    turn_id: str
    session_id: str
    status: Literal["queued", "running", "completed", "failed"]
    user_message_id: str
    message: MessageOut | None
    model: str | None
    rounds: int
    usage: Usage

    @classmethod
    def of(cls, t: Turn, message: Message | None) -> TurnOut:
        return cls(
            turn_id=t.id,
            session_id=t.session_id,
            status=t.status,
            user_message_id=t.user_message_id,
            message=None if message is None else MessageOut.of(message),
            model=t.model,
            rounds=t.rounds,
            usage=Usage(prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens),
        )


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    version: str
    uptime_s: float
    checks: dict[str, str]
