"""Plain records read from and written to the database. No behaviour beyond (de)serialising."""

from __future__ import annotations

import json
import secrets
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Literal

from app.events import TERMINAL_TURN_EVENTS, EventType, as_sent

Role = Literal["system", "user", "assistant", "tool"]
SessionStatus = Literal["active", "archived"]
TurnStatus = Literal["queued", "running", "completed", "failed"]


def new_id(prefix: str, nbytes: int = 12) -> str:
    """A random, unguessable id from the OS CSPRNG, URL-safe: 96 bits (16 characters) unless
    asked for more.

    Session ids, which name what a customer's requests act on, take 144 bits
    (`SESSION_ID_BYTES`). Every other id (turn, message, step, call, approval) is only ever
    used under its session and its owner's checks; 96 bits is still far beyond guessing, and
    these ids are written many times a turn (events, steps, messages and their indexes), so
    each character counts in the bytes a turn leaves (issue 16). Older, longer ids stay valid.
    """
    return f"{prefix}_{secrets.token_urlsafe(nbytes)}"


SESSION_ID_BYTES = 18


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _loads(value: str | None, default: Any) -> Any:
    return default if value is None else json.loads(value)


@dataclass(frozen=True)
class Session:
    id: str
    tenant_id: str
    user_id: str
    status: SessionStatus
    metadata: dict[str, Any]
    created_at: float
    updated_at: float
    last_activity_at: float
    archived_at: float | None
    last_event_seq: int
    turn_count: int

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Session:
        return cls(
            id=row["id"],
            tenant_id=row["tenant_id"],
            user_id=row["user_id"],
            status=row["status"],
            metadata=_loads(row["metadata"], {}),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            last_activity_at=row["last_activity_at"],
            archived_at=row["archived_at"],
            last_event_seq=row["last_event_seq"],
            turn_count=row["turn_count"],
        )


@dataclass(frozen=True)
class Message:
    id: str
    session_id: str
    tenant_id: str
    turn_id: str | None
    role: Role
    content: str | None
    turn_number: int = 0
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    token_estimate: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    pk: int = 0

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Message:
        return cls(
            pk=row["pk"],
            id=row["id"],
            session_id=row["session_id"],
            tenant_id=row["tenant_id"],
            turn_id=row["turn_id"],
            turn_number=row["turn_number"],
            role=row["role"],
            content=row["content"],
            tool_calls=_loads(row["tool_calls"], None),
            tool_call_id=row["tool_call_id"],
            name=row["name"],
            token_estimate=row["token_estimate"],
            metadata=_loads(row["metadata"], {}),
            created_at=row["created_at"],
        )


@dataclass(frozen=True)
class Turn:
    id: str
    session_id: str
    tenant_id: str
    number: int
    client_message_id: str | None
    user_message_id: str
    status: TurnStatus
    assistant_message_id: str | None
    error_code: str | None
    error_message: str | None
    accepted_seq: int
    model: str | None
    rounds: int
    prompt_tokens: int
    completion_tokens: int
    created_at: float
    started_at: float | None
    finished_at: float | None
    resume_from_step: str | None = None
    cancel_requested_at: float | None = None  # another process asked to cancel it (0018)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Turn:
        return cls(**{name: row[name] for name in row.keys()})

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed")


@dataclass(frozen=True)
class Event:
    session_id: str
    seq: int
    tenant_id: str
    type: EventType
    data: dict[str, Any]
    turn_id: str | None
    created_at: float

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Event:
        return cls(
            session_id=row["session_id"],
            seq=row["seq"],
            tenant_id=row["tenant_id"],
            # Every type ever stored is in the catalogue (it only grows), so old rows load.
            type=EventType(row["type"]),
            data=as_sent(
                EventType(row["type"]), _with_turn_id(json.loads(row["data"]), row["turn_id"])
            ),
            turn_id=row["turn_id"],
            created_at=row["created_at"],
        )

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_TURN_EVENTS


def _with_turn_id(data: dict[str, Any], turn_id: str | None) -> dict[str, Any]:
    """A turn's event as it went on the wire: `Tx.emit` stores its turn id only in the row
    (rows stored before then still carry it in the payload too)."""
    if turn_id is None or "turn_id" in data:
        return data
    return {"turn_id": turn_id, **data}


@dataclass(frozen=True)
class Snapshot:
    session_id: str
    tenant_id: str
    summary: str = ""
    summary_version: int = 0
    summarized_turns: int = 0
    active_goal: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    pending_steps: list[Any] = field(default_factory=list)
    completed_steps: list[Any] = field(default_factory=list)
    updated_at: float = 0.0

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Snapshot:
        return cls(
            session_id=row["session_id"],
            tenant_id=row["tenant_id"],
            summary=row["summary"],
            summary_version=row["summary_version"],
            summarized_turns=row["summarized_turns"],
            active_goal=row["active_goal"],
            state=_loads(row["state"], {}),
            pending_steps=_loads(row["pending_steps"], []),
            completed_steps=_loads(row["completed_steps"], []),
            updated_at=row["updated_at"],
        )
